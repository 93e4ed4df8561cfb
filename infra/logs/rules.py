"""Rules on container log collection (``logs``): what would deploy but leave lost logs unnoticed."""

from __future__ import annotations

from collections.abc import Iterator

from infra.stack.registry import Finding, RuleContext, at, error, rule

LOGS_DOC = "docs/platform/logs.md"


@rule("logs-need-monitoring")
def logs_need_monitoring(ctx: RuleContext) -> Iterator[Finding]:
    """The collector is watched: its down and dropping alerts, Grafana's log queries need monitoring."""
    cfg = ctx.cfg
    if cfg.logs.enabled and not cfg.monitoring.enabled:
        yield error(
            at("logs", "enabled"),
            "logs.enabled is true but monitoring.enabled is false: nothing would alert when the collector "
            "is down or drops records, and Grafana (the run dashboard) would not exist",
            "set monitoring.enabled: true, or logs.enabled: false",
            LOGS_DOC,
        )
