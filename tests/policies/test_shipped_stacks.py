"""The shipped stacks and the examples under the real pack: the mandatory violations are exactly the ones
another stream is fixing today (EXPECTED). When a fix lands, its entry must go: the comparison is exact, so
the list can only shrink to empty, never hide a new violation. A component change that breaks a rule
fails here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from infra.io.stackfiles import list_stacks
from infra.plan.runner import run_plan
from infra.review import StackReview, review_configured_plan, review_plan
from tests.conftest import STACKS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EVERY = (*STACKS, *list_stacks(EXAMPLES))
PROD = {"prod-us-train", "prod-hk-infer", "prod-sg-infer", "capacity-block", "odcr"}

# rule -> (why it fails today and which stream fixes it, the stacks it fails on)
EXPECTED: dict[str, tuple[str, set[str]]] = {
    # (empty: every shipped stack and example passes every mandatory rule)
}


@pytest.fixture(scope="module")
def plans(plan_stack) -> dict[str, dict[str, Any]]:
    out = {stack: plan_stack(stack).as_json() for stack in STACKS}
    for stack in list_stacks(EXAMPLES):
        out[stack] = run_plan(stack, stacks_dir=EXAMPLES).as_json()
    return out


@pytest.fixture(scope="module")
def reviews(plans) -> dict[str, StackReview]:
    # an example's pack config file is beside it (examples/policy-pack/<stack>.json), as
    # `aiplat review --stacks-dir examples` reads it
    return {
        stack: review_configured_plan(plan, stacks_dir=None if stack in STACKS else EXAMPLES)
        for stack, plan in plans.items()
    }


def test_every_shipped_stack_and_example_is_reviewed(reviews) -> None:
    assert set(reviews) == set(EVERY)
    assert {"dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer", "minio", "odcr"} <= set(
        reviews
    )


def test_mandatory_violations_are_exactly_the_expected_ones(reviews) -> None:
    found = {(stack, d.policy) for stack, r in reviews.items() for d in r.mandatory}
    expected = {(stack, policy) for policy, (_, stacks) in EXPECTED.items() for stack in stacks}
    fixed = sorted(expected - found)
    new = sorted(found - expected)
    assert not new, f"new mandatory violations: {new}"
    assert not fixed, f"fixed upstream, remove from EXPECTED: {fixed}"


def test_no_policy_errors_or_unexpected_advisories(reviews) -> None:
    """No rule degrades to the SDK's "can't run policy" advisory; the only advisory allowed is the
    confused-deputy finding on the flow-logs trust."""
    for stack, r in reviews.items():
        assert not any("can't run policy" in d.message for d in r.diagnostics), stack
        assert {d.policy for d in r.advisory} <= {"iam-trust-confused-deputy"}, (stack, r.advisory)


def _without_placement(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan without placement groups, and launch templates without placement or reservation."""
    doc = copy.deepcopy(plan)
    doc["resources"] = [r for r in doc["resources"] if r["type"] != "aws:ec2/placementGroup:PlacementGroup"]
    for r in doc["resources"]:
        if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate":
            r["inputs"].pop("placement", None)
            r["inputs"].pop("capacityReservationSpecification", None)
    return doc


@pytest.mark.parametrize("stack", ["prod-us-train", "capacity-block", "odcr"])
def test_training_stacks_pass_the_training_pool_rules(plans, reviews, stack) -> None:
    """The p5/p4d pools are training pools and satisfy every training-pool rule (a regression in the
    node pool component shows up here). That they are training pools is checked too (the rules would pass
    a plan where they found none): without its placement, the pool is refused by name."""
    rules = {
        "training-pool-single-zone",
        "training-pool-placement",
        "training-pool-efa-interfaces",
        "training-pool-efa-security-group",
    }
    assert not [d for d in reviews[stack].diagnostics if d.policy in rules]
    unplaced = review_configured_plan(_without_placement(plans[stack]))
    refused = [d.resource for d in unplaced.mandatory if d.policy == "training-pool-placement"]
    assert refused == ["NodeGroup pool-train-ng"]


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_gpu_budget_counts_the_karpenter_nodepool_of_the_infer_stacks(plan_stack, stack) -> None:
    """The infer stacks' only GPUs are their Karpenter NodePool's: the budget rule counts its
    nvidia.com/gpu limit from the planned NodePool, within the default budget and over a tighter one."""
    plan = plan_stack(stack).as_json()
    limit = plan["config"]["cluster_services"]["karpenter"]["node_pools"]["gpu"]["gpu_limit"]
    assert not [d for d in review_configured_plan(plan).diagnostics if d.policy == "gpu-budget"]
    tight = review_plan(plan, pack_config={"gpu-budget": {"maxGpus": limit - 1}})
    [message] = [d.message for d in tight.diagnostics if d.policy == "gpu-budget"]
    assert f"stack '{stack}' can run {limit} GPUs (karpenter-nodepool-gpu limit {limit}), " in message
    assert f"over its budget of {limit - 1}" in message
    # the fix names the file a new stack needs (docs/how-to/add-stack.md)
    assert f"raise gpu-budget.maxGpus in the stack's pack config (stacks/policy-pack/{stack}.json)" in message
