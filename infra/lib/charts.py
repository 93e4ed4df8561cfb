"""Helm values of the cluster services' charts, as data. Pure, no Pulumi.

Each builder names the chart version whose ``values.yaml`` it was written against; keys not set here keep
the chart's defaults. The values that silently break things when wrong (selectors, tolerations, service
account names, role ARNs) are asserted on the planned releases in
``tests/infra/wiring/test_cluster_services.py``.

Placement: controllers run on the system pools (``aiplat.io/pool In [<pools with gpu: false>]``), never on
GPU nodes; device plugins run only on the GPU (NVIDIA) or EFA pools and tolerate every taint there, so a
taint added to a GPU pool never hides its GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.lib import karpenter as karpenter_docs
from infra.lib import lbc_iam
from infra.lib.nodes import EFA_LABEL, POOL_LABEL
from infra.model import allocatable
from infra.model.config.charts import ChartPin

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class ChartRef:
    """An upstream Helm chart, by repository, name and pinned version (never a range, never 'latest'): the
    pin a component's Args take, as plain data (components import nothing from the model)."""

    repo: str
    chart: str
    version: str

    @property
    def oci(self) -> bool:
        return self.repo.startswith("oci://")

    @property
    def chart_ref(self) -> str:
        """The chart as Helm takes it: ``oci://registry/path/<chart>``, or the name with ``repo``."""
        return f"{self.repo.rstrip('/')}/{self.chart}" if self.oci else self.chart


def chart_ref(pin: ChartPin, *, chart: str | None = None) -> ChartRef:
    """The config's validated pin as plain data; ``chart``: another chart released with it (same repository
    and version, e.g. Karpenter's CRD chart)."""
    return ChartRef(repo=pin.repo, chart=chart or pin.chart, version=pin.version)


# Device plugins tolerate every taint: their node affinity already confines them to GPU/EFA pools.
TOLERATE_ALL = [{"operator": "Exists"}]


def pool_affinity(pools: Sequence[str], *extra: Mapping[str, Any]) -> dict[str, Any]:
    """A required node affinity to nodes of ``pools`` (our ``aiplat.io/pool`` label), plus ``extra``
    match expressions in the same term (AND)."""
    if not pools:
        raise ValueError("a placement needs at least one pool")
    expressions = [{"key": POOL_LABEL, "operator": "In", "values": sorted(pools)}, *extra]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


def nvidia_device_plugin_values(gpu_pools: Sequence[str]) -> dict[str, Any]:
    """NVIDIA/k8s-device-plugin chart 0.20.0 (``deployments/helm/nvidia-device-plugin/values.yaml``).

    The chart's default affinity needs node-feature-discovery or the ``nvidia.com/gpu.present`` label
    (nodeadm sets it only on Kubernetes >= 1.35 with AMIs >= v20260209), so it is replaced by our pool
    label: managed GPU pools and Karpenter GPU pools alike. No runtimeClassName: nodeadm makes ``nvidia`` the
    default containerd runtime on the AL2023 NVIDIA AMI.
    """
    return {
        "affinity": pool_affinity(gpu_pools),
        "tolerations": TOLERATE_ALL,
        "priorityClassName": "system-node-critical",
    }


def efa_device_plugin_values() -> dict[str, Any]:
    """aws/eks-charts ``stable/aws-efa-k8s-device-plugin`` v0.5.30 values.

    The chart's own required affinity limits it to the instance types of its version
    (``supportedInstanceLabels.values``, rule ``efa-plugin-knows-types``); ``nodeSelector`` narrows it to
    our EFA pools (``vpc.amazonaws.com/efa.present=true``, set on every pool with ``efa: true``). The
    template already adds ``CriticalAddonsOnly``; ``tolerations`` appends ours (GPU taint and any other).
    """
    return {"nodeSelector": {EFA_LABEL: "true"}, "tolerations": TOLERATE_ALL}


