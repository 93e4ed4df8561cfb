"""Rules on the FSx for Lustre file system (``cluster_services.fsx``): what CreateFileSystem or
CreateDataRepositoryAssociation would refuse, and what would deploy but not serve the training pods.

Config-only rules run before the provider is configured; ``fsx-in-training-pool-zone`` needs the AWS facts
(the zones the training pool's nodes run in); ``fsx-mount-path-free`` needs the runtime's trainer config
(its data cache directory).
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.core.config import Role
from infra.fsx import constraints as fsx_facts
from infra.network.zones import pool_zones, vpc_zones
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule, warning
from infra.storage.config.storage import StorageBackend

S3_REPOSITORIES_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html"
PERFORMANCE_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html"
VOLUMES_DOC = "https://kubernetes.io/docs/concepts/storage/volumes/"
# Where the runtime mounts its memory-backed /dev/shm (infra/training/documents/runtime.py).
SHM_PATH = "/dev/shm"


def _field(*parts: str) -> str:
    return at("cluster_services", "fsx", *parts)


def _enabled(ctx: RuleContext) -> bool:
    return ctx.cfg.cluster_services.fsx.enabled


@rule("fsx-storage-capacity")
def fsx_storage_capacity(ctx: RuleContext) -> Iterator[Finding]:
    """CreateFileSystem takes 1200, 2400 or a multiple of 2400 GiB for persistent SSD file systems."""
    fsx = ctx.cfg.cluster_services.fsx
    if not _enabled(ctx) or fsx_facts.capacity_valid(fsx.storage_capacity_gib):
        return
    near = " or ".join(str(g) for g in fsx_facts.nearest_capacities(fsx.storage_capacity_gib))
    yield error(
        _field("storage_capacity_gib"),
        f"{fsx.storage_capacity_gib} GiB is not a capacity CreateFileSystem accepts for "
        f"{fsx.deployment_type.value} (SSD: 1200, 2400 or a multiple of 2400 GiB)",
        f"use {near}",
        fsx_facts.CREATE_FILE_SYSTEM_DOC,
    )


@rule("fsx-throughput-tier")
def fsx_throughput_tier(ctx: RuleContext) -> Iterator[Finding]:
    """PerUnitStorageThroughput is one of the deployment type's tiers (PERSISTENT_2: 125/250/500/1000)."""
    fsx = ctx.cfg.cluster_services.fsx
    tiers = fsx_facts.THROUGHPUT_TIERS[fsx.deployment_type]
    if not _enabled(ctx) or fsx.per_unit_storage_throughput in tiers:
        return
    yield error(
        _field("per_unit_storage_throughput"),
        f"{fsx.per_unit_storage_throughput} MB/s/TiB is not a throughput tier of "
        f"{fsx.deployment_type.value} (SSD: {', '.join(map(str, tiers))})",
        f"use one of {', '.join(map(str, tiers))}",
        fsx_facts.CREATE_FILE_SYSTEM_DOC,
    )


@rule("fsx-needs-datasets-bucket")
def fsx_needs_datasets_bucket(ctx: RuleContext) -> Iterator[Finding]:
    """The file system links the stack's S3 datasets bucket: train stacks with the S3 backend only."""
    cfg = ctx.cfg
    if not _enabled(ctx):
        return
    if cfg.role is Role.infer:
        yield error(
            _field("enabled"),
            "true on an infer stack, which has no datasets bucket and runs no training pods",
            "turn it on in the train stack (role: train) instead",
            S3_REPOSITORIES_DOC,
        )
    elif cfg.storage.backend is not StorageBackend.s3:
        yield error(
            _field("enabled"),
            f"true but storage.backend is {cfg.storage.backend.value}: the datasets are in MinIO, and a data "
            "repository association links an S3 bucket (s3://bucket/prefix) only",
            "use storage.backend: s3, or turn fsx off",
            S3_REPOSITORIES_DOC,
        )


@rule("fsx-needs-training-runtime")
def fsx_needs_training_runtime(ctx: RuleContext) -> Iterator[Finding]:
    """The file system lives in the training pool's zone and is mounted by the training runtime."""
    if _enabled(ctx) and ctx.cfg.role is Role.train and ctx.cfg.training is None:
        yield error(
            _field("enabled"),
            "true but the stack has no training section: the file system is placed in the training "
            "pool's zone and mounted by the training runtime",
            "add training.runtime (its pool decides the zone), or turn fsx off",
        )


