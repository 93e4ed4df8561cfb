"""Config of cost allocation (``opencost`` of the stack file): OpenCost on train stacks, reading the stack's
Prometheus and pricing every node from the price table of ``aiplat cost`` (docs/platform/cost.md)."""

from __future__ import annotations

from pydantic import Field

from infra.core.charts import ChartPin
from infra.core.config import Strict


class OpenCostChart(ChartPin):
    """OpenCost (CNCF), its cost model only (no UI, no MCP server): opencost/opencost-helm-chart
    ``charts/opencost``."""

    repo: str = Field(
        "https://opencost.github.io/opencost-helm-chart",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("opencost", description="Chart name.")
    version: str = Field(
        "2.5.17",
        description="Default: opencost/opencost-helm-chart charts/opencost/Chart.yaml 2.5.17 (tag "
        "opencost-2.5.17, commit 725bb93, 2026-04-28; appVersion 1.120.1, image "
        "ghcr.io/opencost/opencost:1.120.1), the newest release read on 2026-12-06.",
    )


class OpenCostConfig(Strict):
    """Cost allocation by OpenCost (docs/platform/cost.md): on train stacks with monitoring; an infer stack
    installs no OpenCost (its cost is its endpoint's pools, ``aiplat cost``)."""

    enabled: bool = Field(
        True,
        description="Run OpenCost on a train stack (needs monitoring.enabled: rule "
        "opencost-needs-monitoring).",
    )
    chart: OpenCostChart = Field(default_factory=lambda: OpenCostChart())
