"""Expected all-reduce bus bandwidth per instance type, and the threshold the bandwidth check fails below.

Bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests ``doc/PERFORMANCE.md``): ``algbw = S / t`` and,
for all-reduce over ``n`` ranks, ``busbw = algbw * 2 * (n - 1) / n``; it is comparable with the per-GPU
hardware peak whatever ``n`` is. ``trainer/tools/allreduce_bench.py`` reports both the same way.

Published figures (``GpuInstanceType.busbw`` in the instance-type table, ``infra/core/instance_types.py``,
with their sources) are out-of-place busbw of ``all_reduce_perf``; the check fails below
``THRESHOLD_SHARE`` of them at the same message size. A type without a published figure falls back to
its network's baseline bandwidth from AWS data (DescribeInstanceTypes ``NetworkInfo.NetworkCards[].
BaselineBandwidthInGbps``, summed): a ring all-reduce across nodes moves about the node's network
bandwidth in bus bandwidth, and the check fails below ``FALLBACK_SHARE`` of it. Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.core.facts import InstanceFacts
from infra.core.instance_types import TABLE

MIB = 1 << 20
# The check passes at 80% of a published figure: the published runs show 10-15% spread between software
# stacks at the same size (p5.48xlarge 2 GiB: 444 vs 438 GB/s), and torch.distributed adds a little
# over nccl-tests.
THRESHOLD_SHARE = 0.8
FALLBACK_SHARE = 0.5
FALLBACK_BYTES = 256 * MIB


@dataclass(frozen=True)
class BusbwThreshold:
    """What the bandwidth check asserts: busbw at ``message_bytes`` must reach ``min_gbps``."""

    instance_type: str
    min_gbps: float
    message_bytes: int
    basis: str  # how the number was derived, with its source


def network_gbytes_per_s(facts: InstanceFacts) -> float:
    """The node's baseline network bandwidth in GB/s (sum over its network cards, AWS data)."""
    return sum(c.baseline_bandwidth_gbps for c in facts.network_cards) / 8.0


def threshold_for(facts: InstanceFacts) -> BusbwThreshold:
    """The bandwidth check's threshold for ``facts.instance_type`` (published figure, else network)."""
    row = TABLE.get(facts.instance_type)
    published = row.busbw if row is not None else None
    if published is not None:
        nodes = f"{published.nodes} nodes" if published.nodes else "node count not stated"
        return BusbwThreshold(
            instance_type=facts.instance_type,
            min_gbps=round(published.busbw_gbps * THRESHOLD_SHARE, 1),
            message_bytes=published.message_bytes,
            basis=(
                f"{THRESHOLD_SHARE:.0%} of {published.busbw_gbps} GB/s published for "
                f"{facts.instance_type} at {published.message_bytes // MIB} MiB ({nodes}): "
                f"{published.source}"
            ),
        )
    network = network_gbytes_per_s(facts)
    if network <= 0:
        raise ValueError(f"{facts.instance_type}: AWS data gives no network bandwidth to derive a threshold")
    return BusbwThreshold(
        instance_type=facts.instance_type,
        min_gbps=round(network * FALLBACK_SHARE, 3),
        message_bytes=FALLBACK_BYTES,
        basis=(
            f"{FALLBACK_SHARE:.0%} of the type's baseline network bandwidth ({network:g} GB/s, "
            "DescribeInstanceTypes NetworkCards BaselineBandwidthInGbps); no published all_reduce_perf figure"
        ),
    )
