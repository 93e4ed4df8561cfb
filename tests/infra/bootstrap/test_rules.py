"""Prod placeholders: AWS's example account in security and the teams' role ARNs is refused on a prod stack,
warned on dev and on a stack file marked ``security.account.example``; and the manual steps name preflight
checks that exist."""

from __future__ import annotations

import pytest

from infra.bootstrap.rules import PLACEHOLDER_ACCOUNT, human_steps
from infra.rules import Level, Phase, RuleContext, registered, run_rules
from infra.schema.parse import parse_platform_config
from tests.conftest import DELETE, with_value

RULE = "no-placeholder-principals"


def _findings(raw: dict) -> list:
    return [f for f in run_rules(Phase.plan, RuleContext(parse_platform_config(raw))) if f.rule == RULE]


@pytest.mark.parametrize("stack", ["prod-us-train", "prod-hk-infer", "prod-sg-infer"])
def test_shipped_prod_stacks_are_examples_and_warn(stack_config, stack: str) -> None:
    (finding,) = _findings(stack_config(stack))
    assert finding.level is Level.warning
    assert "security.key_admin_principals.0 (arn:aws:iam::123456789012:role/aiplat-security-admins)" in (
        finding.problem
    )


def test_a_prod_stack_with_placeholders_not_marked_example_is_refused(stack_config) -> None:
    raw = with_value(stack_config("prod-us-train"), "security.account.example", DELETE)
    (finding,) = _findings(raw)
    assert finding.level is Level.error
    assert finding.one_line().startswith(
        f"aiplat:platform.security.account.id: names AWS's example account {PLACEHOLDER_ACCOUNT}: "
    )
    # the team role ARNs are named as well as the account and the key guards
    assert "aiplat:platform.teams.research.registry.ci_assumed_by.0" in finding.problem
    assert "aiplat:platform.teams.research.members.engineers" in finding.problem
    assert "docs/deploy.md step 7" in finding.one_line()


def test_a_real_account_must_drop_the_example_mark(stack_config) -> None:
    raw = with_value(stack_config("prod-us-train"), "security.account.id", "210987654321")
    mark, left = _findings(raw)
    assert mark.level is Level.warning and mark.field == "aiplat:platform.security.account.example"
    assert "remove `example: true`" in mark.one_line()
    assert left.level is Level.warning and "key_admin_principals" in left.problem
    (refused,) = _findings(with_value(raw, "security.account.example", DELETE))
    assert refused.level is Level.error


def test_a_prod_stack_with_real_principals_passes(stack_config) -> None:
    raw = stack_config("prod-hk-infer")
    real = "arn:aws:iam::210987654321:role/security-admins"
    raw = with_value(raw, "security.account.example", DELETE)
    raw = with_value(raw, "security.account.id", "210987654321")
    raw = with_value(raw, "security.key_admin_principals", [real])
    raw = with_value(raw, "security.break_glass_principals", [real])
    assert _findings(raw) == []


def test_dev_placeholders_warn(stack_config) -> None:
    raw = with_value(stack_config("dev-us-train"), "security.account.id", PLACEHOLDER_ACCOUNT)
    (finding,) = _findings(raw)
    assert finding.level is Level.warning


@pytest.mark.parametrize("stack", ["prod-us-train", "prod-hk-infer", "dev-us-train"])
def test_manual_steps_name_preflight_checks_that_exist(stack_config, stack: str) -> None:
    steps = human_steps(parse_platform_config(stack_config(stack)), stack=stack)
    preflight = {name for name, r in registered().items() if Phase.preflight in r.phases}
    for s in steps:
        assert s.check in preflight or (s.check == "" and "no preflight check" in s.verified_by), s
    checks = {s.check for s in steps}
    assert {"region-enabled", "vcpu-quotas"} <= checks
    if stack == "prod-hk-infer":
        assert "global-endpoint-dns" in checks
        assert any("pulumi config set --secret aiplat:alertmanager-" in s.how for s in steps)
