"""Which vCPU quota limits which pool, and how many vCPUs a stack asks of each (AWS vCPU counts from the
snapshot, sizes from the stack files; Karpenter pools at their GPU limit on their worst candidate type)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from infra.core.facts import RegionFacts
from infra.io import snapshot
from infra.io.stackfiles import load_stack_config
from infra.karpenter.gpu_offers import gpu_offer
from infra.preflight.quotas import Purchase, karpenter_worst_cases, quota_for, vcpu_demand
from infra.schema.parse import parse_platform_config
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("instance_type", "purchase", "code"),
    [
        ("p5.48xlarge", Purchase.on_demand, "L-417A185B"),
        ("p4d.24xlarge", Purchase.spot, "L-7212CCBC"),
        ("g5.xlarge", Purchase.on_demand, "L-DB2E81BA"),
        ("g4dn.2xlarge", Purchase.spot, "L-3819A6DF"),
        ("vt1.3xlarge", Purchase.on_demand, "L-DB2E81BA"),
        ("m6i.2xlarge", Purchase.on_demand, "L-1216C47A"),
        ("im4gn.large", Purchase.on_demand, "L-1216C47A"),
        ("c7gn.large", Purchase.spot, "L-34B43A08"),
        ("inf2.xlarge", Purchase.on_demand, None),
        ("trn1.32xlarge", Purchase.on_demand, None),
        ("dl1.24xlarge", Purchase.on_demand, None),
    ],
)
def test_quota_of_a_type(instance_type: str, purchase: Purchase, code: str | None) -> None:
    q = quota_for(instance_type, purchase)
    assert (q.code if q else None) == code


def _vcpus(itype: str) -> int:
    facts = snapshot.instance_facts(itype)
    assert facts is not None
    return facts.vcpus


def test_demand_sums_pools_per_quota_at_max_size() -> None:
    cfg = load_stack_config("prod-us-train")
    demands, unmapped = vcpu_demand(cfg, snapshot.region_facts(cfg))
    assert unmapped == []
    got = {d.quota.code: d.vcpus for d in demands}
    system, train, publisher = (cfg.node_pools[p] for p in ("system", "train", "publisher"))
    assert got == {
        # on-demand m6i.2xlarge and the publisher's m6i.xlarge
        "L-1216C47A": system.max_size * _vcpus(system.instance_type)
        + publisher.max_size * _vcpus(publisher.instance_type),
        "L-417A185B": train.max_size * _vcpus(train.instance_type),  # on-demand p5.48xlarge
    }


def test_managed_and_karpenter_spot_pools_share_the_spot_quota() -> None:
    """dev-us-train: the managed Spot g5.xlarge pool at max_size plus the Karpenter Spot pool at its GPU
    limit on its candidate type with the most vCPUs per GPU, both in the G and VT Spot quota."""
    cfg = load_stack_config("dev-us-train")
    facts = snapshot.region_facts(cfg)
    demands, unmapped = vcpu_demand(cfg, facts)
    assert unmapped == []
    by_code = {d.quota.code: d for d in demands}
    gpu, karp = cfg.node_pools["gpu"], cfg.cluster_services.karpenter.node_pools["spot-gpu"]
    candidates = gpu_offer(cfg, facts, karp).instance_types
    worst = max(facts.instances[t].vcpus / facts.instances[t].gpu_count for t in candidates)
    spot = by_code["L-3819A6DF"]
    assert spot.vcpus == gpu.max_size * _vcpus(gpu.instance_type) + karp.gpu_limit * worst
    assert spot.fields == (
        "node_pools.gpu.max_size",
        "cluster_services.karpenter.node_pools.spot-gpu.gpu_limit",
    )
    assert spot.sources[1].startswith(f"karpenter.spot-gpu: up to {karp.gpu_limit} GPUs (gpu_limit) as ")
    assert all(t in spot.sources[1] for t in candidates)  # the types considered are named
    assert "L-DB2E81BA" not in by_code  # spot only: no On-Demand G demand


def test_capacity_block_pools_are_flagged() -> None:
    cfg = load_stack_config("capacity-block", REPO / "examples")
    demands, _ = vcpu_demand(cfg, snapshot.region_facts(cfg))
    flagged = {d.quota.code: d.capacity_block_only for d in demands}
    assert flagged == {"L-417A185B": True, "L-1216C47A": False}


# -- Karpenter pools: the arithmetic on chosen facts ---------------------------------------------------------


def _karpenter_cfg(families: list[str], **pool: Any) -> Any:
    raw = yaml.safe_load((REPO / "stacks/Pulumi.dev-us-train.yaml").read_text())["config"]["aiplat:platform"]
    raw["cluster_services"]["karpenter"]["node_pools"] = {"kp": {"instance_families": families, **pool}}
    # only the system pool beside it (its m6i type is not in the chosen facts, so it asks nothing)
    raw["node_pools"] = {"system": raw["node_pools"]["system"]}
    raw.pop("training")
    raw.pop("teams")  # they queue the training runs
    return parse_platform_config(raw)


def _facts(cfg: Any, types: dict[str, tuple[int, int]]) -> RegionFacts:
    """Chosen (vCPUs, GPUs) per type, offered in every VPC zone: NVIDIA x86_64 types like g5.xlarge."""
    base = snapshot.instance_facts("g5.xlarge")
    assert base is not None
    zones = snapshot.region_facts(cfg).zones
    return RegionFacts(
        region=cfg.region,
        zones=zones,
        offerings={z.name: frozenset(types) for z in zones},
        instances={
            t: dataclasses.replace(base, instance_type=t, vcpus=v, gpu_count=g) for t, (v, g) in types.items()
        },
    )


@pytest.mark.parametrize(
    ("families", "types", "pool", "expected"),
    [
        # one G type: gpu_limit x its vCPUs per GPU, Spot only (the pool's capacity_types)
        (["g5"], {"g5.xlarge": (4, 1)}, {"gpu_limit": 16, "capacity_types": ["spot"]}, {"L-3819A6DF": 64}),
        # the type with the most vCPUs per GPU decides (16xlarge: 64 per GPU beats 12xlarge: 12)
        (
            ["g5"],
            {"g5.xlarge": (4, 1), "g5.16xlarge": (64, 1), "g5.12xlarge": (48, 4)},
            {"gpu_limit": 8, "max_gpus_per_node": 4},
            {"L-DB2E81BA": 512},
        ),
        # max_gpus_per_node leaves a type out before the ratio is taken
        (
            ["g5"],
            {"g5.xlarge": (4, 1), "g5.48xlarge": (192, 8)},
            {"gpu_limit": 8, "max_gpus_per_node": 4},
            {"L-DB2E81BA": 32},
        ),
        # both capacity types: the same vCPUs against the On-Demand and the Spot quota
        (
            ["p4de"],
            {"p4de.24xlarge": (96, 8)},
            {"gpu_limit": 16, "capacity_types": ["on-demand", "spot"]},
            {"L-417A185B": 192, "L-7212CCBC": 192},
        ),
        # G and P candidates: each group's quota gets the whole limit on its own worst type
        (
            ["g6e", "p5"],
            {"g6e.xlarge": (4, 1), "p5.48xlarge": (192, 8)},
            {"gpu_limit": 16},
            {"L-DB2E81BA": 64, "L-417A185B": 384},
        ),
        # a ratio that is not whole: rounded up (6 vCPUs / 4 GPUs x 3 GPUs = 4.5 -> 5)
        (["g9"], {"g9.odd": (6, 4)}, {"gpu_limit": 3, "max_gpus_per_node": 4}, {"L-DB2E81BA": 5}),
    ],
    ids=[
        "one-type-spot",
        "most-vcpus-per-gpu",
        "max-gpus-per-node",
        "both-capacity-types",
        "g-and-p",
        "ceil",
    ],
)
def test_karpenter_pool_at_its_gpu_limit(
    families: list[str], types: dict[str, tuple[int, int]], pool: dict, expected: dict[str, int]
) -> None:
    cfg = _karpenter_cfg(families, **pool)
    demands, unmapped = vcpu_demand(cfg, _facts(cfg, types))
    assert unmapped == []
    assert {d.quota.code: d.vcpus for d in demands} == expected
    for d in demands:
        assert d.fields == ("cluster_services.karpenter.node_pools.kp.gpu_limit",)
        assert not d.capacity_block_only


def test_karpenter_source_line_names_the_worst_type_and_the_types_considered() -> None:
    cfg = _karpenter_cfg(["g5"], gpu_limit=16, max_gpus_per_node=4, capacity_types=["on-demand", "spot"])
    facts = _facts(cfg, {"g5.xlarge": (4, 1), "g5.2xlarge": (8, 1), "g5.12xlarge": (48, 4)})
    demands, _ = vcpu_demand(cfg, facts)
    assert [d.sources for d in demands] == [
        (
            "karpenter.kp: up to 16 GPUs (gpu_limit) as g5.12xlarge (12 vCPUs/GPU, the most of "
            "g5.12xlarge, g5.2xlarge, g5.xlarge) = 192 vCPUs; on-demand and spot both allowed: counted "
            "against both quotas",
        )
    ] * 2
    [case], _ = karpenter_worst_cases(cfg, facts)
    assert (case.instance_type, case.vcpus, case.vcpus_per_gpu) == ("g5.12xlarge", 192, 12)


def test_karpenter_types_without_a_known_quota_are_named() -> None:
    cfg = _karpenter_cfg(["gr6"], gpu_limit=4, max_gpus_per_node=4)
    demands, unmapped = vcpu_demand(cfg, _facts(cfg, {"gr6.4xlarge": (16, 1)}))
    assert demands == []
    assert [(u.pool, u.instance_type, u.field) for u in unmapped] == [
        ("karpenter.kp", "gr6.4xlarge", "cluster_services.karpenter.node_pools.kp.instance_families")
    ]


def test_a_karpenter_pool_without_candidates_asks_nothing() -> None:
    cfg = _karpenter_cfg(["g5"])
    assert vcpu_demand(cfg, _facts(cfg, {})) == ([], [])


def test_shipped_infer_stacks_have_gpu_quota_demand() -> None:
    """The inference stacks' GPUs come only from Karpenter: their G (and, in Singapore, P) quota demand is
    the pool's, on the offline AWS data."""
    for stack, codes in (("prod-hk-infer", {"L-DB2E81BA"}), ("prod-sg-infer", {"L-DB2E81BA", "L-417A185B"})):
        cfg = load_stack_config(stack)
        demands, _ = vcpu_demand(cfg, snapshot.region_facts(cfg))
        gpu = {d.quota.code for d in demands if d.quota.group != "Standard"}
        assert gpu == codes, stack
