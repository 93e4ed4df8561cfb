"""Rules on cost allocation (``opencost``): what would deploy but price nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.core.config import KubernetesAccess, Role
from infra.stack.registry import Finding, RuleContext, at, error, rule

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

COST_DOC = "docs/platform/cost.md"


def installs_opencost(cfg: PlatformConfig) -> bool:
    """Whether the stack runs OpenCost: a train stack with ``opencost.enabled``, monitoring on and the
    Kubernetes side declared (the wiring's condition, one place)."""
    return (
        cfg.role is Role.train
        and cfg.opencost.enabled
        and cfg.monitoring.enabled
        and cfg.cluster_services.kubernetes_access is not KubernetesAccess.skip
    )


@rule("opencost-needs-monitoring")
def opencost_needs_monitoring(ctx: RuleContext) -> Iterator[Finding]:
    """OpenCost reads every allocation from Prometheus and is read through Grafana: a train stack that asks
    for it needs the monitoring stack."""
    cfg = ctx.cfg
    if cfg.role is Role.train and cfg.opencost.enabled and not cfg.monitoring.enabled:
        yield error(
            at("opencost", "enabled"),
            "opencost.enabled is true but monitoring.enabled is false: OpenCost reads the pods' requests and "
            "usage from Prometheus and its cost series are read through Grafana; neither would exist",
            "set monitoring.enabled: true, or opencost.enabled: false",
            COST_DOC,
        )
