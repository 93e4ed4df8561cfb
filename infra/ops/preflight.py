"""``aiplat preflight``: will ``pulumi up`` work in this account? Read-only checks before any change.

Gathers the live facts of each stack's region (``infra/io/aws_live.py``, boto3), runs every rule registered
for the preflight phase on them (``infra/preflight/rules.py``, and the plan rules that ask the same
question: offerings by zone ID, EFA), and turns the findings into rows: ``pass`` (with what was seen),
``warn``, ``fail`` (with the fix) or ``skip`` (with why: a denied call, or inputs that were not read; a
check that did not run is never a pass). Once per run, the state backend and the secrets
provider of ``rollout.yaml`` are checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from infra.core.facts import LiveFacts, RegionFacts, Unreadable
from infra.io.aws_live import (
    Clients,
    Probe,
    gather_live_facts,
    probe_tcp,
    read_backend,
    read_secrets_provider,
)
from infra.io.regions import known_regions
from infra.mirror.rules import copied_images
from infra.preflight.rules import backend_findings, secrets_findings
from infra.rules import Finding, Level, Phase, RuleContext
from infra.schema.platform import PlatformConfig
from infra.stack.registry import applicable, check_rule, registered
from infra.stack.rollout import RolloutConfig

PROJECT = "project"


class Status(StrEnum):
    passed = "pass"
    warn = "warn"
    fail = "fail"
    skip = "skip"


_STATUS = {
    Level.info: Status.passed,
    Level.warning: Status.warn,
    Level.error: Status.fail,
    Level.skipped: Status.skip,
}


@dataclass(frozen=True)
class CheckRow:
    """One line of the preflight table."""

    scope: str  # the stack, or 'project'
    check: str  # the rule's name
    status: Status
    field: str
    detail: str
    fix: str | None = None
    doc: str | None = None


@dataclass
class PreflightReport:
    rows: list[CheckRow]

    @property
    def failed(self) -> bool:
        return any(r.status is Status.fail for r in self.rows)

    def count(self, status: Status) -> int:
        return sum(r.status is status for r in self.rows)


def _row(scope: str, finding: Finding, check: str) -> CheckRow:
    return CheckRow(
        scope, check, _STATUS[finding.level], finding.field, finding.problem, finding.fix, finding.doc
    )


def _why_skipped(live: LiveFacts, facts: RegionFacts | Unreadable | None) -> str:
    """Why a rule whose inputs preflight could not read did not run."""
    if not live.credentials_work:
        return "not run: the AWS credentials do not work (credentials-work)"
    if not live.region_usable:
        return f"not run: {live.region} does not answer for these credentials"
    if isinstance(facts, Unreadable):
        return f"not run: zones and instance types could not be read ({facts})"
    return "not run: its inputs were not read"


def preflight_stack(
    stack: str, cfg: PlatformConfig, clients: Clients, *, probe: Probe = probe_tcp
) -> list[CheckRow]:
    """Every preflight check of one stack, as table rows."""
    live, facts = gather_live_facts(cfg, clients, probe=probe, copied=copied_images(cfg))
    ctx = RuleContext(
        cfg,
        stack=stack,
        facts=facts if isinstance(facts, RegionFacts) else None,
        regions=known_regions(),
        live=live,
    )
    rows: list[CheckRow] = []
    ran = applicable(Phase.preflight, ctx)
    for r in ran:
        findings = check_rule(r, ctx)
        if not findings and Phase.plan in r.phases:
            # a plan rule asked the live facts its question and found nothing wrong
            rows.append(CheckRow(stack, r.name, Status.passed, "", r.description.replace("``", "")))
        elif not findings:
            # a preflight check passes with what it saw (an info finding); saying nothing means it had
            # nothing of this stack to look at
            why = f"nothing on this stack to check ({r.description.replace('``', '')})"
            rows.append(CheckRow(stack, r.name, Status.skip, "", why))
        rows.extend(_row(stack, f, r.name) for f in findings)
    # a check whose inputs were not read is a skip row of its own, with the reason: never a pass
    why = _why_skipped(live, facts)
    rows.extend(
        CheckRow(stack, r.name, Status.skip, "", why)
        for r in registered().values()
        if Phase.preflight in r.phases and r not in ran
    )
    return rows


def preflight_project(rollout: RolloutConfig, clients: Clients) -> list[CheckRow]:
    """The shared state backend and secrets provider."""
    found = backend_findings(read_backend(rollout.backend_url, clients))
    found += secrets_findings(read_secrets_provider(rollout.secrets_provider, clients))
    names = ["state-backend", "secrets-provider"]
    return [_row(PROJECT, f, name) for f, name in zip(found, names, strict=True)]


def preflight(
    stacks: Iterable[tuple[str, PlatformConfig]],
    clients: Clients,
    *,
    rollout: RolloutConfig | None,
    probe: Probe = probe_tcp,
    on_stack: Callable[[str], None] = lambda stack: None,
) -> PreflightReport:
    """Project checks (when ``rollout`` is given), then each stack's; ``on_stack`` is told which starts."""
    rows = preflight_project(rollout, clients) if rollout is not None else []
    for stack, cfg in stacks:
        on_stack(stack)
        rows.extend(preflight_stack(stack, cfg, clients, probe=probe))
    return PreflightReport(rows)
