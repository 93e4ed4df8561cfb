"""Config of the cluster services: what runs in every EKS cluster before a GPU job or an inference pod.

One place for every upstream chart (repository, chart, pinned version, with the source and date of each
default in its description) and the per-service settings. Upgrading a service is changing its ``version``
here (docs/platform/cluster-services.md says what else each upgrade needs). Checks against AWS facts (is a GPU
family offered in our zones? does the EFA plugin's version know our EFA types?) are rules
(``infra/rules/services.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from infra.model.config.base import NAME_RE, Strict
from infra.model.config.charts import ChartPin
from infra.model.config.fsx import FsxConfig
from infra.model.instance_types import EFA_PLUGIN_CHART_VERSION

# Kubernetes names of namespaces (RFC 1123 label).
NAMESPACE_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
# Karpenter duration fields (karpenter.sh_nodepools.yaml v1.14.1: consolidateAfter, expireAfter).
_KARPENTER_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"
# disruption.budgets[].nodes (same CRD): a count or a percentage.
_KARPENTER_BUDGET = r"^((100|[0-9]{1,2})%|[0-9]+)$"


class KubernetesAccess(StrEnum):
    """How ``pulumi up`` reaches the cluster's Kubernetes API to apply the cluster services.

    ``in_vpc``: from inside the VPC (VPN, peering, a bastion or SSM session); the endpoint is private.
    ``public_cidrs``: through the public endpoint, from one of ``cluster.endpoint_public_access_cidrs``.
    ``skip``: declare no Kubernetes resources (AWS side only); run ``pulumi up`` again from inside the VPC
    with ``in_vpc`` to add them. ``pulumi up`` checks that the endpoint answers before it applies any
    Kubernetes object and stops with this explanation otherwise (instead of a provider timeout).
    """

    in_vpc = "in_vpc"
    public_cidrs = "public_cidrs"
    skip = "skip"


class NvidiaDevicePluginConfig(ChartPin):
    """NVIDIA device plugin: advertises ``nvidia.com/gpu`` on GPU nodes (the AL2023 NVIDIA AMI has none).

    https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-k8s-device-plugin.html
    """

    repo: str = Field(
        "https://nvidia.github.io/k8s-device-plugin",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("nvidia-device-plugin", description="Chart name.")
    version: str = Field(
        "0.20.0",
        description="Default: NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/Chart.yaml "
        "0.20.0 (tag v0.20.0, 2026-08-19; image nvcr.io/nvidia/k8s-device-plugin:v0.20.0).",
    )


class EfaDevicePluginConfig(ChartPin):
    """EFA device plugin: advertises ``vpc.amazonaws.com/efa`` on EFA pools (installed only when a pool has
    ``efa: true``). The chart schedules only on instance types in its own list, so its version must list
    every EFA type of the stack (rule ``efa-plugin-knows-types``).

    https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
    """

    repo: str = Field(
        "https://aws.github.io/eks-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("aws-efa-k8s-device-plugin", description="Chart name.")
    version: str = Field(
        EFA_PLUGIN_CHART_VERSION,
        description="Default: aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml "
        f"{EFA_PLUGIN_CHART_VERSION} (app "
        "v0.5.20; commit bfe91c4, 2026-07-21). Its supported-instance list is data in "
        "infra/model/instance_types.py.",
    )


class LoadBalancerControllerConfig(ChartPin):
    """AWS Load Balancer Controller: ALBs for Ingresses, NLBs for Services, with its own IAM role (IRSA).

    https://docs.aws.amazon.com/eks/latest/userguide/aws-load-balancer-controller.html
    """

    enabled: bool = Field(True, description="Install the controller.")
    repo: str = Field(
        "https://aws.github.io/eks-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("aws-load-balancer-controller", description="Chart name.")
    version: str = Field(
        "3.5.0",
        description="Default: aws/eks-charts stable/aws-load-balancer-controller/Chart.yaml 3.5.0 (app "
        "v3.5.0, 2026-08-03). Its IAM policy is kept in infra/lib/lbc_iam.py from the same release.",
    )
    default_ssl_policy: Annotated[str, Field(pattern=r"^ELBSecurityPolicy-[A-Za-z0-9-]+$")] = Field(
        "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09",
        description="TLS policy of HTTPS/TLS listeners that do not name one (the controller's own default "
        "is ELBSecurityPolicy-2016-08, which allows TLS 1.0). AWS recommends this one: "
        "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html",
    )
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(2, description="Controller replicas.")


# The metrics-server chart the platform pins; the values builder (infra.lib.charts) is written against it.
METRICS_SERVER_CHART = "3.13.1"


class MetricsServerConfig(ChartPin):
    """metrics-server: the resource metrics API that HorizontalPodAutoscalers and ``kubectl top`` read."""

    enabled: bool = Field(True, description="Install metrics-server.")
    repo: str = Field(
        "https://kubernetes-sigs.github.io/metrics-server/",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("metrics-server", description="Chart name.")
    version: str = Field(
        METRICS_SERVER_CHART,
        description="Default: kubernetes-sigs/metrics-server charts/metrics-server/Chart.yaml "
        f"{METRICS_SERVER_CHART} (app 0.8.1; tag metrics-server-helm-chart-{METRICS_SERVER_CHART}, "
        "2026-06-11).",
    )
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(
        2, description="Replicas (2 with a PodDisruptionBudget keeps the API up through node drains)."
    )


class CertManagerConfig(ChartPin):
    """cert-manager and a cluster CA: ``<ca_issuer>`` (a ClusterIssuer) signs in-cluster TLS certificates
    (MinIO's today) from a self-signed root CA kept in the cert-manager namespace."""

    enabled: bool = Field(True, description="Install cert-manager and the CA issuer (MinIO needs them).")
    repo: str = Field(
        "https://charts.jetstack.io",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("cert-manager", description="Chart name.")
    version: str = Field(
        "v1.21.1",
        description="Default: cert-manager/cert-manager deploy/charts/cert-manager at tag v1.21.1 "
        "(2026-07-29); CRDs come with the release (crds.enabled) and are kept on uninstall.",
    )
    ca_issuer: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "aiplat-ca", description="Name of the CA ClusterIssuer that signs in-cluster certificates."
    )
    ca_duration_hours: Annotated[int, Field(ge=720, le=175200)] = Field(
        87600, description="Lifetime of the self-signed root CA (hours; default 10 years)."
    )


class ConsolidationPolicy(StrEnum):
    """Karpenter ``disruption.consolidationPolicy`` (karpenter.sh/v1 NodePool, v1.14.1)."""

    WhenEmpty = "WhenEmpty"
    WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
    Balanced = "Balanced"


class CapacityKind(StrEnum):
    """Karpenter ``karpenter.sh/capacity-type`` values."""

    on_demand = "on-demand"
    spot = "spot"


class Architecture(StrEnum):
    """Kubernetes ``kubernetes.io/arch`` values (images must exist for each one allowed)."""

    amd64 = "amd64"
    arm64 = "arm64"


class KarpenterPoolConfig(Strict):
    """One Karpenter GPU NodePool. Its instance types are chosen at plan time from AWS's offerings in the
    VPC's zones: every type of ``instance_families`` that is offered there, has NVIDIA GPUs, one of
    ``architectures`` and at most ``max_gpus_per_node`` GPUs. A family the region lacks is left out, so a
    region short of one family still gets capacity from the others."""

    instance_families: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]] = Field(
        min_length=1,
        description="GPU instance families Karpenter may launch (e.g. g6e, g6, g5, g4dn); the AL2023 "
        "NVIDIA AMI must support them.",
    )
    architectures: list[Architecture] = Field(
        default_factory=lambda: [Architecture.amd64],
        min_length=1,
        description="CPU architectures allowed (arm64 types such as g5g need multi-arch images).",
    )
    capacity_types: list[CapacityKind] = Field(
        default_factory=lambda: [CapacityKind.on_demand],
        min_length=1,
        description="on-demand and/or spot (Karpenter prefers spot when both are allowed).",
    )
    max_gpus_per_node: Annotated[int, Field(ge=1, le=16)] = Field(
        8, description="Largest GPU count of a type the pool may launch."
    )
    gpu_limit: Annotated[int, Field(ge=1, le=100000)] = Field(
        16, description="NodePool limit on nvidia.com/gpu: Karpenter launches no node past it."
    )
    consolidation_policy: ConsolidationPolicy = Field(
        ConsolidationPolicy.WhenEmpty,
        description="WhenEmpty (only empty nodes go: no inference pod is evicted to repack), "
        "WhenEmptyOrUnderutilized or Balanced.",
    )
    consolidate_after: Annotated[str, Field(pattern=_KARPENTER_DURATION)] = Field(
        "10m", description="How long a node must be consolidatable before Karpenter acts ('Never' to stop)."
    )
    disruption_budget_nodes: Annotated[str, Field(pattern=_KARPENTER_BUDGET)] = Field(
        "10%", description="Most nodes (count or percentage) Karpenter may disrupt at once."
    )
    expire_after: Annotated[str, Field(pattern=_KARPENTER_DURATION)] = Field(
        "720h", description="Nodes are replaced after this long (picks up new AMIs); 'Never' to keep them."
    )
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = Field(
        100, description="Root EBS volume (gp3, encrypted with the stack's EBS key) in GiB."
    )

    @field_validator("instance_families", "architectures", "capacity_types")
    @classmethod
    def _unique(cls, v: list) -> list:
        if len(set(v)) != len(v):
            raise ValueError(f"{[str(x) for x in v]} names an entry twice; name each once")
        return v


