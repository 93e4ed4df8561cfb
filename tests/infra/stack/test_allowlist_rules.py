"""Plan-time warnings from the policy pack's allowlists (infra/stack/allowlists.py): a region, replication
target or pool instance type the review would refuse is said once, on the config field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.core.errors import ReviewInputError
from infra.io.policypack import stack_allowlists
from infra.io.regions import known_regions
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config


def _warnings(stack: str, raw: dict, rule: str, stacks_dir: Path | None = None) -> list[str]:
    """The rule's warnings with the allowlists a review of ``stack`` applies (its pack config file)."""
    ctx = RuleContext(
        parse_platform_config(raw),
        stack=stack,
        regions=known_regions(),
        allowlists=stack_allowlists(stack, stacks_dir),
    )
    found = [f for f in run_rules(Phase.plan, ctx) if f.rule == rule]
    assert all(f.level is Level.warning for f in found)
    return [f.one_line() for f in found]


def test_shipped_stacks_are_inside_the_allowlists(stack_config) -> None:
    for stack in ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        for rule in ("region-in-pack-allowlist", "instance-type-in-pack-allowlist"):
            assert _warnings(stack, stack_config(stack), rule) == []


def test_a_region_outside_the_allowlist_is_warned(stack_config) -> None:
    raw = stack_config("prod-us-train")
    raw["region"] = "eu-central-1"
    raw["storage"]["replicate_to"] = ["ap-east-1", "eu-west-2"]
    assert _warnings("prod-eu-train", raw, "region-in-pack-allowlist") == [
        "aiplat:platform.region: eu-central-1 is outside the regions the policy pack allows for train stacks "
        "(us-east-1, us-west-2, eu-west-1, ap-east-1, ap-southeast-1): aiplat review refuses every resource "
        "of the stack (data-residency-regions); fix: use one of us-east-1, us-west-2, eu-west-1, ap-east-1, "
        "ap-southeast-1, or allow eu-central-1 in the pack config "
        "(data-residency-regions.allowedRegions.train, see docs/policy-pack.md#allowlists)",
        "aiplat:platform.storage.replicate_to.1: eu-west-2 is not a replication region the policy pack "
        "allows (ap-east-1, ap-southeast-1): aiplat review refuses the replication "
        "(data-residency-replication); fix: replicate to one of those, or allow eu-west-2 in the pack config "
        "(data-residency-replication.replicationRegions, see docs/policy-pack.md#allowlists)",
    ]


def test_a_pool_type_outside_the_stacks_allowlist_is_warned(stack_config) -> None:
    raw = stack_config("dev-us-train")
    raw["node_pools"]["system"]["instance_type"] = "r6i.large"
    [line] = _warnings("dev-us-train", raw, "instance-type-in-pack-allowlist")
    assert line.startswith(
        "aiplat:platform.node_pools.system.instance_type: r6i.large is not an instance type the policy pack "
        "allows in stack dev-us-train (m6i.*, g4dn.*, g5.*, g6.*): aiplat review refuses its node group "
        "(instance-type-allowlist)"
    )


def _pack_config(tmp_path: Path, stack: str, doc: object) -> Path:
    (tmp_path / "policy-pack").mkdir()
    (tmp_path / "policy-pack" / f"{stack}.json").write_text(json.dumps(doc))
    return tmp_path


def test_the_stacks_pack_config_file_is_the_allowlist_the_plan_warns_from(tmp_path, stack_config) -> None:
    stacks_dir = _pack_config(
        tmp_path, "dev-us-train", {"instance-type-allowlist": {"allowedInstanceTypes": ["m6i.*"]}}
    )
    raw = stack_config("dev-us-train")
    gpu = [n for n, p in raw["node_pools"].items() if not p["instance_type"].startswith("m6i.")]
    lines = _warnings("dev-us-train", raw, "instance-type-in-pack-allowlist", stacks_dir)
    assert gpu and len(lines) == len(gpu)
    assert all("allows in stack dev-us-train (m6i.*)" in line for line in lines)


def test_a_pack_config_value_of_the_wrong_shape_is_one_line(tmp_path) -> None:
    stacks_dir = _pack_config(
        tmp_path, "dev-us-train", {"instance-type-allowlist": {"allowedInstanceTypes": "g5.*"}}
    )
    with pytest.raises(ReviewInputError) as exc:
        stack_allowlists("dev-us-train", stacks_dir)
    assert str(exc.value).endswith(
        "dev-us-train.json: instance-type-allowlist.allowedInstanceTypes is 'g5.*'; fix: give a list of "
        "instance-type patterns (docs/policy-pack.md)"
    )
