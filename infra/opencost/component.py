"""OpenCost: the node prices ConfigMap, the cost model (pinned chart, its ServiceMonitor and default prices
ConfigMap come from the chart) and the per-team cost dashboard (a ConfigMap the Grafana sidecar loads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.monitoring import documents as mon
from infra.opencost import documents as oc
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class OpenCostArgs:
    """The chart (pinned) and its values, the namespace (monitoring's), the CSV of node prices and the cost
    dashboard's JSON text."""

    namespace: str
    chart: ChartRef
    values: Mapping[str, Any]
    node_prices_csv: str
    dashboard: str


class OpenCost(pulumi.ComponentResource):
    """OpenCost's cost model reading the stack's Prometheus, scraped by it, priced from the price table."""

    def __init__(self, name: str, args: OpenCostArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:opencost:OpenCost", name, None, opts)

        def meta(obj: str, labels: Mapping[str, str] | None = None, **kw: Any) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=obj, namespace=args.namespace, labels={**PART_OF, **(labels or {})}, **kw
            )

        self.node_prices = k8s.core.v1.ConfigMap(
            f"{name}-node-prices",
            metadata=meta(oc.NODE_PRICES_CONFIGMAP),
            data={oc.NODE_PRICES_KEY: args.node_prices_csv},
            opts=child_options(self, opts),
        )
        # the Deployment mounts the prices: the ConfigMap first, or the pod waits for its volume
        self.release = chart_release(
            f"{name}-release",
            release_name=oc.RELEASE,
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts, depends_on=[self.node_prices]),
        )
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard-cost",
            metadata=meta(
                "aiplat-dashboard-cost",
                {mon.DASHBOARD_LABEL[0]: mon.DASHBOARD_LABEL[1]},
                annotations={mon.DASHBOARD_FOLDER_ANNOTATION: mon.DASHBOARD_FOLDER},
            ),
            data={"aiplat-cost.json": args.dashboard},
            opts=child_options(self, opts),
        )
        self.register_outputs({})
