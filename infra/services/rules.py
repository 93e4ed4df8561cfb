"""Rules on the cluster services: what the charts, Karpenter and the Kubernetes API access need.

Config-only rules run before the provider is configured; ``karpenter-gpu-types-offered`` needs the AWS facts
(the types of the pools' families offered in the VPC's zones) and runs again in ``aiplat preflight`` on the
account's own offerings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.core.config import KubernetesAccess, Role
from infra.core.instance_types import EFA_PLUGIN_REFRESH, EFA_PLUGIN_SOURCE, EFA_PLUGIN_TYPES
from infra.karpenter.gpu_offers import gpu_offer
from infra.network.zones import vpc_zones
from infra.stack.registry import PLAN_AND_PREFLIGHT, Finding, Need, RuleContext, at, error, rule
from infra.storage.config.storage import StorageBackend

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

EFA_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html"
ENDPOINT_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html"
KARPENTER_NODEPOOL_DOC = "https://karpenter.sh/docs/concepts/nodepools/"
KARPENTER_NODECLASS_DOC = "https://karpenter.sh/docs/concepts/nodeclasses/#spectags"
CA_ISSUER_DOC = "https://cert-manager.io/docs/configuration/ca/"
# Tag keys Karpenter sets itself; the EC2NodeClass CRD refuses them in spec.tags (v1.14.1 CEL rules).
KARPENTER_RESTRICTED_TAGS = (
    "kubernetes.io/cluster/",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
    "eks:eks-cluster-name",
)
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default", "cert-manager")


def _k8s_applied(ctx: RuleContext) -> bool:
    return ctx.cfg.cluster_services.kubernetes_access is not KubernetesAccess.skip


@rule("cluster-services-need-system-pool")
def cluster_services_need_system_pool(ctx: RuleContext) -> Iterator[Finding]:
    """Controllers (Karpenter, load balancer controller, cert-manager, ...) run on a CPU pool without hard
    taints (gpu: false; the publisher's pool is tainted for its pods alone)."""
    if _k8s_applied(ctx) and not any(p.runs_system_pods for p in ctx.cfg.node_pools.values()):
        yield error(
            at("node_pools"),
            "no pool with gpu: false and no NoSchedule/NoExecute taint, so the cluster services' controllers "
            "have nowhere to run (GPU pools are tainted nvidia.com/gpu and may scale to zero)",
            "add a system pool, e.g. system: {instance_type: m6i.xlarge, gpu: false, min_size: 2}",
        )


@rule("kubernetes-access-public-needs-cidrs")
def kubernetes_access_public_needs_cidrs(ctx: RuleContext) -> Iterator[Finding]:
    """``kubernetes_access: public_cidrs`` needs a public endpoint (cluster.endpoint_public_access_cidrs)."""
    services = ctx.cfg.cluster_services
    if (
        services.kubernetes_access is KubernetesAccess.public_cidrs
        and not ctx.cfg.cluster.endpoint_public_access_cidrs
    ):
        yield error(
            at("cluster_services", "kubernetes_access"),
            "public_cidrs but cluster.endpoint_public_access_cidrs is empty: the API endpoint is private "
            "and cannot be reached from outside the VPC",
            "list the CIDRs pulumi up runs from in cluster.endpoint_public_access_cidrs, or set "
            "kubernetes_access: in_vpc and run pulumi up inside the VPC",
            ENDPOINT_DOC,
        )


@rule("efa-plugin-knows-types", needs=[Need.facts])
def efa_plugin_knows_types(ctx: RuleContext) -> Iterator[Finding]:
    """The EFA device plugin chart version lists every EFA pool's instance type (else it never runs there).

    Types AWS says have no EFA are left to the rule ``efa-supported``."""
    assert ctx.facts is not None
    chart = ctx.cfg.cluster_services.efa_device_plugin
    efa_types = set()
    for p in ctx.cfg.node_pools.values():
        facts = ctx.facts.instances.get(p.instance_type)
        if p.efa and facts is not None and facts.efa_supported:
            efa_types.add(p.instance_type)
    if not efa_types or not _k8s_applied(ctx):
        return
    field = at("cluster_services", "efa_device_plugin", "version")
    supported = EFA_PLUGIN_TYPES.get(chart.version)
    if supported is None:
        yield error(
            field,
            f"{chart.version} is not a chart version whose instance list is recorded, so its support for "
            f"{sorted(efa_types)} cannot be checked",
            f"use {', '.join(EFA_PLUGIN_TYPES)}, or record {chart.version}'s list from the chart with "
            f"`{EFA_PLUGIN_REFRESH}` (the aws/eks-charts commit of that version)",
            EFA_PLUGIN_SOURCE,
        )
        return
    missing = sorted(efa_types - supported)
    if missing:
        yield error(
            field,
            f"{chart.version} does not list {', '.join(missing)} in supportedInstanceLabels, so the plugin "
            "never runs there and pods asking for vpc.amazonaws.com/efa stay Pending",
            "use a chart version whose values.yaml lists the type (record its list with "
            f"`{EFA_PLUGIN_REFRESH}`), or another EFA instance type",
            EFA_DOC,
        )


@rule("minio-needs-cluster-services")
def minio_needs_cluster_services(ctx: RuleContext) -> Iterator[Finding]:
    """The MinIO backend gets its namespaces, StorageClass and CA issuer from the cluster services."""
    cfg = ctx.cfg
    minio = cfg.storage.minio
    if cfg.storage.backend is not StorageBackend.minio or minio is None:
        return
    services = cfg.cluster_services
    if services.kubernetes_access is KubernetesAccess.skip:
        yield error(
            at("cluster_services", "kubernetes_access"),
            "skip but storage.backend is minio, which runs in the cluster",
            "set kubernetes_access: in_vpc (or public_cidrs) and run pulumi up where the API is reachable",
            ENDPOINT_DOC,
        )
    if not services.cert_manager.enabled:
        yield error(
            at("cluster_services", "cert_manager", "enabled"),
            "false but MinIO's TLS certificate comes from cert-manager",
            "set cert_manager.enabled: true",
            CA_ISSUER_DOC,
        )
    elif minio.tls_issuer != services.cert_manager.ca_issuer:
        yield error(
            at("storage", "minio", "tls_issuer"),
            f"{minio.tls_issuer!r} is not a ClusterIssuer this stack creates, so MinIO's certificate "
            "would never be issued",
            f"set it to {services.cert_manager.ca_issuer!r} (cluster_services.cert_manager.ca_issuer)",
            CA_ISSUER_DOC,
        )
    if minio.storage_class is not None and minio.storage_class != services.storage_class.name:
        yield error(
            at("storage", "minio", "storage_class"),
            f"{minio.storage_class!r} is not a StorageClass this stack creates; MinIO's volumes would "
            "stay Pending",
            f"leave it unset (the default class {services.storage_class.name!r}) or set it to that name",
        )
    taken = {*SYSTEM_NAMESPACES, services.monitoring_namespace, cfg.storage.trainer.namespace}
    taken.add(cfg.storage.inference.namespace)
    if minio.namespace in taken:
        yield error(
            at("storage", "minio", "namespace"),
            f"{minio.namespace!r} is already a system or workload namespace with its own policies",
            "use a namespace of its own, e.g. 'minio'",
        )


@rule("karpenter-tags-allowed")
def karpenter_tags_allowed(ctx: RuleContext) -> Iterator[Finding]:
    """Cost tags go on Karpenter's EC2NodeClass, which refuses the tag keys Karpenter sets itself."""
    if not ctx.cfg.cluster_services.karpenter.node_pools:
        return
    for key in ctx.cfg.tags.extra:
        if any(key == r or (r.endswith("/") and key.startswith(r)) for r in KARPENTER_RESTRICTED_TAGS):
            yield error(
                at("tags", "extra", key),
                "is a tag key Karpenter sets on its nodes itself; the EC2NodeClass refuses it",
                "use another key",
                KARPENTER_NODECLASS_DOC,
            )


@rule("karpenter-gpu-types-offered", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def karpenter_gpu_types_offered(ctx: RuleContext) -> Iterator[Finding]:
    """Each Karpenter pool has NVIDIA types offered in the VPC's zones; inference pools from two families."""
    assert ctx.facts is not None
    zones = list(vpc_zones(ctx.cfg, ctx.facts))
    for name, pool in ctx.cfg.cluster_services.karpenter.node_pools.items():
        offer = gpu_offer(ctx.cfg, ctx.facts, pool)
        field = at("cluster_services", "karpenter", "node_pools", name, "instance_families")
        unfit = (
            f" ({', '.join(offer.unfit_families)} offered but without an NVIDIA type of architecture "
            f"{'/'.join(a.value for a in pool.architectures)} and <= {pool.max_gpus_per_node} GPUs)"
            if offer.unfit_families
            else ""
        )
        if not offer.instance_types:
            yield error(
                field,
                f"none of {pool.instance_families} has an NVIDIA GPU type offered in the VPC's zones "
                f"{zones}{unfit}",
                "add families offered there (aws ec2 describe-instance-type-offerings --location-type "
                "availability-zone --filters Name=instance-type,Values='g6.*')",
                KARPENTER_NODEPOOL_DOC,
            )
        elif ctx.cfg.role is Role.infer and len(offer.families) < 2:
            yield error(
                field,
                f"only {list(offer.families)} of {pool.instance_families} is offered in the VPC's zones "
                f"{zones}"
                f"{unfit}; an inference pool needs two GPU families so that a shortage of one still leaves "
                "capacity",
                "add another GPU family offered in the region",
                KARPENTER_NODEPOOL_DOC,
            )


@rule("karpenter-pool-names-unique")
def karpenter_pool_names_unique(ctx: RuleContext) -> Iterator[Finding]:
    """Karpenter pools and managed node groups share the ``aiplat.io/pool`` label: their names must differ."""
    for name in ctx.cfg.cluster_services.karpenter.node_pools:
        if name in ctx.cfg.node_pools:
            yield error(
                at("cluster_services", "karpenter", "node_pools", name),
                "is also the name of a managed node pool (node_pools); both would carry aiplat.io/pool="
                f"{name}",
                "rename one of them",
            )


def unreachable_endpoint_message(cfg: PlatformConfig, endpoint: str, problem: str) -> str:
    """What ``pulumi up`` says when the Kubernetes API does not answer (``infra/io/kube_access.py``)."""
    cidrs = cfg.cluster.endpoint_public_access_cidrs
    if cfg.cluster_services.kubernetes_access is KubernetesAccess.public_cidrs:
        why = (
            f"the public endpoint admits only cluster.endpoint_public_access_cidrs {cidrs}; run pulumi up "
            "from one of them (or from inside the VPC)"
        )
    else:
        why = (
            "the endpoint is private"
            + (" (cluster.endpoint_public_access_cidrs is empty)" if not cidrs else "")
            + ", so Kubernetes resources can only be applied from inside the VPC: run pulumi up there (VPN, "
            "peered network, or an SSM session on a node), or list your CIDRs in "
            "cluster.endpoint_public_access_cidrs and set cluster_services.kubernetes_access: public_cidrs"
        )
    return (
        f"{at('cluster_services', 'kubernetes_access')}: cannot reach the cluster's Kubernetes API at "
        f"{endpoint} ({problem}); {why}; or set cluster_services.kubernetes_access: skip to deploy the AWS "
        f"side now and the cluster services later (see {ENDPOINT_DOC})"
    )
