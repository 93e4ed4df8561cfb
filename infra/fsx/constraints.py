"""FSx for Lustre facts the plan checks and derives from (pure): valid capacities and throughput tiers per
deployment type, the file system's zone, and where a dataset of the bucket appears on the mount.

Sources (Amazon FSx API reference, CreateFileSystem; the same text is in botocore's ``fsx/2018-03-01``
service model):
- ``StorageCapacity``: "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment types using SSD storage
  type, the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB."
- ``PerUnitStorageThroughput``: "For PERSISTENT_1 SSD storage: 50, 100, 200 MB/s/TiB. [...] For PERSISTENT_2
  SSD storage: 125, 250, 500, 1000 MB/s/TiB."
- ``SubnetIds``: "For Windows SINGLE_AZ_1 and SINGLE_AZ_2 and all Lustre deployment types, provide exactly
  one subnet ID. The file server is launched in that subnet's Availability Zone."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.core.facts import RegionFacts
from infra.fsx.config import FsxConfig, LustreDeploymentType
from infra.network.zones import pool_zones
from infra.storage.config.storage import BucketPurpose

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

CREATE_FILE_SYSTEM_DOC = "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html"

# MB/s/TiB per deployment type (SSD).
THROUGHPUT_TIERS: dict[LustreDeploymentType, tuple[int, ...]] = {
    LustreDeploymentType.PERSISTENT_1: (50, 100, 200),
    LustreDeploymentType.PERSISTENT_2: (125, 250, 500, 1000),
}
# SSD capacity: 1200, 2400, then increments of 2400 GiB (both persistent types).
CAPACITY_SMALL_GIB = (1200, 2400)
CAPACITY_STEP_GIB = 2400


def capacity_valid(gib: int) -> bool:
    """Whether CreateFileSystem accepts ``gib`` for a persistent SSD file system."""
    return gib in CAPACITY_SMALL_GIB or (gib > 0 and gib % CAPACITY_STEP_GIB == 0)


def nearest_capacities(gib: int) -> tuple[int, ...]:
    """The valid capacities around ``gib`` (the one below, if any, and the one above)."""
    if gib < CAPACITY_SMALL_GIB[0]:
        return (CAPACITY_SMALL_GIB[0],)
    if gib < CAPACITY_SMALL_GIB[1]:
        return CAPACITY_SMALL_GIB
    below = gib // CAPACITY_STEP_GIB * CAPACITY_STEP_GIB
    return (below, below + CAPACITY_STEP_GIB)


def throughput_mbps(fsx: FsxConfig) -> float:
    """The file system's baseline throughput (MB/s): capacity in TiB times the per-unit throughput."""
    return fsx.storage_capacity_gib / 1024 * fsx.per_unit_storage_throughput


def linked_bucket(cfg: PlatformConfig) -> str:
    """The bucket the file system links: the stack's datasets bucket."""
    return cfg.bucket_name(BucketPurpose.datasets)


def fsx_pool(cfg: PlatformConfig) -> str | None:
    """The pool whose pods mount the file system: the training runtime's (None without a training section)."""
    return cfg.training.runtime.pool if cfg.training is not None else None


def fsx_zone(cfg: PlatformConfig, facts: RegionFacts) -> str | None:
    """The file system's zone: ``availability_zone``, else the training pool's zone when it has one only.
    None when it cannot be decided (the rule ``fsx-in-training-pool-zone`` says why)."""
    fsx = cfg.cluster_services.fsx
    pool = fsx_pool(cfg)
    if fsx.availability_zone is not None:
        return fsx.availability_zone
    if pool is None or pool not in cfg.node_pools:
        return None
    zones = pool_zones(cfg, facts, pool)
    return zones[0] if len(zones) == 1 else None


def dataset_path(fsx: FsxConfig, dataset: str) -> str | None:
    """Where ``s3://<datasets bucket>/<dataset>`` appears in the pods: under ``mount_path`` at
    ``file_system_path`` (the association maps that directory 1:1 to ``data_repository_prefix``). None when
    the dataset lies outside the linked prefix."""
    dataset = dataset.strip("/")
    prefix = fsx.repository_prefix
    if prefix:
        if dataset != prefix and not dataset.startswith(prefix + "/"):
            return None
        rest = dataset[len(prefix) :].strip("/")
    else:
        rest = dataset
    parts = [fsx.mount_path.rstrip("/") + fsx.directory, rest]
    return "/".join(p for p in parts if p)
