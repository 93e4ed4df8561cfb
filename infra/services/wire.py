"""Wiring of the cluster services: config + facts -> the Kubernetes and AWS components every cluster needs.

``wire_cluster_services`` runs once the cluster and its pools exist. Everything goes through the cluster's
Kubernetes provider (``EksCluster.k8s_provider``) and waits for the system pools (``gpu: false``) and the
add-ons that need nodes (CoreDNS), never for a GPU pool directly: a p5 launch that fails for capacity must
not hold back DNS, certificates or the autoscaler. The first Kubernetes object is the access gate: under
``pulumi up`` it exists only once the API endpoint answered (``endpoint_probe``), else the update stops with
the explanation of ``unreachable_endpoint_message``.

``wire_workload_identities`` runs after the storage wiring: it binds the workloads' service accounts to the
pod roles (IRSA annotations from ``PodRoles``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pulumi

from infra.cluster.component.access_gate import KubernetesAccessGate, KubernetesAccessGateArgs
from infra.cluster.component.namespaces import (
    NamespaceSpec,
    ServiceAccountSpec,
    WorkloadNamespaces,
    WorkloadNamespacesArgs,
    WorkloadServiceAccounts,
    WorkloadServiceAccountsArgs,
)
from infra.cluster.component.storage_classes import StorageClasses, StorageClassesArgs
from infra.cluster.documents import eks_iam
from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core import namespaces
from infra.core.config import KubernetesAccess, Role
from infra.core.trainer_settings import SCRAPED_METRICS_PORTS
from infra.karpenter import documents as karpenter_docs
from infra.karpenter.component.aws import KarpenterAws, KarpenterAwsArgs
from infra.karpenter.component.chart import Karpenter, KarpenterArgs
from infra.karpenter.gpu_offers import gpu_offer
from infra.keys.component.kms import KmsKeys
from infra.mirror.wire import cached_chart
from infra.network.component import GpuVpc
from infra.network.documents import cidr
from infra.network.zones import vpc_zones
from infra.pod_storage.component.minio import Minio
from infra.pod_storage.component.pod_iam import PodRoles
from infra.pools.documents import nodes
from infra.resources.helm import ChartArgs
from infra.resources.options import inherited_depends_on
from infra.services.component.cert_manager import CertManager, CertManagerArgs
from infra.services.component.controllers import LoadBalancerController, MetricsServer
from infra.services.component.device_plugins import DevicePlugins, DevicePluginsArgs
from infra.services.component.lbc_role import LoadBalancerControllerRole, LoadBalancerControllerRoleArgs
from infra.services.documents import cert_manager as services_cert_manager
from infra.services.documents import device_plugins, lbc_iam, metrics_server
from infra.services.documents import load_balancer_controller as services_load_balancer_controller
from infra.services.rules import unreachable_endpoint_message
from infra.storage.config.storage import StorageBackend

SYSTEM_NAMESPACE = "kube-system"
CERT_MANAGER_NAMESPACE = "cert-manager"
NODE_CLASS = "aiplat"
MINIO_S3_PORT = 9000

EndpointProbe = Callable[[str], "str | None"]


@dataclass
class ClusterServicesWiring:
    """What the cluster services created; ``ready`` is what in-cluster workloads (MinIO) wait for."""

    gate: KubernetesAccessGate
    namespaces: WorkloadNamespaces
    storage_classes: StorageClasses
    # The system pools and the add-ons that need nodes (CoreDNS), never a GPU pool: what every Kubernetes
    # object of the stack waits for.
    after_nodes: list[pulumi.Resource]
    cert_manager: CertManager | None = None
    # Ingresses wait for it: its webhooks validate Ingresses and Services and inject readiness gates.
    load_balancer_controller: LoadBalancerController | None = None
    ready: list[pulumi.Resource] = field(default_factory=list)
    # the role of the nodes Karpenter launches (None without Karpenter pools): they pull images too
    karpenter_node_role_name: pulumi.Output[str] | None = None

    @property
    def after_ready(self) -> list[pulumi.Resource]:
        """What the workloads on the cluster wait for: ``after_nodes``, then the services in ``ready``."""
        return [*self.after_nodes, *self.ready]


def system_pools(ctx: StackContext) -> list[str]:
    """The pools the cluster services' controllers run on: CPU pools without hard taints."""
    return sorted(name for name, pool in ctx.cfg.node_pools.items() if pool.runs_system_pods)