def load_balancer_controller_values(
    *,
    cluster_name: str,
    region: str,
    vpc_id: Any,
    role_arn: Any,
    replicas: int,
    ssl_policy: str,
    system_pools: Sequence[str],
) -> dict[str, Any]:
    """aws/eks-charts ``stable/aws-load-balancer-controller`` 3.5.0 values.

    ``vpc_id`` and ``role_arn`` are placed as given (possibly deploy-time values), so the rest stays known at
    preview. ``region`` and ``vpcId`` are set because pods cannot reach instance metadata (hop limit 1,
    NetworkPolicies); the chart's service account carries the IRSA role (``lbc_iam.POLICY``); the security
    context adds what PSS ``restricted`` needs beyond the chart's default.

    ``enableServiceMutatorWebhook`` is off: at 3.5.0 it is a ``failurePolicy: Fail`` webhook on CREATE of
    every Service (``values.yaml`` l.484-490, ``templates/webhook.yaml`` l.104-146), so while the controller
    starts every other release's Service create fails and rolls back; it only defaults new LoadBalancer
    Services to this controller, and the platform creates none (inference uses an Ingress). Source, commit
    5239609: https://github.com/aws/eks-charts/blob/master/stable/aws-load-balancer-controller/values.yaml
    """
    return {
        "clusterName": cluster_name,
        "enableServiceMutatorWebhook": False,
        "region": region,
        "vpcId": vpc_id,
        "replicaCount": replicas,
        "serviceAccount": {
            "create": True,
            "name": lbc_iam.SERVICE_ACCOUNT,
            "annotations": {IRSA_ANNOTATION: role_arn},
        },
        "defaultSSLPolicy": ssl_policy,
        "affinity": pool_affinity(system_pools),
        "podDisruptionBudget": {"maxUnavailable": 1},
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def metrics_server_values(*, replicas: int, system_pools: Sequence[str]) -> dict[str, Any]:
    """kubernetes-sigs/metrics-server chart values (the pin ``METRICS_SERVER_CHART`` of the config): HA with a
    PodDisruptionBudget, on system pools."""
    return {
        "replicas": replicas,
        "podDisruptionBudget": {"enabled": replicas > 1, "minAvailable": 1},
        "affinity": pool_affinity(system_pools),
    }


def cert_manager_values(*, system_pools: Sequence[str]) -> dict[str, Any]:
    """cert-manager chart v1.21.1 (``deploy/charts/cert-manager/values.yaml``): CRDs installed and upgraded
    with the release (``crds.enabled``) and kept on uninstall (``crds.keep``, so Certificates survive);
    every component on the system pools."""
    affinity = pool_affinity(system_pools)
    return {
        "crds": {"enabled": True, "keep": True},
        "affinity": affinity,
        "webhook": {"affinity": affinity},
        "cainjector": {"affinity": affinity},
        "startupapicheck": {"affinity": affinity},
    }


def karpenter_values(
    *,
    cluster_name: str,
    cluster_endpoint: Any,
    interruption_queue: Any,
    role_arn: Any,
    region: str,
    replicas: int,
    system_pools: Sequence[str],
) -> dict[str, Any]:
    """aws/karpenter-provider-aws ``charts/karpenter`` 1.14.1 values.

    The endpoint, queue and role ARN are placed as they are (strings, or deploy-time values passed without
    an apply, so every other value stays known at preview).

    The chart's default affinity (``karpenter.sh/nodepool DoesNotExist``: never on a node it manages, one
    replica per host) is kept and pinned to the system pools. ``AWS_REGION`` is set because the
    controller cannot read it from instance metadata. Resources follow the getting-started guide (1 CPU,
    1 GiB, requests = limits).
    """
    return {
        "replicas": replicas,
        "serviceAccount": {
            "create": True,
            "name": karpenter_docs.SERVICE_ACCOUNT,
            "annotations": {IRSA_ANNOTATION: role_arn},
        },
        "settings": {
            "clusterName": cluster_name,
            "clusterEndpoint": cluster_endpoint,
            "interruptionQueue": interruption_queue,
        },
        "affinity": {
            **pool_affinity(system_pools, {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}),
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            },
        },
        "controller": {
            "env": [{"name": "AWS_REGION", "value": region}],
            # counted by the rule minio-fits-system-pools, which reads the same constant
            "resources": {
                "requests": dict(allocatable.KARPENTER_CONTROLLER_RESOURCES),
                "limits": dict(allocatable.KARPENTER_CONTROLLER_RESOURCES),
            },
        },
    }
