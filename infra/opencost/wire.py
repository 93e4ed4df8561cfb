"""Wiring of cost allocation: config + the price table + the monitoring stack -> OpenCost on a train stack.

OpenCost runs in the monitoring namespace beside the Prometheus it reads and that scrapes it, under that
namespace's NetworkPolicies (``infra/core/namespaces.py``: traffic within the namespace, DNS, HTTPS and the
VPC for the Kubernetes API), so it needs no policy of its own; and it needs no AWS API: prices come from the
CSV we write, so it gets no IAM role.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.cost.estimate import PriceTable
from infra.mirror.wire import cached_chart
from infra.monitoring import documents as mon
from infra.monitoring.wire import MonitoringWiring
from infra.opencost import documents as oc
from infra.opencost.component import OpenCost, OpenCostArgs
from infra.opencost.rules import COST_DOC, installs_opencost
from infra.pools.documents.nodes import pool_affinity
from infra.services.wire import ClusterServicesWiring, system_pools
from infra.stack.registry import Finding, at, warning

DASHBOARD = "cost"  # infra/monitoring/dashboards/cost.json


@dataclass
class OpenCostWiring:
    """What the wiring created, and its warnings (a pool the price table does not price)."""

    opencost: OpenCost
    findings: list[Finding]


def wire_opencost(
    ctx: StackContext,
    cluster: ClusterWiring,
    services: ClusterServicesWiring | None,
    monitoring: MonitoringWiring | None,
    *,
    prices: PriceTable,
    dashboard: str,
) -> OpenCostWiring | None:
    """OpenCost and the cost dashboard (after the monitoring stack's CRDs: its ServiceMonitor); None where
    the stack installs none (``installs_opencost``). ``dashboard``: the cost dashboard's JSON text. Its
    findings warn of each pool OpenCost would price at its default rates, not the table's."""
    cfg = ctx.cfg
    if not installs_opencost(cfg) or services is None or monitoring is None:
        return None
    namespace = cfg.cluster_services.monitoring_namespace
    system = system_pools(ctx)
    node_prices = oc.node_prices(cfg, prices, ctx.facts)
    defaults = oc.default_prices(cfg, prices, ctx.facts, node_prices, system)
    values = oc.opencost_values(
        oc.OpenCostValues(
            cluster_id=ctx.names.cluster,
            prometheus_service=mon.PROMETHEUS_SERVICE,
            prometheus_namespace=namespace,
            prometheus_port=mon.PROMETHEUS_PORT,
            monitor_labels=mon.SELECT,
            affinity=pool_affinity(system),
            defaults=defaults,
        )
    )
    opts = pulumi.ResourceOptions(
        provider=cluster.cluster.k8s_provider, depends_on=[*services.after_ready, monitoring.stack.crds]
    )
    pin = cfg.opencost.chart
    opencost = OpenCost(
        "opencost",
        OpenCostArgs(
            namespace=namespace,
            chart=cached_chart(ctx, pin),
            values=values,
            node_prices_csv=oc.node_prices_csv(node_prices, table_read=prices.read),
            dashboard=dashboard,
        ),
        opts=opts,
    )
    ctx.export(
        "opencost",
        {
            "namespace": namespace,
            "chart": {pin.chart: pin.version},
            "api": f"kubectl -n {namespace} port-forward svc/{oc.RELEASE} {oc.API_PORT}",
            "dashboard": DASHBOARD,
            "nodePrices": [
                {
                    "pool": r.pool,
                    "instanceType": r.instance_type,
                    "option": r.option.value,
                    "usdPerHour": r.usd,
                    "source": r.source,
                    **({"note": r.note} if r.note else {}),
                }
                for r in node_prices.rows
            ],
            "unpriced": [f"{field}: {why}" for field, why in node_prices.unpriced],
            "defaultPriceSources": dict(defaults.sources),
        },
    )
    findings = [
        warning(
            at(*field.split(".")),
            f"OpenCost prices these nodes at its default rates, not at what the stack pays: {why}",
            "record the price in infra/cost/data/prices.yaml (aiplat prices refresh), or give the pools "
            "distinct instance types",
            COST_DOC,
        )
        for field, why in node_prices.unpriced
    ]
    return OpenCostWiring(opencost=opencost, findings=findings)