class KarpenterConfig(ChartPin):
    """Karpenter: node autoscaling for the inference and dev GPU pools (training pools with EFA and
    placement groups stay managed node groups). Installed when ``node_pools`` is not empty.

    https://karpenter.sh/docs/ (v1.14); IAM and the interruption queue follow the release's
    getting-started CloudFormation template.
    """

    repo: str = Field(
        "oci://public.ecr.aws/karpenter",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("karpenter", description="Chart name.")
    version: str = Field(
        "1.14.1",
        description="Default: aws/karpenter-provider-aws charts/karpenter 1.14.1 (tag v1.14.1, 2026-08-20); "
        "Kubernetes 1.35 needs Karpenter >= 1.9 (website v1.14 upgrading/compatibility.md).",
    )
    crd_chart: str = Field(
        "karpenter-crd",
        description="Chart of the CRDs, installed as their own release from repo at version (upgraded by "
        "helm, unlike a chart's crds/ folder). Default: charts/karpenter-crd 1.14.1.",
    )
    ami_alias: Annotated[str, Field(pattern=r"^al2023@v\d{8}$")] = Field(
        "al2023@v20260724",
        description="EC2NodeClass AMI alias: AL2023, pinned release (GPU types get the NVIDIA variant). "
        "Default: awslabs/amazon-eks-ami tag v20260724 (2026-07-24). Pinned so a new AMI is a config "
        "change, not drift ('latest' is not recommended for production by the Karpenter docs).",
    )
    replicas: Annotated[int, Field(ge=1, le=3)] = Field(2, description="Controller replicas.")
    node_pools: dict[str, KarpenterPoolConfig] = Field(
        default_factory=dict, description="GPU NodePools keyed by name; empty = no Karpenter."
    )

    @field_validator("node_pools")
    @classmethod
    def _names(cls, v: dict[str, KarpenterPoolConfig]) -> dict[str, KarpenterPoolConfig]:
        for name in v:
            if not NAME_RE.match(name):
                raise ValueError(
                    f"Karpenter pool name {name!r} must be 2-32 characters of lower-case letters, digits "
                    "and '-', starting with a letter"
                )
        return v

    @field_validator("crd_chart")
    @classmethod
    def _crd_chart(cls, v: str) -> str:
        return cls._chart_name(v)


class StorageClassConfig(Strict):
    """The default StorageClass: gp3 EBS volumes encrypted under the stack's EBS key, bound where the
    pod lands (WaitForFirstConsumer). Clusters created on Kubernetes 1.30+ have no default StorageClass
    (https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html)."""

    name: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "gp3", description="Name of the default StorageClass."
    )
    iops: Annotated[int, Field(ge=3000, le=16000)] = Field(3000, description="gp3 IOPS (3000 is free).")
    throughput_mibps: Annotated[int, Field(ge=125, le=1000)] = Field(
        125, description="gp3 throughput in MiB/s (125 is free)."
    )