def gpu_pools(ctx: StackContext) -> list[str]:
    """The GPU pools, managed and Karpenter's: where the NVIDIA device plugin and dcgm-exporter run."""
    managed = [name for name, pool in ctx.cfg.node_pools.items() if pool.gpu]
    return sorted(managed + list(ctx.cfg.cluster_services.karpenter.node_pools))


def has_efa(ctx: StackContext) -> bool:
    """Whether a pool has EFA (the EFA device plugin, exporter, rules and dashboard go with it)."""
    return any(pool.efa for pool in ctx.cfg.node_pools.values())


def _checked_endpoint(ctx: StackContext, endpoint: pulumi.Output[str], probe: EndpointProbe | None):
    """The endpoint, resolved only after ``probe`` found it reachable (no probe: as it is)."""
    if probe is None:
        return endpoint

    def check(url: str) -> str:
        problem = probe(url)
        if problem is not None:
            raise pulumi.RunError(unreachable_endpoint_message(ctx.cfg, url, problem))
        return url

    return endpoint.apply(check)


def workload_namespace_specs(ctx: StackContext) -> list[NamespaceSpec]:
    """Namespaces of the workloads this stack serves: the trainer's (train stacks), the inference server's
    and monitoring, each with its Pod Security labels and NetworkPolicies (``infra/core/namespaces.py``)."""
    cfg = ctx.cfg
    st = cfg.storage
    s3_services = (
        [(st.minio.namespace, MINIO_S3_PORT)]
        if st.backend is StorageBackend.minio and st.minio is not None
        else []
    )
    specs = namespaces.workload_namespaces(
        trainer=st.trainer.namespace if cfg.role is Role.train else None,
        publisher=st.publisher.namespace if cfg.role is Role.train else None,
        inference=st.inference.namespace,
        monitoring=cfg.cluster_services.monitoring_namespace,
        vpc_cidr=cfg.network.vpc_cidr,
        trainer_metrics_ports=SCRAPED_METRICS_PORTS,
        s3_services=s3_services,
        https_egress=namespaces.https_egress_cidrs(
            endpoint_cidrs=cidr.endpoint_cidrs(cfg.network.vpc_cidr, vpc_zones(cfg, ctx.facts)),
            s3_cidrs=ctx.facts.s3_prefix_list_cidrs,
            allowed=cfg.network.workload_egress_cidrs,
        ),
    )
    return [
        NamespaceSpec(
            name=ns.name,
            labels={**ns.labels, **namespaces.pss_labels(ns.pod_security, cfg.cluster.kubernetes_version)},
            reason=ns.reason,
            network_policies=namespaces.network_policies(
                ns, monitoring_namespace=cfg.cluster_services.monitoring_namespace
            ),
        )
        for ns in specs
    ]


