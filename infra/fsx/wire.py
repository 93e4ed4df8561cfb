"""Wiring of the optional FSx for Lustre file system (``cluster_services.fsx``): config + facts -> the AWS
side (``SharedFileSystem``: security group, log group, file system, link to the datasets bucket) and, when
the stack applies Kubernetes objects, the cluster side (``LustreVolume``: CSI driver, PersistentVolume,
claim in the trainer's namespace). The training runtime mounts the claim
(``infra/training/documents/stack.py``).

The rules (``infra/fsx/rules.py``) have refused every config this cannot place: the zone is decided, the
stack is a train stack with the S3 backend and a training runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core import naming
from infra.core.namespaces import PART_OF
from infra.fsx import constraints as fsx_facts
from infra.fsx import documents as fsx_docs
from infra.fsx.component.filesystem import LogSettings, SharedFileSystem, SharedFileSystemArgs
from infra.fsx.component.volume import LustreVolume, LustreVolumeArgs
from infra.fsx.config import LustreLogLevel
from infra.keys.component.kms import KmsKeys
from infra.mirror.wire import cached_chart
from infra.network.component import GpuVpc
from infra.services.wire import SYSTEM_NAMESPACE, ClusterServicesWiring
from infra.storage.wire import StorageWiring


@dataclass
class FsxWiring:
    """What the FSx wiring created; ``volume`` (None with ``kubernetes_access: skip``) is what the training
    runtime waits for."""

    file_system: SharedFileSystem
    volume: LustreVolume | None


def wire_fsx(
    ctx: StackContext,
    cluster: ClusterWiring,
    keys: KmsKeys,
    network: GpuVpc,
    storage: StorageWiring,
    services: ClusterServicesWiring | None,
) -> FsxWiring | None:
    """Create the file system and its volume when ``cluster_services.fsx.enabled``; exports
    ``sharedFileSystem``."""
    cfg, names = ctx.cfg, ctx.names
    fsx = cfg.cluster_services.fsx
    if not fsx.enabled:
        return None
    zone = fsx_facts.fsx_zone(cfg, ctx.facts)
    pool = fsx_facts.fsx_pool(cfg)
    assert zone is not None and pool is not None, "refused by the fsx rules"
    bucket = fsx_facts.linked_bucket(cfg)
    log = (
        LogSettings(
            group_name=naming.fsx_log_group(names.stack_prefix),
            level=fsx.log_level.value,
            retention_days=fsx.log_retention_days,
            kms_key_arn=keys.logs_key_arn,
        )
        if fsx.log_level is not LustreLogLevel.DISABLED
        else None
    )
    eks = cluster.cluster
    file_system = SharedFileSystem(
        "fsx",
        SharedFileSystemArgs(
            name_tag=f"{names.stack_prefix}-fsx",
            vpc_id=network.vpc_id,
            subnet_id=network.private_subnet_ids[zone],
            # every node carries the cluster security group (managed node groups and Karpenter nodes)
            client_security_group_ids=[eks.cluster_security_group_id],
            deployment_type=fsx.deployment_type.value,
            storage_capacity_gib=fsx.storage_capacity_gib,
            per_unit_storage_throughput=fsx.per_unit_storage_throughput,
            file_system_type_version=fsx.file_system_type_version,
            # the data key: the file system holds copies of the datasets bucket's objects
            kms_key_arn=keys.data_key_arn,
            data_repository_path=fsx_docs.data_repository_path(bucket, fsx.repository_prefix),
            file_system_path=fsx.file_system_path,
            import_events=[e.value for e in fsx.import_events],
            export_events=[e.value for e in fsx.export_events],
            import_metadata_on_create=fsx.import_metadata_on_create,
            imported_file_chunk_size_mib=fsx.imported_file_chunk_size_mib,
            weekly_maintenance_start_time=fsx.weekly_maintenance_start_time,
            log=log,
        ),
        # the association lists the bucket: it must exist first (and the data key's policy with it)
        opts=pulumi.ResourceOptions(
            provider=ctx.provider, depends_on=[storage.buckets] if storage.buckets is not None else []
        ),
    )
    volume = None
    if services is not None:
        volume = LustreVolume(
            "fsx-volume",
            LustreVolumeArgs(
                chart=cached_chart(ctx, fsx.csi_driver),
                driver_namespace=SYSTEM_NAMESPACE,
                driver_values=fsx_docs.csi_driver_values(region=cfg.region, pools=[pool]),
                file_system_id=file_system.file_system_id,
                dns_name=file_system.dns_name,
                mount_name=file_system.mount_name,
                capacity_gib=fsx.storage_capacity_gib,
                claim_namespace=cfg.storage.trainer.namespace,
                labels=dict(PART_OF),
            ),
            opts=pulumi.ResourceOptions(
                provider=eks.k8s_provider,
                depends_on=[*services.after_nodes, services.gate, services.namespaces],
            ),
        )
    exported = {
        "fileSystemId": file_system.file_system_id,
        "dnsName": file_system.dns_name,
        "mountName": file_system.mount_name,
        "availabilityZone": zone,
        "dataRepositoryPath": fsx_docs.data_repository_path(bucket, fsx.repository_prefix),
        "fileSystemPath": fsx.file_system_path,
    }
    if volume is not None:
        exported["claim"] = f"{cfg.storage.trainer.namespace}/{fsx_docs.CLAIM_NAME}"
        exported["mountPath"] = fsx.mount_path
    ctx.export("sharedFileSystem", exported)
    return FsxWiring(file_system=file_system, volume=volume)
