"""EC2 vCPU quotas and the vCPUs a stack's node pools may ask for. Pure.

EC2 limits running vCPUs per region, family group and purchase option
(https://docs.aws.amazon.com/general/latest/gr/ec2-service.html): a managed pool must fit at ``max_size``,
a Karpenter GPU pool at ``gpu_limit`` on its candidate with the most vCPUs per GPU.
Quota codes: ``L-1216C47A`` is on an AWS page
(https://docs.aws.amazon.com/cli/latest/userguide/cli_service-quotas_code_examples.html); the others come
from public ``list-service-quotas --service-code ec2`` dumps and skypilot-org/skypilot-catalog
``catalogs/v5/aws/instance_quota_mapping.csv``. ``aiplat preflight`` reports a wrong code as "not found";
``L-417A2355``, seen in some public code, is a wrong P code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING

from infra.core.facts import RegionFacts
from infra.core.instance_types import instance_category
from infra.karpenter.config import CapacityKind
from infra.karpenter.gpu_offers import gpu_offer
from infra.pools.config import CapacityType

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


class Purchase(StrEnum):
    on_demand = "on_demand"
    spot = "spot"


@dataclass(frozen=True)
class VcpuQuota:
    """One EC2 vCPU quota: its code, AWS's name, the instance-category group and purchase option it limits."""

    code: str
    name: str
    group: str
    purchase: Purchase


QUOTAS: tuple[VcpuQuota, ...] = (
    VcpuQuota("L-417A185B", "Running On-Demand P instances", "P", Purchase.on_demand),
    VcpuQuota("L-7212CCBC", "All P Spot Instance Requests", "P", Purchase.spot),
    VcpuQuota("L-DB2E81BA", "Running On-Demand G and VT instances", "G and VT", Purchase.on_demand),
    VcpuQuota("L-3819A6DF", "All G and VT Spot Instance Requests", "G and VT", Purchase.spot),
    VcpuQuota(
        "L-1216C47A",
        "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
        "Standard",
        Purchase.on_demand,
    ),
    VcpuQuota(
        "L-34B43A08",
        "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
        "Standard",
        Purchase.spot,
    ),
)
BY_CODE: Mapping[str, VcpuQuota] = {q.code: q for q in QUOTAS}

# Instance category (the letters before the generation digit) -> quota group. 'im'/'is' are I-family
# storage types (im4gn, is4gen). Families not listed (F, X, Inf, Trn, DL, HPC, U, Mac) have quotas of
# their own that this table does not carry: preflight says so instead of guessing.
_GROUPS = {
    "p": "P",
    "g": "G and VT",
    "vt": "G and VT",
    **{f: "Standard" for f in ("a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z")},
}


def quota_for(instance_type: str, purchase: Purchase) -> VcpuQuota | None:
    """The vCPU quota that limits ``instance_type`` bought as ``purchase``; None if not in the table."""
    group = _GROUPS.get(instance_category(instance_type))
    return next((q for q in QUOTAS if q.group == group and q.purchase == purchase), None)


def purchase_of(capacity_type: CapacityType) -> Purchase:
    """Spot pools draw on the Spot quota; On-Demand, ODCR and Capacity Block pools on the On-Demand one.

    ODCR instances are On-Demand instances, counted here against the On-Demand quota (as the quota table of
    docs/platform/node-pools.md does). Whether instances in a Capacity Block draw on it is not stated in the
    sources this project has, so preflight only warns when a capacity_block pool would not fit.
    """
    return Purchase.spot if capacity_type is CapacityType.spot else Purchase.on_demand


@dataclass(frozen=True)
class VcpuDemand:
    """The vCPUs one quota must cover, where they come from (``node_pools.train: 4 x p5.48xlarge``) and the
    config fields that bound them (``node_pools.train.max_size``,
    ``cluster_services.karpenter.node_pools.gpu.gpu_limit``: dotted, under ``aiplat:platform``)."""

    quota: VcpuQuota
    vcpus: int
    sources: tuple[str, ...]
    fields: tuple[str, ...]
    # True when every contributing pool is a Capacity Block (see ``purchase_of``)
    capacity_block_only: bool = False


@dataclass(frozen=True)
class Unmapped:
    """A pool type whose instance category has no quota in ``QUOTAS``; ``field`` is the field naming it."""

    pool: str
    instance_type: str
    field: str


@dataclass(frozen=True)
class KarpenterWorstCase:
    """A Karpenter GPU pool at its limit, per quota group: ``gpu_limit`` GPUs, all on the candidate type of
    that group with the most vCPUs per GPU (what the group's quota must cover if Karpenter picks it)."""

    pool: str
    group: str
    instance_type: str
    vcpus_per_gpu: Fraction
    gpus: int
    # the candidate types of this group that were compared (the NodePool's instance types, ``gpu_offer``)
    considered: tuple[str, ...]

    @property
    def vcpus(self) -> int:
        return math.ceil(self.gpus * self.vcpus_per_gpu)

    def describe(self) -> str:
        ratio = self.vcpus_per_gpu
        shown = str(ratio.numerator) if ratio.denominator == 1 else f"{float(ratio):g}"
        return (
            f"karpenter.{self.pool}: up to {self.gpus} GPUs (gpu_limit) as {self.instance_type} ({shown} "
            f"vCPUs/GPU, the most of {', '.join(self.considered)}) = {self.vcpus} vCPUs"
        )


