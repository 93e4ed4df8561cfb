"""The logs section's refusals and the rule on it, each with the message a user sees."""

from __future__ import annotations

import pytest

from infra.logs.config import LogsConfig
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.platform import PlatformConfig


def test_retention_must_be_a_cloudwatch_period() -> None:
    with pytest.raises(ValueError, match="45 is not a CloudWatch Logs retention period; use e.g. 30"):
        LogsConfig(retention_days=45)


def test_unknown_key_refused() -> None:
    with pytest.raises(ValueError, match="retention"):
        LogsConfig.model_validate({"retention": 30})


def findings(cfg: PlatformConfig) -> list:
    """The logs section's findings but the image cache's warning on the Fluent Bit chart (its images are
    not from our ECR by digest: tests/infra/mirror)."""
    return [
        f
        for f in run_rules(Phase.plan, RuleContext(cfg))
        if f.field.startswith("aiplat:platform.logs") and f.rule != "chart-images-pinned"
    ]


def test_logs_without_monitoring_refused(stack_config) -> None:
    raw = stack_config("prod-us-train")
    ok = PlatformConfig.model_validate(raw)
    assert findings(ok) == []
    # Fluent Bit's images (cr.fluentbit.io, ghcr.io) are not pinned: the plan warns on the chart
    assert [f.field for f in run_rules(Phase.plan, RuleContext(ok)) if f.rule == "chart-images-pinned"].count(
        "aiplat:platform.logs.fluent_bit"
    ) == 1
    # without monitoring a team budget is refused (tests/infra/monitoring/test_budget.py): none here
    for team in raw.get("teams", {}).values():
        team.pop("budget", None)
    off = PlatformConfig.model_validate(
        {**raw, "monitoring": {**raw.get("monitoring", {}), "enabled": False}}
    )
    (f,) = findings(off)
    assert f.level is Level.error and f.field == "aiplat:platform.logs.enabled"
    assert "nothing would alert when the collector is down or drops records" in f.problem
    assert f.fix == "set monitoring.enabled: true, or logs.enabled: false"
    # logs off too: nothing to say
    both_off = PlatformConfig.model_validate(
        {**raw, "monitoring": {"enabled": False}, "logs": {"enabled": False}}
    )
    assert findings(both_off) == []