class ClusterServicesConfig(Strict):
    """Cluster services: namespaces and identities, device plugins, storage (the default StorageClass and
    the optional FSx for Lustre file system), load balancers, metrics, certificates and node autoscaling,
    applied through the cluster's Kubernetes provider."""

    kubernetes_access: KubernetesAccess = Field(
        KubernetesAccess.in_vpc,
        description="How pulumi up reaches the Kubernetes API: in_vpc, public_cidrs or skip (see "
        "KubernetesAccess).",
    )
    monitoring_namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "monitoring", description="Namespace of the monitoring stack (node and GPU exporters, Prometheus)."
    )
    storage_class: StorageClassConfig = Field(default_factory=lambda: StorageClassConfig())
    nvidia_device_plugin: NvidiaDevicePluginConfig = Field(default_factory=lambda: NvidiaDevicePluginConfig())
    efa_device_plugin: EfaDevicePluginConfig = Field(default_factory=lambda: EfaDevicePluginConfig())
    load_balancer_controller: LoadBalancerControllerConfig = Field(
        default_factory=lambda: LoadBalancerControllerConfig()
    )
    metrics_server: MetricsServerConfig = Field(default_factory=lambda: MetricsServerConfig())
    cert_manager: CertManagerConfig = Field(default_factory=lambda: CertManagerConfig())
    karpenter: KarpenterConfig = Field(default_factory=lambda: KarpenterConfig())
    fsx: FsxConfig = Field(
        default_factory=lambda: FsxConfig(),
        description="Optional FSx for Lustre file system linked to the datasets bucket, mounted in the "
        "training pods (off by default).",
    )