def wire_cluster_services(
    ctx: StackContext,
    cluster: ClusterWiring,
    keys: KmsKeys,
    network: GpuVpc,
    *,
    endpoint_probe: EndpointProbe | None = None,
    lbc_web_acls: Sequence[str] | None = None,
) -> ClusterServicesWiring | None:
    """Create the cluster services the config asks for (None with ``kubernetes_access: skip``).
    ``lbc_web_acls``: the web ACLs the load balancer controller may associate (``lbc_iam.scoped_policy``)."""
    cfg, names = ctx.cfg, ctx.names
    services = cfg.cluster_services
    if services.kubernetes_access is KubernetesAccess.skip:
        return None
    eks = cluster.cluster
    system = system_pools(ctx)
    # System pools and the add-ons that need nodes (CoreDNS: Karpenter and the webhooks resolve names).
    after_nodes = [cluster.pools[p] for p in system] + [cluster.addons]
    k8s_opts = pulumi.ResourceOptions(provider=eks.k8s_provider, depends_on=after_nodes)
    description = names.stack_prefix

    versions = {
        "nvidia-device-plugin": services.nvidia_device_plugin.version,
        "aws-efa-k8s-device-plugin": services.efa_device_plugin.version,
        "aws-load-balancer-controller": services.load_balancer_controller.version,
        "metrics-server": services.metrics_server.version,
        "cert-manager": services.cert_manager.version,
        "karpenter": services.karpenter.version,
    }
    gate = KubernetesAccessGate(
        "k8s-access",
        KubernetesAccessGateArgs(
            namespace=SYSTEM_NAMESPACE,
            checked_endpoint=_checked_endpoint(ctx, eks.endpoint, endpoint_probe),
            versions=versions,
        ),
        opts=k8s_opts,
    )
    opts = pulumi.ResourceOptions(provider=eks.k8s_provider, depends_on=[*after_nodes, gate])

    ns = WorkloadNamespaces(
        "namespaces", WorkloadNamespacesArgs(namespaces=workload_namespace_specs(ctx)), opts=opts
    )
    storage_classes = StorageClasses(
        "storage-classes",
        StorageClassesArgs(
            name=services.storage_class.name,
            ebs_key_arn=keys.ebs_key_arn,
            iops=services.storage_class.iops,
            throughput_mibps=services.storage_class.throughput_mibps,
        ),
        opts=opts,
    )
    out = ClusterServicesWiring(
        gate=gate, namespaces=ns, storage_classes=storage_classes, after_nodes=after_nodes
    )
    out.ready = [gate, ns, storage_classes]

    # -- device plugins: NVIDIA on every GPU pool (managed and Karpenter), EFA where a pool has EFA ------
    gpus = gpu_pools(ctx)
    efa = has_efa(ctx)
    if gpus:
        DevicePlugins(
            "device-plugins",
            DevicePluginsArgs(
                namespace=SYSTEM_NAMESPACE,
                nvidia_chart=cached_chart(ctx, services.nvidia_device_plugin),
                nvidia_values=device_plugins.nvidia_device_plugin_values(gpus),
                efa_chart=cached_chart(ctx, services.efa_device_plugin) if efa else None,
                efa_values=device_plugins.efa_device_plugin_values() if efa else None,
            ),
            opts=opts,
        )

    # -- load balancer controller (its IRSA role first) ----------------------------------------------------
    lbc = services.load_balancer_controller
    if lbc.enabled:
        role = LoadBalancerControllerRole(
            "lbc-iam",
            LoadBalancerControllerRoleArgs(
                partition=ctx.account.partition,
                cluster_name=names.cluster,
                region=cfg.region,
                account_id=ctx.account.account_id,
                oidc_provider_arn=eks.oidc_provider_arn,
                oidc_issuer=eks.oidc_issuer,
                namespace=SYSTEM_NAMESPACE,
                service_account=lbc_iam.SERVICE_ACCOUNT,
                description_prefix=description,
                web_acls=lbc_web_acls,
            ),
            opts=ctx.in_region,
        )
        # Outputs go in as leaves, not through one apply: at a first preview the role ARN and VPC id are
        # unknown, and an apply would hide every literal value (defaultSSLPolicy, ...) from the policy pack.
        values = services_load_balancer_controller.load_balancer_controller_values(
            cluster_name=names.cluster,
            region=cfg.region,
            vpc_id=network.vpc_id,
            role_arn=role.role_arn,
            replicas=lbc.replicas,
            ssl_policy=lbc.default_ssl_policy,
            system_pools=system,
        )
        out.load_balancer_controller = LoadBalancerController(
            "lbc",
            ChartArgs(
                chart=cached_chart(ctx, lbc),
                release_name="aws-load-balancer-controller",
                namespace=SYSTEM_NAMESPACE,
                values=values,
            ),
            opts=opts,
        )

    if services.metrics_server.enabled:
        MetricsServer(
            "metrics-server",
            ChartArgs(
                chart=cached_chart(ctx, services.metrics_server),
                release_name="metrics-server",
                namespace=SYSTEM_NAMESPACE,
                values=metrics_server.metrics_server_values(
                    replicas=services.metrics_server.replicas, system_pools=system
                ),
            ),
            opts=opts,
        )

    cm = services.cert_manager
    if cm.enabled:
        out.cert_manager = CertManager(
            "cert-manager",
            CertManagerArgs(
                chart=cached_chart(ctx, cm),
                namespace=CERT_MANAGER_NAMESPACE,
                # every cert-manager component runs restricted-compliant by default (its values.yaml)
                namespace_labels=namespaces.pss_labels(
                    namespaces.PodSecurity.restricted, cfg.cluster.kubernetes_version
                ),
                values=services_cert_manager.cert_manager_values(system_pools=system),
                ca_issuer=cm.ca_issuer,
                ca_duration_hours=cm.ca_duration_hours,
            ),
            opts=opts,
        )
        out.ready.append(out.cert_manager)

    if services.karpenter.node_pools:
        out.karpenter_node_role_name = wire_karpenter(ctx, cluster, keys, system, opts)
    ctx.export("clusterServices", versions)
    return out


