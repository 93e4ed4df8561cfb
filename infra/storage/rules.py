"""Rules on the in-cluster MinIO store: whether its pods can be scheduled where the platform puts them.

They need the AWS facts (the system pools' instance types), so they run after the config-only rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.core import allocatable
from infra.core.config import Environment, KubernetesAccess
from infra.core.trainjobs import quantity_mib
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule
from infra.storage.config.security import ObjectLockMode
from infra.storage.config.storage import MinioMode, StorageBackend

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

ALLOCATABLE_DOC = (
    "https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable"
)


@rule("minio-fits-system-pools", needs=[Need.facts])
def minio_fits_system_pools(ctx: RuleContext) -> Iterator[Finding]:
    """MinIO's pods (replicas x resources.requests.memory) fit on the pools that run system pods.

    Only the ``desired_size`` nodes of the wiring's ``minio_pools`` count (nothing scales them). Each node
    offers its estimated allocatable memory (``infra/core/allocatable.py``) less the Karpenter controller's
    requests (``KARPENTER_CONTROLLER_RESOURCES``, one replica per node, placed on the roomiest nodes as
    LeastAllocated would) when Karpenter is deployed; MinIO's pods may share a node, so it is a bin packing.
    Requests we do not set (EKS add-ons, the other charts, DaemonSets) are not counted: a few hundred MiB per
    cluster, within the estimate's margin, so a config right at the edge may still leave a pod Pending.
    CPU is not checked.
    """
    cfg = ctx.cfg
    minio = cfg.storage.minio
    if (
        cfg.storage.backend is not StorageBackend.minio
        or minio is None
        or cfg.cluster_services.kubernetes_access is KubernetesAccess.skip  # minio-needs-cluster-services
    ):
        return
    assert ctx.facts is not None
    pools = {name: p for name, p in sorted(cfg.node_pools.items()) if p.runs_system_pods}
    if not pools:
        return  # the rule system-pool refuses this
    free: list[int] = []
    for pool in pools.values():
        facts = ctx.facts.instances.get(pool.instance_type)
        if facts is None:
            return  # the type is not offered here: the offering rules refuse it
        free += [allocatable.allocatable_memory_mib(facts)] * pool.desired_size
    karpenter = cfg.cluster_services.karpenter
    controllers = min(karpenter.replicas, len(free)) if karpenter.node_pools else 0
    free.sort(reverse=True)
    for i in range(controllers):
        free[i] -= allocatable.KARPENTER_CONTROLLER_MEMORY_MIB
    pods = minio.replicas if minio.mode is MinioMode.distributed else 1
    memory = minio.resources.requests.memory
    fits = allocatable.pods_that_fit(free, quantity_mib(memory))
    if fits >= pods:
        return
    nodes = ", ".join(f"{n}: {p.desired_size} x {p.instance_type}" for n, p in pools.items())
    room = f"about {max(free, default=0)} MiB free on the roomiest node"
    if controllers:
        room += f" after the Karpenter controller's {allocatable.KARPENTER_CONTROLLER_MEMORY_MIB} MiB"
    largest = allocatable.largest_request_that_fits(free, pods)
    fix = (
        f"set storage.minio.resources.requests.memory to at most {largest}Mi"
        if largest > 0
        else "lower storage.minio.replicas"
    ) + ", or give the system pools more nodes (desired_size) or a larger instance type"
    what = f"{pods} pods of {memory} do" if pods != 1 else f"1 pod of {memory} does"
    distributed = minio.mode is MinioMode.distributed
    quorum = " and distributed MinIO never reaches write quorum" if distributed else ""
    yield error(
        at("storage", "minio", "resources", "requests", "memory"),
        f"{what} not fit on the pools that run system pods ({nodes}; {room}): only {fits} of {pods} pods "
        f"can be scheduled, the rest stay Pending{quorum}",
        fix,
        ALLOCATABLE_DOC,
    )


def trail_object_lock_mode(cfg: PlatformConfig) -> ObjectLockMode:
    """``security.audit.object_lock_mode``, or COMPLIANCE in prod and GOVERNANCE in dev when unset.

    COMPLIANCE: a trail log cannot be deleted or overwritten before its retention ends by anyone, which is
    what an audit record must hold; the price is that a wrong retention cannot be shortened (only the
    account's closure removes the objects). https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html
    """
    mode = cfg.security.audit.object_lock_mode
    if mode is not None:
        return mode
    return ObjectLockMode.COMPLIANCE if cfg.environment is Environment.prod else ObjectLockMode.GOVERNANCE