def karpenter_worst_cases(
    cfg: PlatformConfig, facts: RegionFacts
) -> tuple[list[KarpenterWorstCase], list[Unmapped]]:
    """Each Karpenter pool's worst case per quota group, and its candidate types without a known quota.

    Karpenter launches no node past ``spec.limits`` (``nvidia.com/gpu: gpu_limit``), so the pool holds at
    most ``gpu_limit`` GPUs; which types carry them is Karpenter's choice among the NodePool's types. The
    vCPUs they bring are at most ``gpu_limit`` x the largest vCPUs-per-GPU ratio of those types (an upper
    bound: whole nodes may not reach the limit exactly). Karpenter checks limits eventually consistently,
    so a fast scale-out can overrun them (https://karpenter.sh/v1.14/concepts/nodepools/#speclimits).
    A pool with no candidate type has no demand: ``karpenter-gpu-types-offered`` refuses it.
    """
    cases: list[KarpenterWorstCase] = []
    unmapped: list[Unmapped] = []
    for name, pool in sorted(cfg.cluster_services.karpenter.node_pools.items()):
        by_group: dict[str, list[str]] = {}
        for itype in gpu_offer(cfg, facts, pool).instance_types:
            group = _GROUPS.get(instance_category(itype))
            if group is None:
                unmapped.append(
                    Unmapped(
                        f"karpenter.{name}",
                        itype,
                        f"cluster_services.karpenter.node_pools.{name}.instance_families",
                    )
                )
            else:
                by_group.setdefault(group, []).append(itype)
        for group, types in sorted(by_group.items()):

            def ratio(t: str) -> Fraction:
                f = facts.instances[t]
                return Fraction(f.vcpus, f.gpu_count)

            # the highest ratio; among equals the first by name, so the line is stable
            worst = min(types, key=lambda t: (-ratio(t), t))
            cases.append(KarpenterWorstCase(name, group, worst, ratio(worst), pool.gpu_limit, tuple(types)))
    return cases, unmapped


def vcpu_demand(cfg: PlatformConfig, facts: RegionFacts) -> tuple[list[VcpuDemand], list[Unmapped]]:
    """vCPUs per quota at every managed pool's ``max_size`` and every Karpenter pool's ``gpu_limit``, and the
    types whose quota is not in the table.

    Managed pools whose type has no facts (not offered) are skipped: the offering rules report them. A
    Karpenter pool counts against the On-Demand quota, the Spot quota or both, as its ``capacity_types``
    allow: with both, Karpenter prefers Spot but falls back to On-Demand when Spot has no capacity, so
    either quota may have to hold the whole pool.
    """
    totals: dict[str, list] = {}

    def add(quota: VcpuQuota, vcpus: int, source: str, field: str, capacity_block: bool) -> None:
        entry = totals.setdefault(quota.code, [0, [], [], True])
        entry[0] += vcpus
        entry[1].append(source)
        entry[2].append(field)
        entry[3] = entry[3] and capacity_block

    unmapped: list[Unmapped] = []
    for name, pool in sorted(cfg.node_pools.items()):
        instance = facts.instances.get(pool.instance_type)
        if instance is None:
            continue
        quota = quota_for(pool.instance_type, purchase_of(pool.capacity_type))
        if quota is None:
            unmapped.append(Unmapped(name, pool.instance_type, f"node_pools.{name}.instance_type"))
            continue
        add(
            quota,
            pool.max_size * instance.vcpus,
            f"node_pools.{name}: {pool.max_size} x {pool.instance_type} ({instance.vcpus} vCPUs)",
            f"node_pools.{name}.max_size",
            pool.capacity_type is CapacityType.capacity_block,
        )
    cases, karpenter_unmapped = karpenter_worst_cases(cfg, facts)
    unmapped += karpenter_unmapped
    for case in cases:
        kinds = cfg.cluster_services.karpenter.node_pools[case.pool].capacity_types
        both = len(kinds) > 1
        for kind in kinds:
            purchase = Purchase.spot if kind is CapacityKind.spot else Purchase.on_demand
            quota = next(q for q in QUOTAS if q.group == case.group and q.purchase == purchase)
            note = "; on-demand and spot both allowed: counted against both quotas" if both else ""
            add(
                quota,
                case.vcpus,
                case.describe() + note,
                f"cluster_services.karpenter.node_pools.{case.pool}.gpu_limit",
                False,
            )
    demands = [
        VcpuDemand(BY_CODE[code], vcpus, tuple(sources), tuple(fields), cb_only)
        for code, (vcpus, sources, fields, cb_only) in sorted(totals.items())
    ]
    return demands, unmapped
