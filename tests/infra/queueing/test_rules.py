"""The queueing rules, each refusing (or warning about) its own case with the field and the fix."""

from __future__ import annotations

import pytest

from infra.rules import Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config
from infra.stack.allowlists import PackAllowlists
from tests.conftest import with_value


@pytest.fixture
def prod(stack_config) -> dict:
    return stack_config("prod-us-train")


def findings(raw: dict, rule: str, *, max_gpus: float = 32) -> list[str]:
    """The findings of ``rule`` on ``raw``, with the AWS facts of the offline snapshot (as the plan has)."""
    from infra.io.snapshot import region_facts

    cfg = parse_platform_config(raw)
    ctx = RuleContext(cfg, stack="t", facts=region_facts(cfg), allowlists=PackAllowlists(max_gpus=max_gpus))
    # without the note on the AWS data a refusal on facts carries ("[data: ...]")
    return [
        f"{f.level.value}: {f.one_line().split(' [data: ')[0]}"
        for f in run_rules(Phase.plan, ctx)
        if f.rule == rule
    ]


def test_shipped_stacks_pass_the_queueing_rules(stack_config) -> None:
    from infra.io.policypack import stack_allowlists
    from infra.io.snapshot import region_facts

    for stack in ("prod-us-train", "dev-us-train"):
        cfg = parse_platform_config(stack_config(stack))
        ctx = RuleContext(cfg, stack=stack, facts=region_facts(cfg), allowlists=stack_allowlists(stack))
        found = [f.one_line() for f in run_rules(Phase.plan, ctx) if f.rule.startswith("team")]
        assert found == [], found


def test_quota_above_what_the_pool_holds(prod: dict) -> None:
    # train: p5.48xlarge, max_size 4 -> 32 GPUs
    got = findings(
        with_value(prod, "teams.research.quotas.train.gpus", 40), "team-quota-fits-pool", max_gpus=99
    )
    assert got == [
        "error: aiplat:platform.teams.research.quotas.train.gpus: 40 GPUs, but node pool 'train' holds "
        "at most 32 (max_size 4 x 8 GPUs of p5.48xlarge); fix: lower it to at most 32, or raise the pool's "
        "size (see docs/platform/queueing.md)"
    ]


def test_quota_for_a_pool_that_does_not_exist(prod: dict) -> None:
    got = findings(with_value(prod, "teams.research.quotas.h100", {"gpus": 8}), "team-quota-pool-exists")
    assert len(got) == 1
    assert got[0].startswith("error: aiplat:platform.teams.research.quotas.h100: 'h100' is not a GPU pool")
    assert "use one of ['train']" in got[0]


def test_quota_on_a_cpu_pool_is_refused(prod: dict) -> None:
    got = findings(with_value(prod, "teams.research.quotas.system", {"gpus": 0}), "team-quota-pool-exists")
    assert len(got) == 1 and "(a CPU pool: quotas are on GPU pools)" in got[0]


def test_quotas_above_the_pack_gpu_budget(prod: dict) -> None:
    prod = with_value(prod, "teams.production.quotas.train.gpus", 24)  # 24 + 8
    got = findings(prod, "team-quotas-within-gpu-budget", max_gpus=16)
    assert len(got) == 1
    assert got[0].startswith("error: aiplat:platform.teams: the teams' nominal GPUs add up to 32")
    assert "above the stack's GPU budget of 16 (policy pack gpu-budget.maxGpus)" in got[0]
    assert "raise gpu-budget.maxGpus in the stack's pack config" in got[0]
    assert findings(prod, "team-quotas-within-gpu-budget", max_gpus=32) == []


def test_the_budget_comes_from_the_stack_pack_config() -> None:
    from infra.io.policypack import stack_allowlists

    assert stack_allowlists("prod-us-train").max_gpus == 32  # stacks/policy-pack/prod-us-train.json
    assert PackAllowlists.from_pack_config({}).max_gpus is None  # none set: the pack's default applies


def test_without_a_budget_in_the_pack_config_the_default_warns(prod: dict) -> None:
    cfg = parse_platform_config(with_value(prod, "teams.production.quotas.train.gpus", 24))  # 24 + 8
    ctx = RuleContext(cfg, stack="t", allowlists=PackAllowlists())
    got = [f for f in run_rules(Phase.plan, ctx) if f.rule == "team-quotas-within-gpu-budget"]
    assert [f.level.value for f in got] == ["warning"]
    assert "above the policy pack's default GPU budget of 16" in got[0].one_line()


