"""cost-cap: the pack estimates a stack's monthly cost at max size from its config with the cost model of
``aiplat cost`` and refuses a stack over its cap."""

from __future__ import annotations

import copy
import datetime as dt

import pytest
from aiplat_policies.cost import DEFAULT_MAX_MONTHLY_USD, usd

from infra.cost.estimate import Usage, estimate_stack
from infra.io.prices import load_price_table
from infra.io.snapshot import region_facts
from infra.review import review_configured_plan, review_plan
from infra.schema.parse import parse_platform_config
from tests.conftest import STACKS

RULE = "cost-cap"


def cost_messages(plan: dict, config: dict | None = None) -> list[str]:
    """cost-cap's messages with ``config`` as the rule's pack config, else with the stack's own file."""
    review = (
        review_plan(plan, pack_config={RULE: config}) if config is not None else review_configured_plan(plan)
    )
    return [d.message for d in review.diagnostics if d.policy == RULE]


def amount(message: str) -> float:
    return float(message.split("can cost $", 1)[1].split("/month", 1)[0].replace(",", ""))


@pytest.mark.parametrize("stack", STACKS)
def test_the_pack_prices_the_stack_as_aiplat_cost_does_at_max(plan_stack, stack) -> None:
    """The pack reads Karpenter's candidate types from the planned NodePool and their GPUs from the
    instance-type table; ``aiplat cost`` reads both from AWS's facts. At max size the two give the same
    amount, under the shipped cap, and a cap one dollar below it is refused with that amount."""
    plan = plan_stack(stack).as_json()
    cfg = parse_platform_config(plan["config"])
    expected = estimate_stack(
        stack, cfg, load_price_table(), Usage(on=dt.date.today()), region_facts(cfg)
    ).monthly("max")
    assert expected.usd > 0
    assert cost_messages(plan) == []  # the cap of its pack config file holds the shipped stack
    [message] = cost_messages(plan, {"maxMonthlyUsd": int(expected.usd) - 1})
    assert amount(message) == pytest.approx(round(expected.usd), abs=0.5)
    assert f"over its cap of ${int(expected.usd) - 1:,}" in message
    assert "fix: lower max_size / Karpenter gpu_limit" in message
    assert f"cost-cap.maxMonthlyUsd in the stack's pack config (stacks/policy-pack/{stack}.json)" in message
    for label in expected.unknown:  # what the table cannot price is named, not guessed
        assert label in message


def test_a_larger_pool_raises_the_estimate_by_its_nodes(plan_stack) -> None:
    """One more p5.48xlarge at max size on prod-us-train costs 730 h x its On-Demand price more."""
    plan = copy.deepcopy(plan_stack("prod-us-train").as_json())
    [pool] = [n for n, p in plan["config"]["node_pools"].items() if p["instance_type"] == "p5.48xlarge"]
    base = amount(cost_messages(plan, {"maxMonthlyUsd": 1})[0])
    plan["config"]["node_pools"][pool]["max_size"] += 1
    more = amount(cost_messages(plan, {"maxMonthlyUsd": 1})[0])
    table = load_price_table()
    price = table.instances["us-east-1"]["p5.48xlarge"].on_demand.usd
    assert more - base == pytest.approx(table.hours_per_month * price, abs=1)


def test_unpriced_items_are_a_violation_unless_the_stack_allows_them(plan_stack) -> None:
    plan = plan_stack("prod-hk-infer").as_json()  # ap-east-1: NAT, endpoint and ALB prices are missing
    assert cost_messages(plan) == []  # its pack config file says unpriced: ignore
    [message] = cost_messages(plan, {"maxMonthlyUsd": 90_000})  # the default: refused
    assert "but the estimate could not price" in message and "NAT gateway, ap-east-1" in message
    assert "fix: record instance prices with `aiplat prices refresh --region ap-east-1`" in message
    assert '{"cost-cap": {"unpriced": "ignore"}} in stacks/policy-pack/prod-hk-infer.json' in message
    assert cost_messages(plan, {"maxMonthlyUsd": 90_000, "unpriced": "ignore"}) == []


def test_a_region_without_prices_is_refused_not_passed_at_zero(plan_stack) -> None:
    """The issue's case: a stack in a region the price table lacks cost "$73+?" (the control plane only) and
    passed the cap with its pack config's unpriced: ignore."""
    plan = copy.deepcopy(plan_stack("dev-us-train").as_json())
    region = "eu-central-1"
    plan["config"]["region"] = region
    plan["config"]["network"]["availability_zones"] = [f"{region}a", f"{region}b"]
    plan["config"]["network"]["az_count"] = 2
    table = load_price_table()
    assert not table.prices_region(region)
    cost = estimate_stack(
        "dev-us-train", parse_platform_config(plan["config"]), table, Usage(dt.date.today())
    )
    assert not cost.region_priced and cost.monthly("max").unknown  # marked unknown, not $0
    assert any(f"`aiplat prices refresh --region {region}`" in note for note in cost.notes)

    own = {"maxMonthlyUsd": 8000, "unpriced": "ignore"}  # dev-us-train's pack config file
    for config in ({"maxMonthlyUsd": 8000}, own, {**own, "unpricedRegions": ["us-west-2"]}):
        [message] = cost_messages(plan, config)
        assert f"is in {region}, which the price table has no instance prices for" in message
        assert f"{usd(cost.monthly('max').usd)}/month at max size leaves out every node (" in message
        for pool in cost.pools:  # each node pool, named
            assert pool.prices[pool.configured].label in message
        assert f"fix: record the region's prices with `aiplat prices refresh --region {region}`" in message
        assert f'{{"cost-cap": {{"unpricedRegions": ["{region}"]}}}}' in message
    # accepted by name, the rest goes through the unpriced items' own acceptance
    assert cost_messages(plan, {**own, "unpricedRegions": [region]}) == []
    [message] = cost_messages(plan, {"maxMonthlyUsd": 8000, "unpricedRegions": [region]})
    assert "but the estimate could not price" in message


def test_a_stack_without_its_pack_config_gets_the_default_cap(plan_stack) -> None:
    """prod-us-train's four p5.48xlarge reach past the default cap: only its file's cap admits them."""
    plan = plan_stack("prod-us-train").as_json()
    assert cost_messages(plan) == []
    [message] = [d.message for d in review_plan(plan).diagnostics if d.policy == RULE]
    assert f"over its cap of ${DEFAULT_MAX_MONTHLY_USD:,}" in message


def test_a_config_that_does_not_validate_is_a_violation(plan_stack) -> None:
    plan = copy.deepcopy(plan_stack("dev-us-train").as_json())
    plan["config"]["node_pools"]["system"]["max_size"] = "many"
    [message] = cost_messages(plan)
    assert "its config does not validate, so its cost cannot be estimated" in message
    assert "node_pools.system.max_size" in message


def test_no_platform_config_is_a_violation(plan_stack) -> None:
    plan = copy.deepcopy(plan_stack("dev-us-train").as_json())
    plan["config"] = {}
    [message] = cost_messages(plan)
    assert "the pack was given no aiplat:platform config" in message
