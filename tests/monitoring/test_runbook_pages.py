"""Every alert a stack deploys (its planned PrometheusRules) has a runbook page an on-call engineer can act
on: what it means, commands to run (a ``bash`` block, with the alert's labels as ``<label>`` placeholders),
the dashboard by its title or the alert's own expression, how to resolve and verify, and the way to the
private cluster. Every ``aiplat`` command the runbooks show parses with the real command line."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from infra.cli.main import parser
from tests.conftest import STACKS

REPO = Path(__file__).resolve().parents[2]
RUNBOOKS = REPO / "docs" / "runbooks"
REACH = REPO / "docs" / "how-to" / "reach-the-cluster.md"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
DASHBOARDS = {
    json.loads(p.read_text())["title"] for p in (REPO / "infra" / "monitoring" / "dashboards").glob("*.json")
}
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)


def blocks(text: str, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def commands(text: str) -> list[str]:
    """The command lines of a page's ``bash`` blocks (comments and continuation lines joined)."""
    out = []
    for body in blocks(text, "bash"):
        joined = re.sub(r"\\\n\s*", " ", body)
        lines = [line.strip() for line in joined.splitlines()]
        out += [line for line in lines if line and not line.startswith("#")]
    return out


def planned_alerts(plan) -> dict[str, dict]:
    alerts = {}
    for obj in plan.by_type(RULE):
        for group in obj.inputs["spec"]["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    alerts[rule["alert"]] = rule
    return alerts


@pytest.mark.parametrize("stack", STACKS)
def test_every_planned_alert_has_an_actionable_page(plan_stack, stack: str) -> None:
    alerts = planned_alerts(plan_stack(stack))
    assert alerts
    for name, rule in alerts.items():
        text = (RUNBOOKS / f"{name}.md").read_text()
        sections = ("**What it means.**", "## Look", "## Resolve", "## Verify")
        assert [s for s in sections if s not in text] == [], name
        lines = commands(text)
        assert lines, f"{name}: no command (a ```bash block)"
        assert "](../how-to/reach-the-cluster.md)" in text, f"{name}: no link to Reach the cluster"
        named = any(f"**{title}**" in text for title in DASHBOARDS)
        queries = [q.strip() for q in blocks(text, "promql")]
        assert named or queries, f"{name}: neither a dashboard title nor a query"
        assert rule["expr"].strip() in queries, f"{name}: the page's query is not the alert's expression"
        labels = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule["annotations"])))
        assert any(f"<{label}>" in line for label in labels for line in lines), (
            f"{name}: no command uses one of its labels {sorted(labels)} as <label>"
        )


def test_every_aiplat_command_in_the_runbooks_parses() -> None:
    """Only commands and flags that exist: each ``aiplat`` line goes through the CLI's own parser, the
    placeholders filled with a value of any type (``1``)."""
    pages = [*RUNBOOKS.glob("*.md"), REACH]
    seen = 0
    for page in pages:
        for line in commands(page.read_text()):
            if not line.startswith("aiplat "):
                continue
            argv = shlex.split(re.sub(r"<[^>]+>", "1", line.split(" | ")[0].split("  #")[0]))
            try:
                parser().parse_args(argv[1:])
            except SystemExit as e:
                pytest.fail(f"{page.name}: `{line}` does not parse (exit {e.code})")
            seen += 1
    assert seen >= 10
