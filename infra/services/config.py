"""Config of the chart-based cluster services: one pinned chart (repository, chart, version, with the source
and date of each default) and the settings of each service. Upgrading a service is changing its
``version`` here (docs/platform/cluster-services.md says what else each upgrade needs); checks against AWS
facts are rules (``infra/services/rules.py``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infra.core.charts import ChartPin
from infra.core.config import Strict
from infra.core.instance_types import (
    EFA_PLUGIN_APP_VERSIONS,
    EFA_PLUGIN_CHART_VERSION,
    EFA_PLUGIN_REFRESH,
    EFA_PLUGIN_SOURCES,
)

# Kubernetes names of namespaces (RFC 1123 label).
NAMESPACE_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"


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
        description="Default: the chart version recorded last in infra/core/data/efa_device_plugin.json "
        f"({EFA_PLUGIN_CHART_VERSION}, app {EFA_PLUGIN_APP_VERSIONS[EFA_PLUGIN_CHART_VERSION]}; source "
        f"{EFA_PLUGIN_SOURCES[EFA_PLUGIN_CHART_VERSION]}), with the instance types it schedules on. A "
        f"version must be recorded there first: {EFA_PLUGIN_REFRESH}.",
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
        "v3.5.0, 2026-08-03). Its IAM policy is kept in infra/services/documents/lbc_iam.py from the same "
        "release.",
    )
    default_ssl_policy: Annotated[str, Field(pattern=r"^ELBSecurityPolicy-[A-Za-z0-9-]+$")] = Field(
        "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09",
        description="TLS policy of HTTPS/TLS listeners that do not name one (the controller's own default "
        "is ELBSecurityPolicy-2016-08, which allows TLS 1.0). AWS recommends this one: "
        "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html",
    )
    replicas: Annotated[int, Field(ge=1, le=5)] = Field(2, description="Controller replicas.")


# The metrics-server chart the platform pins; the values builder (infra.core.kube) is written against it.
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