def wire_karpenter(
    ctx: StackContext,
    cluster: ClusterWiring,
    keys: KmsKeys,
    system: Sequence[str],
    opts: pulumi.ResourceOptions,
) -> pulumi.Output[str]:
    """Karpenter's AWS side, its releases, the EC2NodeClass and one GPU NodePool per configured pool, whose
    instance types are those of its families that AWS offers in the VPC's zones (``gpu_offer``). Returns the
    name of the role of the nodes it launches."""
    cfg, names = ctx.cfg, ctx.names
    kc = cfg.cluster_services.karpenter
    eks = cluster.cluster
    aws_side = KarpenterAws(
        "karpenter-aws",
        KarpenterAwsArgs(
            cluster_name=eks.cluster_name,
            partition=ctx.account.partition,
            region=cfg.region,
            account_id=ctx.account.account_id,
            oidc_provider_arn=eks.oidc_provider_arn,
            oidc_issuer=eks.oidc_issuer,
            namespace=SYSTEM_NAMESPACE,
            service_account=karpenter_docs.SERVICE_ACCOUNT,
            # the managed node groups' policies (eks_iam), so both kinds of GPU node get the same rights
            node_policy_arns=[
                eks_iam.managed_policy_arn(p, ctx.account.partition) for p in eks_iam.NODE_POLICIES
            ],
            ebs_key_arn=keys.ebs_key_arn,
            description_prefix=names.stack_prefix,
        ),
        opts=ctx.in_region,
    )
    # Outputs go in as leaves (not through one apply): at a first preview the ARNs, the queue, the endpoint
    # and the security group are unknown, and an apply would hide the whole document from the policy pack
    # (IMDS, encryption and tags of the EC2NodeClass are literals it checks at preview).
    values = karpenter_docs.karpenter_values(
        cluster_name=names.cluster,
        cluster_endpoint=eks.endpoint,
        interruption_queue=aws_side.queue_name,
        role_arn=aws_side.controller_role_arn,
        region=cfg.region,
        replicas=kc.replicas,
        system_pools=system,
    )
    node_class = karpenter_docs.ec2_node_class_spec(
        karpenter_docs.NodeClassSpec(
            ami_alias=kc.ami_alias,
            node_role_name=aws_side.node_role_name,
            # the private subnets of this cluster (tags set by GpuVpc for the load balancer controller)
            subnet_tags={
                "kubernetes.io/role/internal-elb": "1",
                f"kubernetes.io/cluster/{names.cluster}": "shared",
            },
            security_group_ids=[eks.cluster_security_group_id],
            root_volume_gib=max(p.root_volume_gib for p in kc.node_pools.values()),
            ebs_key_arn=keys.ebs_key_arn,
            tags=cfg.tags.as_dict(),
            # every Karpenter pool is a GPU pool: the toolkit ignores NVIDIA_VISIBLE_DEVICES there too
            user_data=nodes.gpu_user_data(),
        )
    )
    pools = {}
    offered = {}
    for pool_name, pool in kc.node_pools.items():
        offer = gpu_offer(cfg, ctx.facts, pool)
        offered[pool_name] = {"families": list(offer.families), "instanceTypes": list(offer.instance_types)}
        pools[pool_name] = karpenter_docs.node_pool_spec(
            karpenter_docs.NodePoolSpec(
                node_class=NODE_CLASS,
                pool_label=(nodes.POOL_LABEL, pool_name),
                instance_types=offer.instance_types,
                families=offer.families,
                zones=offer.zones,
                architectures=[a.value for a in pool.architectures],
                capacity_types=[c.value for c in pool.capacity_types],
                gpu_taint=(nodes.GPU_TAINT_KEY, nodes.GPU_TAINT_VALUE),
                gpu_limit=pool.gpu_limit,
                consolidation_policy=pool.consolidation_policy.value,
                consolidate_after=pool.consolidate_after,
                budget_nodes=pool.disruption_budget_nodes,
                expire_after=pool.expire_after,
            )
        )
    ctx.export("karpenterNodePools", offered)
    Karpenter(
        "karpenter",
        KarpenterArgs(
            chart=cached_chart(ctx, kc),
            crd_chart=cached_chart(ctx, kc, chart=kc.crd_chart),
            namespace=SYSTEM_NAMESPACE,
            values=values,
            node_class_name=NODE_CLASS,
            node_class_spec=node_class,
            node_pools=pools,
        ),
        opts=pulumi.ResourceOptions(
            provider=opts.provider, depends_on=[*inherited_depends_on(opts), aws_side]
        ),
    )
    return aws_side.node_role_name


