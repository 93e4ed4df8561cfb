"""ArtifactReplication: S3 replication of published models (``release/`` of the artifacts bucket) to each
inference region. Only ``release/`` replicates, and delete markers do not: what the training region deletes
stays served in the inference regions until someone removes it there on purpose.

The train stack owns everything replication needs: per inference region a customer-managed key (the
replica key: objects are re-encrypted under a key of that region), a replica bucket set (artifacts + its
access logs, built by ``Buckets``) and, once, the IAM role S3 assumes to replicate. The other regions are
reached with pulumi-aws v7's per-resource ``region`` argument on the stack's one provider, so default tags
and credentials stay the same. Inference stacks read the replica names from this stack's outputs through a
StackReference (all stacks must share one state backend).
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-config-for-kms-objects.html
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.core import iam
from infra.keys.component.kms import customer_managed_key
from infra.keys.documents.kms_policy import KeyAccess, KeyPurpose
from infra.resources.aws import fixed_name
from infra.storage import documents as storage_documents
from infra.storage.component.buckets import Buckets, BucketsArgs, NoncurrentRule


@dataclass(frozen=True, kw_only=True)
class ReplicaTarget:
    """Names of the buckets in one inference region."""

    bucket_name: str
    log_bucket_name: str


@dataclass(frozen=True, kw_only=True)
class ArtifactReplicationArgs:
    """Inputs of ArtifactReplication: the source artifacts bucket and its key, and the target regions.

    ``replica_key_alias`` names the replica key in every target region (aliases are per region);
    ``key_access`` the replica keys' administrators, break-glass role and protection (its ``region`` is
    replaced by each target's); ``prefix`` is what replicates (``release``).
    """

    env_prefix: str
    replica_key_alias: str
    keyset: str
    key_access: KeyAccess
    prefix: str = "release"
    min_tls: str = "1.2"
    source_bucket_name: pulumi.Input[str]
    source_bucket_arn: pulumi.Input[str]
    source_key_arn: pulumi.Input[str]
    source_region: str
    targets: Mapping[str, ReplicaTarget]
    account_id: str
    partition: str
    abort_multipart_days: int
    log_expire_days: int
    noncurrent_expire_days: int
    deletion_window_days: int = 30
    # What makes the source ready for replication (its versioning): the rules wait for it.
    source_ready: Sequence[pulumi.Resource] = ()
    # who may write the replicas' release/ (break-glass only) and administer them
    release_guard: storage_documents.ReleaseGuard | None = None
    # the replication role's name, fixed so that the source bucket's policy can exempt it before it exists
    role_name: str | None = None


class ArtifactReplication(pulumi.ComponentResource):
    """Replica keys and buckets in the inference regions, the replication role and rules."""

    replica_key_arns: dict[str, pulumi.Output[str]]
    replica_bucket_names: dict[str, pulumi.Output[str]]
    replica_bucket_arns: dict[str, pulumi.Output[str]]
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ArtifactReplicationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:replication:ArtifactReplication", name, None, opts)
        if not args.targets:
            raise ValueError("ArtifactReplication needs at least one target region")
        child = pulumi.ResourceOptions(parent=self)
        self.keys: dict[str, aws.kms.Key] = {}
        self.replicas: dict[str, Buckets] = {}
        for region, target in sorted(args.targets.items()):
            key = customer_managed_key(
                f"{name}-{region}-key",
                purpose=KeyPurpose.data,
                description=f"{args.env_prefix}: replica of model artifacts in {region}",
                alias=args.replica_key_alias,
                name_tag=args.replica_key_alias.removeprefix("alias/"),
                keyset=args.keyset,
                access=dataclasses.replace(args.key_access, region=region),
                deletion_window_days=args.deletion_window_days,
                parent=self,
                in_other_region=True,
            )
            self.keys[region] = key
            self.replicas[region] = Buckets(
                f"{name}-{region}",
                BucketsArgs(
                    names={"artifacts": target.bucket_name},
                    log_bucket_name=target.log_bucket_name,
                    kms_key_arn=key.arn,
                    account_id=args.account_id,
                    partition=args.partition,
                    abort_multipart_days=args.abort_multipart_days,
                    log_expire_days=args.log_expire_days,
                    noncurrent={"artifacts": NoncurrentRule(expire_days=args.noncurrent_expire_days)},
                    region=region,
                    protect=args.key_access.protect,
                    min_tls=args.min_tls,
                    load_balancer_logs=True,  # the inference ALBs of the Region log here
                    release_guards={"artifacts": args.release_guard} if args.release_guard else {},
                ),
                opts=child,
            )

        regions = sorted(args.targets)
        self.role = aws.iam.Role(
            f"{name}-role",
            name=args.role_name,
            # aws:SourceAccount only: AWS's replication role examples do not show which other
            # confused-deputy keys S3 sends when it assumes the role.
            # https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html
            assume_role_policy=json.dumps(iam.service_trust_policy("s3.amazonaws.com", args.account_id)),
            description="S3 replicates model artifacts to the inference regions",
            opts=fixed_name(child),
        )
        dest = [(self.replicas[r].bucket_arns["artifacts"], self.keys[r].arn) for r in regions]
        aws.iam.RolePolicy(
            f"{name}-role-policy",
            role=self.role.id,
            policy=pulumi.Output.all(
                args.source_bucket_arn, args.source_key_arn, *[x for pair in dest for x in pair]
            ).apply(
                lambda v: json.dumps(
                    storage_documents.replication_policy(
                        source_bucket_arn=v[0],
                        source_key_arn=v[1],
                        source_region=args.source_region,
                        destinations=[(v[2 + 2 * i], v[3 + 2 * i], r) for i, r in enumerate(regions)],
                        prefix=args.prefix,
                    )
                )
            ),
            opts=child,
        )
        aws.s3.BucketReplicationConfig(
            f"{name}-rules",
            bucket=args.source_bucket_name,
            role=self.role.arn,
            rules=[
                aws.s3.BucketReplicationConfigRuleArgs(
                    id=f"releases-to-{region}",
                    priority=i,
                    status="Enabled",
                    # Published models only; the trainer's runs stay in the training region.
                    filter=aws.s3.BucketReplicationConfigRuleFilterArgs(prefix=f"{args.prefix}/"),
                    # A delete in the training region never removes what production serves.
                    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/delete-marker-replication.html
                    delete_marker_replication=aws.s3.BucketReplicationConfigRuleDeleteMarkerReplicationArgs(
                        status="Disabled"
                    ),
                    # Only SSE-KMS objects exist in the source; S3 skips them unless this is on.
                    source_selection_criteria=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaArgs(
                        sse_kms_encrypted_objects=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaSseKmsEncryptedObjectsArgs(  # noqa: E501
                            status="Enabled"
                        )
                    ),
                    destination=aws.s3.BucketReplicationConfigRuleDestinationArgs(
                        bucket=self.replicas[region].bucket_arns["artifacts"],
                        storage_class="STANDARD",
                        encryption_configuration=aws.s3.BucketReplicationConfigRuleDestinationEncryptionConfigurationArgs(  # noqa: E501
                            replica_kms_key_id=self.keys[region].arn
                        ),
                    ),
                )
                for i, region in enumerate(regions)
            ],
            # Replication needs versioning on both sides.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*self.replicas.values(), *args.source_ready]
            ),
        )

        self.replica_key_arns = {r: k.arn for r, k in self.keys.items()}
        self.replica_bucket_names = {r: b.bucket_names["artifacts"] for r, b in self.replicas.items()}
        self.replica_log_bucket_names = {r: b.log_bucket_name for r, b in self.replicas.items()}
        self.replica_bucket_arns = {r: b.bucket_arns["artifacts"] for r, b in self.replicas.items()}
        self.role_arn = self.role.arn
        self.register_outputs(
            {
                "replica_key_arns": self.replica_key_arns,
                "replica_bucket_names": self.replica_bucket_names,
                "replica_bucket_arns": self.replica_bucket_arns,
                "role_arn": self.role_arn,
            }
        )