def test_quotas_that_together_overfill_the_nodes_are_refused(prod: dict) -> None:
    """prod's train pool runs desired_size 2 p5.48xlarge (16 GPUs): quotas of 24 + 8 would have Kueue admit
    work onto nodes that are not there."""
    got = findings(
        with_value(prod, "teams.production.quotas.train.gpus", 24), "team-quotas-fit-pool-together"
    )
    assert got == [
        "error: aiplat:platform.teams: the teams' nominal GPUs on 'train' add up to 32 ({'production': 24, "
        "'research': 8}), above the 16 its node pool holds (desired_size 2 x 8 GPUs of p5.48xlarge): Kueue "
        "would admit guaranteed quota onto nodes that are not there; fix: lower the quotas to 16 in all (let "
        "teams borrow the rest with borrowing_limit), or raise node_pools.train.desired_size to 4 (max_size "
        "at least that) (see docs/platform/queueing.md)"
    ]


def test_a_quota_above_a_single_node_pool_is_refused(stack_config) -> None:
    """dev's gpu pool runs one g5.xlarge (1 GPU): a quota of 2 is one GPU that never exists."""
    got = findings(
        with_value(stack_config("dev-us-train"), "teams.ml.quotas.gpu.gpus", 2),
        "team-quotas-fit-pool-together",
    )
    assert len(got) == 1
    assert (
        "add up to 2 ({'ml': 2}), above the 1 its node pool holds (desired_size 1 x 1 GPUs of g5.xlarge)"
        in got[0]
    )
    assert "raise node_pools.gpu.desired_size to 2" in got[0]


def test_quota_of_part_of_a_node_warns(prod: dict) -> None:
    got = findings(with_value(prod, "teams.research.quotas.train.gpus", 4), "team-quota-whole-nodes")
    assert got == [
        "warning: aiplat:platform.teams.research.quotas.train.gpus: 4 GPUs is not a whole number of 'train' "
        "nodes (8 GPUs each); a training worker takes a whole node; fix: use a multiple of 8, e.g. 8 "
        "(see docs/platform/queueing.md)"
    ]


def test_run_of_a_team_without_quota_on_the_runtime_pool(stack_config) -> None:
    dev = stack_config("dev-us-train")
    raw = with_value(dev, "teams.ml.quotas", {"spot-gpu": {"gpus": 2}})
    got = findings(raw, "team-run-has-quota", max_gpus=8)
    assert len(got) == 1
    assert got[0].startswith(
        "error: aiplat:platform.training.runs.gpt2-dev.team: team 'ml' has no quota on 'gpu'"
    )


def test_karpenter_pool_capacity_is_its_gpu_limit(stack_config) -> None:
    dev = stack_config("dev-us-train")
    raw = with_value(dev, "teams.ml.quotas.spot-gpu", {"gpus": 5})  # gpu_limit 4
    got = findings(raw, "team-quota-fits-pool", max_gpus=99)
    assert got == [
        "error: aiplat:platform.teams.ml.quotas.spot-gpu.gpus: 5 GPUs, but Karpenter NodePool 'spot-gpu' "
        "holds at most 4 (gpu_limit 4); fix: lower it to at most 4, or raise the pool's size "
        "(see docs/platform/queueing.md)"
    ]


def test_teams_and_fsx_do_not_mix(prod: dict) -> None:
    raw = with_value(prod, "cluster_services.fsx", {"enabled": True, "storage_capacity_gib": 1200})
    got = findings(raw, "teams-without-fsx")
    assert len(got) == 1 and got[0].startswith("error: aiplat:platform.cluster_services.fsx.enabled: FSx")


def test_every_queueing_rule_is_registered() -> None:
    from infra.rules import registered

    rules = registered()
    assert {n for n in rules if n.startswith("team")} == {
        "team-quota-pool-exists",
        "team-quota-fits-pool",
        "team-quota-whole-nodes",
        "team-quotas-fit-pool-together",
        "team-quotas-within-gpu-budget",
        "team-run-has-quota",
        "teams-without-fsx",
        "team-access-through-members",
        "team-members-one-entry",
    }
