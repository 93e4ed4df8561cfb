"""Node settings derived from the instance type: AMI type, user data, labels and taints. Pure, no Pulumi."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.facts import InstanceFacts
from infra.pools.config import CapacityType

# The taint that keeps non-GPU pods off GPU nodes; the NVIDIA device plugin tolerates it.
# https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
# The extended resource the NVIDIA device plugin advertises: what GPU pods request and Karpenter limits.
GPU_RESOURCE = "nvidia.com/gpu"
# The extended resource the EFA device plugin advertises: what EFA training pods request.
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Label the EFA device plugin selects nodes by.
EFA_LABEL = "vpc.amazonaws.com/efa.present"
# IMDSv2 hop limit of every node: 1 keeps pods (one hop further) from the node role's credentials.
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-IMDS-existing-instances.html
IMDS_HOP_LIMIT = 1
POOL_LABEL = "aiplat.io/pool"

# EKS managed node group taint effects (API spelling).
TAINT_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
}

MIME_BOUNDARY = "//aiplat//"

# Managed node group capacity types (API spelling). An ODCR is on-demand capacity, targeted in the launch
# template; a Capacity Block has its own type.
# https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html
CAPACITY_TYPES = {
    CapacityType.on_demand: "ON_DEMAND",
    CapacityType.spot: "SPOT",
    CapacityType.capacity_reservation: "ON_DEMAND",
    CapacityType.capacity_block: "CAPACITY_BLOCK",
}


@dataclass(frozen=True)
class Taint:
    """A managed node group taint: key, value and the API spelling of the effect (``NO_SCHEDULE`` ...)."""

    key: str
    value: str
    effect: str


def ami_type(facts: InstanceFacts, gpu: bool) -> str:
    """EKS AMI type: AL2023 NVIDIA for GPU pools, AL2023 standard otherwise; ARM variants on arm64.

    https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html#AmazonEKS-Type-Nodegroup-amiType
    """
    arm = "arm64" in facts.architectures and "x86_64" not in facts.architectures
    arch = "ARM_64" if arm else "x86_64"
    return f"AL2023_{arch}_{'NVIDIA' if gpu else 'STANDARD'}"


# GPU isolation on every GPU node, whatever launches it (managed node group or Karpenter). A container that
# requests no GPU must see none: the NVIDIA Container Toolkit must not honour ``NVIDIA_VISIBLE_DEVICES`` from
# an unprivileged container (CUDA base images set it to ``all``), only the device plugin's volume mounts
# under /var/run/nvidia-container-devices, which the kubelet adds for allocated GPUs alone. The toolkit's
# defaults are the opposite (envvar accepted, volume mounts ignored): NVIDIA/nvidia-container-toolkit
# ``internal/config/config.go`` (GetDefault) and https://docs.nvidia.com/datacenter/cloud-native/
# container-toolkit/latest/docker-specialized.html; the rationale is NVIDIA's "Preventing unprivileged access
# to GPUs in Kubernetes" (linked from NVIDIA/k8s-device-plugin README v0.20.0, DEVICE_LIST_STRATEGY).
# Bottlerocket takes the same two as settings.nvidia-container-runtime.* (already false/true by default,
# https://bottlerocket.dev/en/os/1.54.x/api/settings/nvidia-container-runtime); our pools run AL2023
# (ami_type, the Karpenter alias), where only the file says it.
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
TOOLKIT_GPU_ISOLATION: Mapping[str, bool] = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged": False,
    "accept-nvidia-visible-devices-as-volume-mounts": True,
}
# The NVIDIA device plugin's DEVICE_LIST_STRATEGY that matches: allocated GPUs as volume mounts, never the
# environment variable (NVIDIA/k8s-device-plugin README v0.20.0, "DEVICE_LIST_STRATEGY").
DEVICE_LIST_STRATEGY = "volume-mounts"


def gpu_isolation_script() -> str:
    """A cloud-init shell script that writes :data:`TOOLKIT_GPU_ISOLATION` into the toolkit's config.toml.

    It runs before containerd and the kubelet start: the AL2023 ``nodeadm-run.service`` is ordered
    ``After=... cloud-final.service`` (awslabs/amazon-eks-ami
    templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service). Top-level TOML keys must come
    before the first table, so any line setting (or commenting) the keys is dropped and the keys are written
    first; the rest of the file (the AMI's runtime settings) stays as it was. A missing file is created
    (the toolkit would otherwise use its defaults, which accept the variable). Idempotent.
    """
    if not all(re.fullmatch(r"[a-z-]+", k) for k in TOOLKIT_GPU_ISOLATION):
        raise ValueError("toolkit keys go into a grep pattern unescaped: letters and dashes only")
    keys = "|".join(TOOLKIT_GPU_ISOLATION)
    lines = " ".join(f"'{k} = {str(v).lower()}'" for k, v in TOOLKIT_GPU_ISOLATION.items())
    return textwrap.dedent(
        f"""\
        #!/bin/bash
        # aiplat: GPUs only through the device plugin's volume mounts (infra/pools/documents/nodes.py)
        set -euo pipefail
        config={TOOLKIT_CONFIG}
        mkdir -p "$(dirname "$config")"
        touch "$config"
        tmp="$(mktemp)"
        printf '%s\\n' {lines} > "$tmp"
        grep -v -E '^[[:space:]]*#?[[:space:]]*({keys})[[:space:]]*=' "$config" >> "$tmp" || true
        cat "$tmp" > "$config"
        rm -f "$tmp"
        """
    )


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"--{MIME_BOUNDARY}\nContent-Type: {kind}\n\n{text}\n" for kind, text in parts)
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n\n'
        f"{body}"
        f"--{MIME_BOUNDARY}--\n"
    )


def gpu_user_data() -> str:
    """MIME multi-part user data with only the GPU isolation script: the Karpenter EC2NodeClass's
    ``userData`` (Karpenter adds its own NodeConfig for AL2023 and keeps the other parts;
    https://karpenter.sh/docs/concepts/nodeclasses/#specuserdata)."""
    return _mime([("text/x-shellscript", gpu_isolation_script())])


def node_user_data(facts: InstanceFacts, gpu: bool = False) -> str | None:
    """MIME multi-part user data with an AL2023 ``nodeadm`` NodeConfig and, on GPU pools, the GPU isolation
    script (:func:`gpu_isolation_script`); None if nothing to say.

    Types with NVMe instance store get ``instance.localStorage.strategy: RAID0``: nodeadm stripes the
    disks into one array and puts the kubelet and containerd state on it (mounted under
    /mnt/k8s-disks), which is where the data cache lives. EKS merges its own NodeConfig (cluster
    endpoint, CA) into the managed node group's user data, so we only add what differs.
    https://awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/#localstorageoptions
    """
    parts: list[tuple[str, str]] = []
    if facts.has_instance_store:
        node_config = textwrap.dedent(
            """\
            ---
            apiVersion: node.eks.aws/v1alpha1
            kind: NodeConfig
            spec:
              instance:
                localStorage:
                  strategy: RAID0
            """
        )
        parts.append(("application/node.eks.aws", node_config))
    if gpu:
        parts.append(("text/x-shellscript", gpu_isolation_script()))
    return _mime(parts) if parts else None


def pool_labels(pool: str, user: dict[str, str], efa: bool) -> dict[str, str]:
    """The pool's Kubernetes labels: ours first, the user's may add but not override them."""
    ours = {POOL_LABEL: pool}
    if efa:
        ours[EFA_LABEL] = "true"
    clash = sorted(set(ours) & set(user))
    if clash:
        raise ValueError(f"labels {clash} are set by the platform")
    return {**ours, **user}


def pool_taints(gpu: bool, user: dict[str, tuple[str, str]]) -> tuple[Taint, ...]:
    """Managed node group taints: the GPU taint on GPU pools, then the user's (effects as in Kubernetes)."""
    taints: list[Taint] = []
    if gpu:
        taints.append(Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, TAINT_EFFECTS["NoSchedule"]))
    for key, (value, effect) in sorted(user.items()):
        if gpu and key == GPU_TAINT_KEY:
            continue
        taints.append(Taint(key, value, TAINT_EFFECTS[effect]))
    return tuple(taints)


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
