"""OpenCost in the plans of the train stacks: the pinned chart from our ECR by digest, values within the
chart's, after the monitoring CRDs and its prices, scraped by Prometheus, no AWS resource, the cost
dashboard, every exported price with a source of the table; none on an infer stack."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infra.io.prices import load_price_table
from infra.mirror.documents import chart_pins
from infra.monitoring import documents as mon
from infra.opencost import documents as oc
from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan, RecordedResource
from tests.infra.opencost.test_documents import chart_values, csv_price, unknown_keys

REPO = Path(__file__).resolve().parents[3]
TRAIN = ["dev-us-train", "prod-us-train"]
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _release(plan: Plan) -> RecordedResource:
    (r,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == oc.RELEASE]
    return r


def _config_map(plan: Plan, name: str) -> RecordedResource:
    (r,) = [r for r in plan.by_type(CONFIG_MAP) if r.inputs["metadata"]["name"] == name]
    return r


@pytest.mark.parametrize("stack", TRAIN)
def test_the_pinned_chart_from_our_ecr_by_digest(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    pin = plan.config["opencost"]["chart"]
    inputs = _release(plan).inputs
    assert (inputs["chart"], inputs["version"], inputs["repositoryOpts"]["repo"]) == (
        pin["chart"],
        pin["version"],
        pin["repo"],
    )
    assert inputs["namespace"] == plan.config["cluster_services"]["monitoring_namespace"]
    image = inputs["values"]["opencost"]["exporter"]["image"]
    ref = f"{image['registry']}/{image['repository']}:{image['tag']}"
    registry = re.escape(f"{ACCOUNT_ID}.dkr.ecr.{plan.region}.amazonaws.com/")
    assert re.fullmatch(registry + r"[a-z0-9._/-]+:1\.120\.1@sha256:[a-f0-9]{64}", ref), ref
    (exporter,) = [
        p for p in chart_pins(pin["chart"], pin["version"]) if p.values == "opencost.exporter.image"
    ]
    assert ref.endswith(f"/{exporter.image}:{exporter.tag}@{exporter.digest}")  # ghcr.io: the copy area
    # the UI's image is the chart's only other one: it never runs
    assert inputs["values"]["opencost"]["ui"]["enabled"] is False


@pytest.mark.parametrize("stack", TRAIN)
def test_values_are_keys_of_the_pinned_chart(plan_stack, stack: str) -> None:
    assert unknown_keys(_release(plan_stack(stack)).inputs["values"], chart_values()) == []


@pytest.mark.parametrize("stack", TRAIN)
def test_it_reads_and_is_scraped_by_the_monitoring_stacks_prometheus(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    values = _release(plan).inputs["values"]
    internal = values["opencost"]["prometheus"]["internal"]
    kps = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == mon.KPS_RELEASE][0]
    # kube-prometheus-stack names its Prometheus Service <fullnameOverride>-prometheus, port 9090
    assert internal["serviceName"] == f"{kps.inputs['values']['fullnameOverride']}-prometheus"
    assert (internal["namespaceName"], internal["port"]) == (kps.inputs["namespace"], mon.PROMETHEUS_PORT)
    monitor = values["opencost"]["metrics"]["serviceMonitor"]
    assert monitor["enabled"] is True
    select = kps.inputs["values"]["prometheus"]["prometheusSpec"]["serviceMonitorSelector"]["matchLabels"]
    assert select.items() <= monitor["additionalLabels"].items()
    crds = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == mon.CRDS_RELEASE][0]
    prices = _config_map(plan, oc.NODE_PRICES_CONFIGMAP)
    assert {crds.urn, prices.urn} <= set(_release(plan).dependencies)


@pytest.mark.parametrize("stack", TRAIN)
def test_every_node_of_the_stack_is_priced_from_the_table(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    table = load_price_table()
    csv = _config_map(plan, oc.NODE_PRICES_CONFIGMAP).inputs["data"][oc.NODE_PRICES_KEY]
    exported = plan.outputs["opencost"]
    assert exported["unpriced"] == []
    for row in exported["nodePrices"]:
        assert row["source"] in table.sources, row
        if row["pool"] in plan.config["node_pools"]:
            labels = {
                "aiplat.io/pool": row["pool"],
                "topology.kubernetes.io/region": plan.region,
                "node.kubernetes.io/instance-type": row["instanceType"],
            }
            assert csv_price(csv, labels) == pytest.approx(row["usdPerHour"], abs=1e-6), row
    assert set(plan.config["node_pools"]) <= {r["pool"] for r in exported["nodePrices"]}


@pytest.mark.parametrize("stack", TRAIN)
def test_no_aws_resource_and_the_cost_dashboard(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ours = {r.type for r in plan.resources if r.name.startswith("opencost")}
    assert {t.split(":")[0] for t in ours} == {"aiplat", "kubernetes"}, ours  # the component, its children
    board = _config_map(plan, "aiplat-dashboard-cost").inputs
    assert board["metadata"]["labels"][mon.DASHBOARD_LABEL[0]] == mon.DASHBOARD_LABEL[1]
    (text,) = board["data"].values()
    assert json.loads(text) == json.loads((REPO / "infra/monitoring/dashboards/cost.json").read_text())


def test_no_opencost_on_an_infer_stack(plan_stack) -> None:
    plan = plan_stack("prod-sg-infer")
    assert not [r for r in plan.resources if r.name.startswith("opencost")]
    assert "opencost" not in plan.outputs


def test_a_pool_the_table_does_not_price_is_a_warning_of_the_plan(stack_config) -> None:
    """The price table has m7i.2xlarge in us-west-2 but not m7i.xlarge: OpenCost would charge the publisher's
    node at its default rates, and the plan says so, naming the pool."""
    from infra.plan.runner import run_plan
    from infra.schema.parse import parse_platform_config
    from tests.conftest import with_value

    assert "m7i.xlarge" not in load_price_table().instances["us-west-2"]
    raw = with_value(stack_config("dev-us-train"), "node_pools.publisher.instance_type", "m7i.xlarge")
    plan = run_plan("dev-us-train", parse_platform_config(raw))
    (found,) = [f for f in plan.findings if f.field == "aiplat:platform.node_pools.publisher"]
    assert "OpenCost prices these nodes at its default rates" in found.problem
    assert "m7i.xlarge" in found.problem and found.doc == "docs/platform/cost.md"
    assert plan.outputs["opencost"]["unpriced"] == [
        f"node_pools.publisher: {found.problem.split(': ', 1)[1]}"
    ]
    assert "publisher" not in {r["pool"] for r in plan.outputs["opencost"]["nodePrices"]}
