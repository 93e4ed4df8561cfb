"""The instance-type table is AWS's data, covers every GPU type the shipped stacks and examples can launch,
and parses instance-type names as EC2 and Karpenter do."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.core import instance_types
from infra.core.instance_types import EFA_PLUGIN_CHART_VERSION, EFA_PLUGIN_TYPES, TABLE
from infra.io import snapshot
from infra.karpenter.gpu_offers import gpu_offer
from infra.schema.parse import parse_platform_config
from tests.conftest import REPO

STACK_FILES = sorted([*(REPO / "stacks").glob("Pulumi.*.yaml"), *(REPO / "examples").glob("Pulumi.*.yaml")])


@pytest.mark.parametrize("itype", sorted(TABLE))
def test_row_is_aws_data(itype: str) -> None:
    """Every number is what DescribeInstanceTypes says, read through the InstanceFacts the plan builds."""
    row, facts = TABLE[itype], snapshot.instance_facts(itype)
    assert facts is not None, itype
    assert (row.gpus, row.gpu_model, row.gpu_memory_mib) == (
        facts.gpu_count,
        facts.gpu_name,
        facts.gpu_memory_mib,
    )
    assert (row.vcpus, row.memory_mib) == (facts.vcpus, facts.memory_mib)
    assert row.efa_interfaces == facts.efa_interface_limit


def _platform(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["config"]["aiplat:platform"]


def test_table_covers_every_gpu_type_of_the_stacks_and_examples() -> None:
    """The pack counts the GPUs of node groups and NodePools (gpu-budget, cost-cap) from the table: every
    managed pool type and every type a Karpenter pool is offered (``gpu_offer`` on the snapshot) has a row."""
    used: set[str] = set()
    for path in STACK_FILES:
        raw = _platform(path)
        used |= {p["instance_type"] for p in raw.get("node_pools", {}).values()}
        if raw.get("cluster_services", {}).get("karpenter", {}).get("node_pools"):
            cfg = parse_platform_config(raw)
            facts = snapshot.region_facts(cfg)
            for pool in cfg.cluster_services.karpenter.node_pools.values():
                used |= set(gpu_offer(cfg, facts, pool).instance_types)
    gpu_types = {t for t in used if instance_types.is_gpu_family(t)}
    assert gpu_types and gpu_types <= set(TABLE), sorted(gpu_types - set(TABLE))
    assert all(instance_types.gpus(t) == 0 for t in used - gpu_types)


def test_pinned_efa_plugin_lists_every_efa_type_of_the_table() -> None:
    """A row with EFA that the pinned chart does not list would plan an EFA pool the plugin never runs on."""
    listed = EFA_PLUGIN_TYPES[EFA_PLUGIN_CHART_VERSION]
    with_efa = {name for name, row in TABLE.items() if row.efa_interfaces > 0}
    assert with_efa and with_efa <= listed, sorted(with_efa - listed)


def test_every_published_bandwidth_belongs_to_a_row() -> None:
    published = {name for name, row in TABLE.items() if row.busbw is not None}
    assert published == set(instance_types._BUSBW)


@pytest.mark.parametrize(
    ("name", "family", "category", "gpu"),
    [
        ("p5en.48xlarge", "p5en", "p", True),
        ("p6-b200.48xlarge", "p6-b200", "p", True),
        ("g4dn.metal", "g4dn", "g", True),
        ("inf2.xlarge", "inf2", "inf", False),
        ("u7i-12tb.224xlarge", "u7i-12tb", "u", False),
        ("im4gn.large", "im4gn", "im", False),
        ("m6i.2xlarge", "m6i", "m", False),
    ],
)
def test_names_parse_as_ec2_and_karpenter_read_them(name: str, family: str, category: str, gpu: bool) -> None:
    assert instance_types.family(name) == family
    assert instance_types.instance_category(name) == category
    assert instance_types.is_gpu_family(name) is gpu
    assert instance_types.is_gpu_family(family) is gpu  # a family alone, as a NodePool requirement names it


def test_gpu_count_of_types_outside_the_table() -> None:
    assert instance_types.gpus("p5.48xlarge") == 8
    assert instance_types.gpus("g7e.48xlarge") is None  # a GPU category, no row: unknown, not zero
    assert instance_types.gpus("m6i.2xlarge") == 0