@rule("fsx-in-training-pool-zone", needs=[Need.facts])
def fsx_in_training_pool_zone(ctx: RuleContext) -> Iterator[Finding]:
    """One zone (FSx takes exactly one subnet), and it is the training pool's: the pods read it in-zone."""
    assert ctx.facts is not None
    cfg = ctx.cfg
    fsx = cfg.cluster_services.fsx
    pool = fsx_facts.fsx_pool(cfg)
    if not _enabled(ctx) or pool is None or pool not in cfg.node_pools:
        return  # refused by fsx-needs-training-runtime / training-runtime-pool
    zones = pool_zones(cfg, ctx.facts, pool)
    field = _field("availability_zone")
    if fsx.availability_zone is None:
        if len(zones) > 1:
            yield error(
                field,
                f"not set, and training pool {pool!r} runs in {len(zones)} zones {list(zones)}; a Lustre "
                "file system is created in exactly one subnet, so one zone",
                f"set availability_zone to one of {list(zones)}, or pin the pool to one zone "
                "(node_pools.<pool>.availability_zones)",
                fsx_facts.CREATE_FILE_SYSTEM_DOC,
            )
        return
    if fsx.availability_zone not in vpc_zones(cfg, ctx.facts):
        yield error(
            field,
            f"{fsx.availability_zone!r} is not a zone of the VPC {list(vpc_zones(cfg, ctx.facts))}: there "
            "is no subnet to create the file system in",
            f"use the training pool's zone{'s' if len(zones) > 1 else ''} {list(zones)}",
            fsx_facts.CREATE_FILE_SYSTEM_DOC,
        )
    elif fsx.availability_zone not in zones:
        yield error(
            field,
            f"{fsx.availability_zone!r} is not a zone of training pool {pool!r} {list(zones)}: every read "
            "of the training pods would cross zones (latency, and inter-zone transfer billed both ways)",
            f"use {list(zones)[0] if len(zones) == 1 else 'one of ' + str(list(zones))}",
            PERFORMANCE_DOC,
        )


@rule("fsx-mount-path-free", needs=[Need.trainer])
def fsx_mount_path_free(ctx: RuleContext) -> Iterator[Finding]:
    """The mount path is not the runtime's /dev/shm or data cache, nor inside or above them."""
    assert ctx.trainer is not None
    fsx = ctx.cfg.cluster_services.fsx
    runtime = ctx.trainer.get("runtime")
    if not _enabled(ctx) or ctx.cfg.training is None or runtime is None or runtime.error:
        return
    mount = fsx.mount_path.rstrip("/")
    for what, other in (("the shared memory volume", SHM_PATH), ("the NVMe data cache", runtime.cache_dir)):
        other = other.rstrip("/")
        if mount == other or mount.startswith(other + "/") or other.startswith(mount + "/"):
            yield error(
                _field("mount_path"),
                f"{fsx.mount_path!r} overlaps {what} the runtime mounts at {other!r}: the pod would be "
                "refused (duplicate mountPath) or one volume would hide the other",
                "pick another path, e.g. /fsx",
                VOLUMES_DOC,
            )


@rule("fsx-runs-datasets")
def fsx_runs_datasets(ctx: RuleContext) -> Iterator[Finding]:
    """Runs that should read from the file system have their dataset under the linked prefix."""
    cfg = ctx.cfg
    fsx = cfg.cluster_services.fsx
    if not _enabled(ctx) or not fsx.runs_read_datasets or cfg.training is None:
        return
    for name, run in cfg.training.runs.items():
        if run.team is not None:
            continue  # team runs read their own prefix from S3 (infra/training/documents/stack.py)
        key = cfg.storage.trainer_dataset_key(run.dataset)
        if fsx_facts.dataset_path(fsx, key) is None:
            yield warning(
                at("training", "runs", name, "dataset"),
                f"{key!r} is outside the prefix the file system links "
                f"({fsx.repository_prefix!r}), so this run downloads it from S3",
                "move the dataset under data_repository_prefix, or widen the prefix",
                S3_REPOSITORIES_DOC,
            )


@rule("fsx-export-has-writers")
def fsx_export_has_writers(ctx: RuleContext) -> Iterator[Finding]:
    """Automatic export only matters when something writes to the file system."""
    fsx = ctx.cfg.cluster_services.fsx
    if _enabled(ctx) and fsx.export_events and fsx.read_only:
        yield warning(
            _field("export_events"),
            f"{[str(e) for e in fsx.export_events]} but read_only is true: the training pods cannot write, "
            "so nothing is exported",
            "set read_only: false to let the pods write (and export) results, or drop export_events",
            S3_REPOSITORIES_DOC,
        )