def wire_workload_identities(
    ctx: StackContext,
    services: ClusterServicesWiring | None,
    pod_access: PodRoles | Minio | None,
    k8s_provider: pulumi.ProviderResource,
) -> WorkloadServiceAccounts | None:
    """The workloads' service accounts, each annotated with its IRSA role when the S3 backend gave one."""
    if services is None:
        return None
    cfg = ctx.cfg
    st = cfg.storage
    roles = pod_access if isinstance(pod_access, PodRoles) else None
    accounts = []
    if cfg.role is Role.train:
        accounts.append(
            ServiceAccountSpec(
                namespace=st.trainer.namespace,
                name=st.trainer.service_account,
                role_arn=roles.trainer_role_arn if roles else None,
            )
        )
        # The model publisher (python -m trainer.release.publish), with its own role: writes release/ only.
        accounts.append(
            ServiceAccountSpec(
                namespace=st.publisher.namespace,
                name=st.publisher.service_account,
                role_arn=roles.publisher_role_arn if roles else None,
            )
        )
    accounts.append(
        ServiceAccountSpec(
            namespace=st.inference.namespace,
            name=st.inference.service_account,
            role_arn=roles.inference_role_arn if roles else None,
        )
    )
    return WorkloadServiceAccounts(
        "service-accounts",
        WorkloadServiceAccountsArgs(service_accounts=accounts),
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[services.gate, services.namespaces]),
    )
