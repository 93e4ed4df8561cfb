"""What a node of an instance type offers pods, estimated from AWS's facts, and the memory the platform's own
controllers request on the system pools. Pure: used by the rules that check whether pods fit (MinIO).

``allocatable = capacity - kube-reserved - system-reserved - eviction threshold``
(https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable).
On our AL2023 AMIs nodeadm sets ``kubeReserved.memory = 11 * maxPods + 255`` MiB, no systemReserved,
``evictionHard memory.available: 100Mi`` (awslabs/amazon-eks-ami @ 81fec2e8,
``nodeadm/internal/kubelet/config.go``), with ``maxPods = ENIs * (IPv4 per ENI - 1) + 2``
(``eni_max_pods.go``; no prefix delegation). Capacity is nominal memory less Karpenter's
``vmMemoryOverheadPercent`` 7.5% (https://karpenter.sh/v1.14/reference/settings/), which errs low. E.g.
m6i.2xlarge: 58 pods, 893 MiB reserved, 30310 - 893 - 100 = 29317 MiB.
"""

from __future__ import annotations

import math

from infra.core.facts import InstanceFacts
from infra.core.trainjobs import quantity_mib

# Karpenter's default VM_MEMORY_OVERHEAD_PERCENT: nominal memory the kernel does not report as capacity
VM_MEMORY_OVERHEAD = 0.075
EVICTION_HARD_MIB = 100  # nodeadm's evictionHard memory.available
DEFAULT_MAX_PODS = 110  # nodeadm's fallback when it knows no ENI limit (maxpods.DefaultMaxPods)

# The Karpenter controller's resources (requests = limits, the getting-started guide's values): the one
# memory request the platform itself sets on the system pools; infra/core/kube.py puts them in the values.
KARPENTER_CONTROLLER_RESOURCES = {"cpu": "1", "memory": "1Gi"}
KARPENTER_CONTROLLER_MEMORY_MIB = quantity_mib(KARPENTER_CONTROLLER_RESOURCES["memory"])


def max_pods(facts: InstanceFacts) -> int:
    """Pods the kubelet admits on a node of this type (the VPC CNI's ENI limit, over the interfaces of the
    default network card; nodeadm's 110 when the source gives no address count)."""
    default_card = [c.maximum_network_interfaces for c in facts.network_cards if c.index == 0]
    enis = default_card[0] if default_card else facts.max_network_interfaces
    if facts.ipv4_addresses_per_interface <= 0 or enis <= 0:
        return DEFAULT_MAX_PODS
    return enis * (facts.ipv4_addresses_per_interface - 1) + 2


def kube_reserved_memory_mib(facts: InstanceFacts) -> int:
    """nodeadm's kubeReserved memory for this type: 11 MiB per pod it admits plus 255 MiB."""
    return 11 * max_pods(facts) + 255


def allocatable_memory_mib(facts: InstanceFacts) -> int:
    """Estimated allocatable memory of one node (MiB): capacity less kube-reserved and the eviction
    threshold (see the module docstring)."""
    capacity = math.floor(facts.memory_mib * (1 - VM_MEMORY_OVERHEAD))
    return max(0, capacity - kube_reserved_memory_mib(facts) - EVICTION_HARD_MIB)


def pods_that_fit(free_mib: list[int], request_mib: int) -> int:
    """How many pods requesting ``request_mib`` fit on nodes with ``free_mib`` each (per-node bin packing:
    a pod never spans nodes)."""
    if request_mib <= 0:
        raise ValueError("a memory request must be positive")
    return sum(max(0, free) // request_mib for free in free_mib)


def largest_request_that_fits(free_mib: list[int], pods: int) -> int:
    """The largest request (MiB) with which ``pods`` pods still fit on ``free_mib`` (0: not even 1 MiB)."""
    low, high = 0, max([0, *free_mib])
    while low < high:  # the largest m in [0, high] with pods_that_fit(m) >= pods
        mid = (low + high + 1) // 2
        if pods_that_fit(free_mib, mid) >= pods:
            low = mid
        else:
            high = mid - 1
    return low
