"""Node settings derived from the instance type: AMI type, user data, labels and taints. Pure, no Pulumi."""

from __future__ import annotations

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


def node_user_data(facts: InstanceFacts) -> str | None:
    """MIME multi-part user data with an AL2023 ``nodeadm`` NodeConfig, or None if nothing to say.

    Types with NVMe instance store get ``instance.localStorage.strategy: RAID0``: nodeadm stripes the
    disks into one array and puts the kubelet and containerd state on it (mounted under
    /mnt/k8s-disks), which is where the data cache lives. EKS merges its own NodeConfig (cluster
    endpoint, CA) into the managed node group's user data, so we only add what differs.
    https://awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/#localstorageoptions
    """
    if not facts.has_instance_store:
        return None
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
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n\n'
        f"--{MIME_BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"{node_config}\n"
        f"--{MIME_BOUNDARY}--\n"
    )


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
