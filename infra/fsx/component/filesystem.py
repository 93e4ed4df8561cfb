"""SharedFileSystem: an FSx for Lustre file system in one private subnet, linked to an S3 bucket.

Children: the file system's security group (Lustre ports from itself and the client groups, and the same
ports opened on the client groups from it), an optional log group for data repository events (encrypted,
our retention, before the file system so FSx never creates its unencrypted default group), the file
system (persistent, encrypted under our KMS key, no automatic backups) and its data repository association
(DRA) with the bucket prefix.

- CreateFileSystem: https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html
- Security groups: https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html
- Linking to S3: https://docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html
- pulumi-aws 7.51.1 ``fsx.LustreFileSystem`` takes ``subnet_ids`` as one string (one subnet);
  ``import_path``/``auto_import_policy`` are the legacy link, not supported with PERSISTENT_2: the DRA is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.fsx.documents import LUSTRE_PORTS
from infra.resources.aws import fixed_name
from infra.resources.options import child_options


def _lustre_rules(
    rule: type[aws.vpc.SecurityGroupIngressRule] | type[aws.vpc.SecurityGroupEgressRule],
    resource_prefix: str,
    group: pulumi.Input[str],
    peer: pulumi.Input[str],
    direction: str,
    opts: pulumi.ResourceOptions,
) -> None:
    """One ``rule`` (ingress or egress) of ``group`` per Lustre port range, with ``peer``'s group;
    ``direction`` ("from x"/"to x") ends each rule's description."""
    for low, high in LUSTRE_PORTS:
        ports = f"{low}" if low == high else f"{low}-{high}"
        rule(
            f"{resource_prefix}-{low}",
            security_group_id=group,
            referenced_security_group_id=peer,
            ip_protocol="tcp",
            from_port=low,
            to_port=high,
            description=f"Lustre TCP {ports} {direction}",
            opts=opts,
        )


@dataclass(frozen=True, kw_only=True)
class LogSettings:
    """The data repository event log: ``group_name`` (must begin with ``/aws/fsx``), level, retention and
    the KMS key that encrypts it."""

    group_name: str
    level: str
    retention_days: int
    kms_key_arn: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class SharedFileSystemArgs:
    """Plain arguments of the file system.

    ``client_security_group_ids``: the groups of the nodes that mount it (the cluster security group);
    ``data_repository_path``: ``s3://bucket/prefix/``; ``file_system_path``: the directory linked to it;
    ``import_events``/``export_events``: automatic import/export (empty: off); ``log``: None = logging off.
    """

    name_tag: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    client_security_group_ids: Sequence[pulumi.Input[str]]
    deployment_type: str
    storage_capacity_gib: int
    per_unit_storage_throughput: int
    file_system_type_version: str
    kms_key_arn: pulumi.Input[str]
    data_repository_path: str
    file_system_path: str
    import_events: Sequence[str] = ()
    export_events: Sequence[str] = ()
    import_metadata_on_create: bool = True
    imported_file_chunk_size_mib: int | None = None
    weekly_maintenance_start_time: str | None = None
    log: LogSettings | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


class SharedFileSystem(pulumi.ComponentResource):
    """The file system, its security group and its link to S3."""

    file_system_id: pulumi.Output[str]
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    association_id: pulumi.Output[str]

    def __init__(self, name: str, args: SharedFileSystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:fsx:SharedFileSystem", name, None, opts)
        child = child_options(self, opts)
        tags = {**args.tags, "Name": args.name_tag}

        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description=f"FSx for Lustre {args.name_tag}: Lustre traffic with its clients",
            tags=tags,
            opts=child,
        )
        # CreateFileSystem fails unless the group admits Lustre traffic from itself ("do not permit Lustre
        # LNET network traffic on port 988"); file servers talk to each other and to the clients both ways.
        peers: list[tuple[str, pulumi.Input[str]]] = [("self", sg.id)] + [
            (f"client{i}", g) for i, g in enumerate(args.client_security_group_ids)
        ]
        for peer, group in peers:
            _lustre_rules(
                aws.vpc.SecurityGroupIngressRule, f"{name}-in-{peer}", sg.id, group, f"from {peer}", child
            )
            _lustre_rules(
                aws.vpc.SecurityGroupEgressRule, f"{name}-out-{peer}", sg.id, group, f"to {peer}", child
            )
        # The clients' side: Lustre traffic from the file servers (their egress is already open).
        for i, group in enumerate(args.client_security_group_ids):
            _lustre_rules(
                aws.vpc.SecurityGroupIngressRule,
                f"{name}-client{i}-from-fsx",
                group,
                sg.id,
                f"from FSx {args.name_tag}",
                child,
            )

        depends: list[pulumi.Resource] = []
        if args.log is not None:
            log_group = aws.cloudwatch.LogGroup(
                f"{name}-logs",
                name=args.log.group_name,
                retention_in_days=args.log.retention_days,
                kms_key_id=args.log.kms_key_arn,
                opts=fixed_name(child),
            )
            depends.append(log_group)
            log_configuration = aws.fsx.LustreFileSystemLogConfigurationArgs(
                level=args.log.level, destination=log_group.arn
            )
        else:
            log_configuration = aws.fsx.LustreFileSystemLogConfigurationArgs(level="DISABLED")

        self.file_system = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            subnet_ids=args.subnet_id,
            security_group_ids=[sg.id],
            deployment_type=args.deployment_type,
            storage_type="SSD",
            storage_capacity=args.storage_capacity_gib,
            per_unit_storage_throughput=args.per_unit_storage_throughput,
            file_system_type_version=args.file_system_type_version,
            kms_key_id=args.kms_key_arn,
            # The bucket is the durable, versioned copy; and "Data repositories cannot be linked to file
            # systems that have file system backups enabled" (create-dra-linked-data-repo.md in the archived
            # awsdocs/amazon-fsx-lustre-user-guide; whether FSx still refuses it was not confirmed).
            automatic_backup_retention_days=0,
            weekly_maintenance_start_time=args.weekly_maintenance_start_time,
            log_configuration=log_configuration,
            tags=tags,
            opts=child_options(self, opts, depends_on=depends),
        )
        s3 = None
        if args.import_events or args.export_events:
            s3 = aws.fsx.DataRepositoryAssociationS3Args(
                auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                    events=list(args.import_events)
                )
                if args.import_events
                else None,
                auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                    events=list(args.export_events)
                )
                if args.export_events
                else None,
            )
        self.association = aws.fsx.DataRepositoryAssociation(
            f"{name}-dra",
            file_system_id=self.file_system.id,
            data_repository_path=args.data_repository_path,
            file_system_path=args.file_system_path,
            batch_import_meta_data_on_create=args.import_metadata_on_create,
            imported_file_chunk_size=args.imported_file_chunk_size_mib,
            # deleting the link never deletes files (nor, without export, anything in the bucket)
            delete_data_in_filesystem=False,
            s3=s3,
            tags=tags,
            opts=child,
        )
        self.file_system_id = self.file_system.id
        self.dns_name = self.file_system.dns_name
        self.mount_name = self.file_system.mount_name
        self.security_group_id = sg.id
        self.association_id = self.association.association_id
        self.register_outputs(
            {
                "file_system_id": self.file_system_id,
                "dns_name": self.dns_name,
                "mount_name": self.mount_name,
                "security_group_id": self.security_group_id,
                "association_id": self.association_id,
            }
        )
