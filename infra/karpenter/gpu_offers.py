"""Which GPU instance types a Karpenter pool may launch, from AWS's offerings in the VPC's zones. Pure.

The program asks AWS (offline: moto's snapshot) for every type of the configured families offered per zone
(``infra/io/provider_facts.py``); this module keeps those with NVIDIA GPUs, an allowed architecture and at
most ``max_gpus_per_node`` GPUs, offered in at least one VPC zone. The rules refuse a pool left with no
type (or, on inference stacks, with fewer than two families), and the wiring writes the result into the
NodePool's requirements, so the plan and the NodePool agree on what the region offers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.core.facts import RegionFacts
from infra.core.instance_types import family
from infra.karpenter.config import Architecture, KarpenterPoolConfig
from infra.network.zones import vpc_zones

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

# AWS architecture names (DescribeInstanceTypes ProcessorInfo.SupportedArchitectures) by Kubernetes name.
AWS_ARCH = {Architecture.amd64: "x86_64", Architecture.arm64: "arm64"}


def family_patterns(pool: KarpenterPoolConfig) -> list[str]:
    """EC2 filter values that match every type of the pool's families (``g5.*``)."""
    return [f"{f}.*" for f in pool.instance_families]


def karpenter_patterns(cfg: PlatformConfig) -> list[str]:
    """Every family pattern of every Karpenter pool of the stack, sorted, once each."""
    return sorted(
        {p for pool in cfg.cluster_services.karpenter.node_pools.values() for p in family_patterns(pool)}
    )


@dataclass(frozen=True)
class GpuOffer:
    """What a Karpenter pool may launch: types, their families (config order) and the zones offering them."""

    instance_types: tuple[str, ...]
    families: tuple[str, ...]
    zones: tuple[str, ...]
    # families that are offered in the VPC's zones but have no type that fits (not NVIDIA, architecture,
    # GPU count): named in the rules' messages
    unfit_families: tuple[str, ...] = ()


def gpu_offer(cfg: PlatformConfig, facts: RegionFacts, pool: KarpenterPoolConfig) -> GpuOffer:
    """The types of ``pool``'s families that the VPC's zones offer and that fit the pool."""
    zones = vpc_zones(cfg, facts)
    arches = {AWS_ARCH[a] for a in pool.architectures}
    fitting: dict[str, set[str]] = {}  # type -> zones
    offered_families: set[str] = set()
    for az in zones:
        for itype in facts.offerings.get(az, frozenset()):
            if family(itype) not in pool.instance_families:
                continue
            offered_families.add(family(itype))
            f = facts.instances.get(itype)
            if f is None or not f.has_gpus or (f.gpu_manufacturer or "").upper() != "NVIDIA":
                continue
            if not arches & set(f.architectures) or f.gpu_count > pool.max_gpus_per_node:
                continue
            fitting.setdefault(itype, set()).add(az)
    families = tuple(fam for fam in pool.instance_families if any(family(t) == fam for t in fitting))
    return GpuOffer(
        instance_types=tuple(sorted(fitting)),
        families=families,
        zones=tuple(az for az in zones if any(az in zs for zs in fitting.values())),
        unfit_families=tuple(
            fam for fam in pool.instance_families if fam in offered_families and fam not in families
        ),
    )
