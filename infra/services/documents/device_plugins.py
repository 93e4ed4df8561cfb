"""Chart values of the NVIDIA and EFA device plugins. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.core.kube import TOLERATE_ALL
from infra.pools.documents.nodes import DEVICE_LIST_STRATEGY, EFA_LABEL, pool_affinity


def nvidia_device_plugin_values(gpu_pools: Sequence[str]) -> dict[str, Any]:
    """NVIDIA/k8s-device-plugin chart 0.20.0 (``deployments/helm/nvidia-device-plugin/values.yaml``).

    The chart's default affinity needs node-feature-discovery or the ``nvidia.com/gpu.present`` label
    (nodeadm sets it only on Kubernetes >= 1.35 with AMIs >= v20260209), so it is replaced by our pool
    label: managed GPU pools and Karpenter GPU pools alike. No runtimeClassName: nodeadm makes ``nvidia`` the
    default containerd runtime on the AL2023 NVIDIA AMI.

    GPUs are handed to containers as volume mounts (``deviceListStrategy``), the only form the nodes'
    toolkit accepts from unprivileged containers (``nodes.TOOLKIT_GPU_ISOLATION``). The plugin itself sees
    the node's GPUs through ``NVIDIA_VISIBLE_DEVICES=all`` (its template sets it), which the toolkit now
    honours for privileged containers only: it runs privileged, as NVIDIA's GPU Operator runs it
    (``securityContext`` replaces the chart's SYS_ADMIN-only context, templates/_helpers.tpl v0.20.0).
    """
    return {
        "deviceListStrategy": DEVICE_LIST_STRATEGY,
        "securityContext": {"privileged": True},
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
