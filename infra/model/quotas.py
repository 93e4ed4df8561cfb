"""EC2 vCPU quotas and the vCPUs a stack's node pools may ask for. Pure.

EC2 limits *running* instances per region in vCPUs, per group of instance families and per purchase
option (On-Demand, Spot). A pool must fit at ``max_size``: the autoscaler may scale to it.
(EC2 endpoints and quotas: https://docs.aws.amazon.com/general/latest/gr/ec2-service.html)

Quota codes (service code ``ec2``). ``L-1216C47A`` is named on an AWS page (AWS CLI user guide, Service
Quotas examples: https://docs.aws.amazon.com/cli/latest/userguide/cli_service-quotas_code_examples.html);
the others come from several independent public dumps of ``list-service-quotas --service-code ec2`` output
and SkyPilot's catalog mapping (skypilot-org/skypilot-catalog ``catalogs/v5/aws/instance_quota_mapping.csv``),
not from an AWS doc page. ``aiplat preflight`` reads each by code, so a wrong code shows as "not found".
Beware a wrong P code ``L-417A2355`` in some public code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from infra.model.config.compute import CapacityType
from infra.model.config.schema import PlatformConfig
from infra.model.facts import InstanceFacts


class Purchase(StrEnum):
    on_demand = "on_demand"
    spot = "spot"


@dataclass(frozen=True)
class VcpuQuota:
    """One EC2 vCPU quota: its code, AWS's name, the family group and purchase option it limits."""

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

# Family prefix (the letters before the generation digit) -> quota group. 'im'/'is' are I-family
# storage types (im4gn, is4gen). Families not listed (F, X, Inf, Trn, DL, HPC, U, Mac) have quotas of
# their own that this table does not carry: preflight says so instead of guessing.
_GROUPS = {
    "p": "P",
    "g": "G and VT",
    "vt": "G and VT",
    **{f: "Standard" for f in ("a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z")},
}


def family(instance_type: str) -> str:
    """``p5.48xlarge`` -> ``p``, ``g4dn.2xlarge`` -> ``g``, ``inf2.xlarge`` -> ``inf``."""
    match = re.match(r"[a-z]+", instance_type)
    return match.group(0) if match else ""


def quota_for(instance_type: str, purchase: Purchase) -> VcpuQuota | None:
    """The vCPU quota that limits ``instance_type`` bought as ``purchase``; None if not in the table."""
    group = _GROUPS.get(family(instance_type))
    return next((q for q in QUOTAS if q.group == group and q.purchase == purchase), None)


def purchase_of(capacity_type: CapacityType) -> Purchase:
    """Spot pools draw on the Spot quota; On-Demand, ODCR and Capacity Block pools on the On-Demand one.

    ODCR instances are On-Demand instances, counted here against the On-Demand quota (as the README's
    quota table does). Whether instances in a Capacity Block draw on it is not stated in the sources this
    project has, so preflight only warns when a capacity_block pool would not fit.
    """
    return Purchase.spot if capacity_type is CapacityType.spot else Purchase.on_demand


@dataclass(frozen=True)
class VcpuDemand:
    """The vCPUs one quota must cover, and where they come from (``node_pools.train: 4 x p5.48xlarge``)."""

    quota: VcpuQuota
    vcpus: int
    sources: tuple[str, ...]
    pools: tuple[str, ...]
    # True when every contributing pool is a Capacity Block (see ``purchase_of``)
    capacity_block_only: bool = False


@dataclass(frozen=True)
class Unmapped:
    """A pool whose family has no quota in ``QUOTAS``."""

    pool: str
    instance_type: str


def vcpu_demand(
    cfg: PlatformConfig, instances: Mapping[str, InstanceFacts]
) -> tuple[list[VcpuDemand], list[Unmapped]]:
    """vCPUs per quota at every pool's ``max_size``, and the pools whose quota is not in the table.

    Pools whose type has no facts (not offered) are skipped: the offering rules report them.
    Extension point: when the config gains Karpenter NodePools, add their ``limits.cpu`` here as further
    sources of the quota of their instance families, so one rule checks both.
    """
    totals: dict[str, list] = {}
    unmapped: list[Unmapped] = []
    for name, pool in sorted(cfg.node_pools.items()):
        facts = instances.get(pool.instance_type)
        if facts is None:
            continue
        quota = quota_for(pool.instance_type, purchase_of(pool.capacity_type))
        if quota is None:
            unmapped.append(Unmapped(name, pool.instance_type))
            continue
        vcpus = pool.max_size * facts.vcpus
        entry = totals.setdefault(quota.code, [0, [], [], True])
        entry[0] += vcpus
        entry[1].append(f"node_pools.{name}: {pool.max_size} x {pool.instance_type} ({facts.vcpus} vCPUs)")
        entry[2].append(name)
        entry[3] = entry[3] and pool.capacity_type is CapacityType.capacity_block
    demands = [
        VcpuDemand(BY_CODE[code], vcpus, tuple(sources), tuple(pools), cb_only)
        for code, (vcpus, sources, pools, cb_only) in sorted(totals.items())
    ]
    return demands, unmapped
