"""Which vCPU quota limits which pool, and how many vCPUs a stack asks of each (AWS vCPU counts from the
snapshot, sizes from the stack files)."""

from __future__ import annotations

import pytest

from infra.io import snapshot
from infra.io.stackfiles import load_stack_config
from infra.model.quotas import Purchase, quota_for, vcpu_demand
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


def _facts(cfg):
    return {p.instance_type: snapshot.instance_facts(p.instance_type) for p in cfg.node_pools.values()}


def test_demand_sums_pools_per_quota_at_max_size() -> None:
    cfg = load_stack_config("dev-us-train")
    demands, unmapped = vcpu_demand(cfg, _facts(cfg))
    vcpus = {p.instance_type: snapshot.instance_facts(p.instance_type).vcpus for p in cfg.node_pools.values()}
    assert unmapped == []
    got = {d.quota.code: d.vcpus for d in demands}
    system, gpu = cfg.node_pools["system"], cfg.node_pools["gpu"]
    assert got == {
        "L-1216C47A": system.max_size * vcpus[system.instance_type],  # on-demand m6i.xlarge
        "L-3819A6DF": gpu.max_size * vcpus[gpu.instance_type],  # spot g5.xlarge
    }


def test_capacity_block_pools_are_flagged() -> None:
    cfg = load_stack_config("capacity-block", REPO / "examples")
    demands, _ = vcpu_demand(cfg, _facts(cfg))
    flagged = {d.quota.code: d.capacity_block_only for d in demands}
    assert flagged == {"L-417A185B": True, "L-1216C47A": False}
