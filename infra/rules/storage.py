"""Rules on the in-cluster MinIO store: whether its pods can be scheduled where the platform puts them.

They need the AWS facts (the system pools' instance types), so they run after the config-only rules.
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.model import allocatable
from infra.model.config.schema import MinioMode, StorageBackend
from infra.model.config.services import KubernetesAccess
from infra.model.trainjobs import quantity_mib
from infra.rules.base import Finding, Need, RuleContext, at, error, rule

ALLOCATABLE_DOC = (
    "https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable"
)


@rule("minio-fits-system-pools", needs=[Need.facts])
def minio_fits_system_pools(ctx: RuleContext) -> Iterator[Finding]:
    """MinIO's pods (replicas x resources.requests.memory) fit on the pools that run system pods.

    MinIO is pinned to the managed pools that run system pods (gpu: false, no NoSchedule/NoExecute taint;
    the wiring's ``minio_pools``), so only their ``desired_size`` nodes count (desired_size is what the node
    group runs: nothing scales it). Each node offers its estimated allocatable memory
    (``infra/model/allocatable.py``: nominal memory less Karpenter's VM overhead estimate, nodeadm's
    kubeReserved and the eviction threshold), less the memory requests the platform itself sets on these
    nodes: the Karpenter controller's (``KARPENTER_CONTROLLER_RESOURCES``, one replica per node by the chart's
    hostname anti-affinity; placed on the nodes with the most room, as the scheduler's LeastAllocated
    scoring would), when Karpenter is deployed. MinIO's own pods may share a node (our values set no
    anti-affinity), so the count is a per-node bin packing.

    Not counted (requests we do not set, from chart or add-on defaults at their pinned versions, or none):
    CoreDNS and the EBS CSI controller (EKS add-ons), metrics-server, cert-manager, the load balancer
    controller, kube-prometheus-stack (operator, Prometheus, Alertmanager, Grafana, kube-state-metrics),
    KEDA, the Kubeflow Trainer / JobSet controllers, FSx CSI, and the DaemonSets (aws-node, kube-proxy,
    node-exporter). Together they request a few hundred MiB per cluster, within the margin of the allocatable
    estimate (Karpenter's 7.5% VM overhead is above what e.g. an m5.large loses, 5.4%), but a config right at
    the edge may still leave a pod Pending. CPU requests are not checked.
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
