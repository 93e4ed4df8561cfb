"""OpenCost's documents: the chart values against the pinned chart's values.yaml, each pool's node price
against the price table at the pool's purchase option, the CSV as OpenCost's CSV provider reads it, the
default prices' split, and the rule that refuses OpenCost without monitoring."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cost.estimate import Option
from infra.io.prices import load_price_table
from infra.io.snapshot import region_facts
from infra.opencost import documents as oc
from infra.opencost.config import OpenCostConfig
from infra.pools.documents.nodes import POOL_LABEL
from infra.rules import Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config
from tests.conftest import with_value

UPSTREAM = Path(__file__).parent / "upstream"
REGION_LABEL = "topology.kubernetes.io/region"  # what csvprovider.go reads a node's region from
TYPE_LABEL = "node.kubernetes.io/instance-type"


def chart_values() -> dict[str, Any]:
    pinned = OpenCostConfig().chart.version
    return yaml.safe_load((UPSTREAM / f"opencost-{pinned}.values.yaml").read_text())


def unknown_keys(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Keys we set that the chart's values.yaml does not have. Below a key the chart leaves empty
    (``{}``, ``[]``, ``null``: free-form, e.g. extraEnv, affinity) anything goes."""
    if not isinstance(ours, dict) or not isinstance(theirs, dict) or not theirs:
        return []
    out = []
    for key, value in ours.items():
        if key not in theirs:
            out.append(f"{path}{key}")
        else:
            out += unknown_keys(value, theirs[key], f"{path}{key}.")
    return out


def built(raw: dict) -> tuple[Any, oc.NodePrices, oc.DefaultPrices, dict[str, Any]]:
    """The config, its node prices, default prices and chart values as the wiring builds them."""
    cfg = parse_platform_config(raw)
    facts, table = region_facts(cfg), load_price_table()
    system = sorted(n for n, p in cfg.node_pools.items() if p.runs_system_pods)
    prices = oc.node_prices(cfg, table, facts)
    defaults = oc.default_prices(cfg, table, facts, prices, system)
    values = oc.opencost_values(
        oc.OpenCostValues(
            cluster_id="aiplat-test",
            prometheus_service="kps-prometheus",
            prometheus_namespace="monitoring",
            prometheus_port=9090,
            monitor_labels={"aiplat.io/prometheus": "aiplat"},
            affinity={},
            defaults=defaults,
        )
    )
    return cfg, prices, defaults, values


def csv_price(csv: str, labels: dict[str, str]) -> float | None:
    """The hourly price OpenCost's CSV provider gives a node with ``labels`` (opencost/opencost
    pkg/cloud/provider/csvprovider.go: DownloadPricingData keys rows by ``<region>,<InstanceID>`` once a row
    names a region, and node rows by class ``<Region>,<InstanceType>,node``; NodePricing takes the exact
    match by the node's InstanceIDField, then a class match on top of it)."""
    exact: dict[str, float] = {}
    classes: dict[str, float] = {}
    field = ""
    for line in csv.splitlines():
        parts = line.split(",")
        if len(parts) == 1 and line.startswith("#"):
            continue
        assert len(parts) == 8, line
        _, instance_id, region, asset, id_field, instance_type, price, _ = parts
        assert asset == "node"
        exact[f"{region.lower()},{instance_id.lower()}"] = float(price)
        classes[f"{region},{instance_type},node"] = float(price)
        field = id_field
    key = field.removeprefix("metadata.labels.")
    found = exact.get(f"{labels[REGION_LABEL]},{labels.get(key, '')}")
    return classes.get(f"{labels[REGION_LABEL]},{labels[TYPE_LABEL]},node", found)


@pytest.fixture
def prod(stack_config) -> dict:
    return stack_config("prod-us-train")


@pytest.fixture
def dev(stack_config) -> dict:
    return stack_config("dev-us-train")


def read_paths(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """The dotted values paths we set, down to where the chart's default is free-form (``{}``, ``[]``,
    ``null``) or a leaf: what its templates must read."""
    if not isinstance(ours, dict) or not isinstance(theirs, dict) or not theirs:
        return [path.rstrip(".")]
    return [p for key, value in ours.items() for p in read_paths(value, theirs.get(key), f"{path}{key}.")]


@pytest.mark.parametrize("stack", ["prod-us-train", "dev-us-train"])
def test_values_use_only_keys_of_the_pinned_chart(stack_config, stack: str) -> None:
    _, _, _, values = built(stack_config(stack))
    assert unknown_keys(values, chart_values()) == []


def test_every_value_we_set_is_read_by_a_template_of_the_pinned_chart(prod: dict) -> None:
    """A key the chart's values.yaml has but no template reads would be set for nothing (its templates at
    the tag: ``upstream/opencost-<version>-templates``)."""
    _, _, _, values = built(prod)
    templates = UPSTREAM / f"opencost-{OpenCostConfig().chart.version}-templates"
    text = "\n".join(p.read_text() for p in sorted(templates.iterdir()) if p.suffix in (".yaml", ".tpl"))

    def read(path: str) -> bool:
        # the path itself, or a mapping above it that a template takes whole (range, toYaml, with)
        parts = path.split(".")
        whole = (".".join(parts[:n]) for n in range(1, len(parts)))
        return f".Values.{path}" in text or any(
            re.search(rf"\.Values\.{re.escape(q)}(?![\w.])", text) for q in whole
        )

    assert [p for p in read_paths(values, chart_values()) if not read(p)] == []


def test_values_override_what_the_chart_defaults_wrongly_for_us(prod: dict) -> None:
    chart, (_, _, _, v) = chart_values(), built(prod)
    ours, theirs = v["opencost"], chart["opencost"]
    # the chart's Prometheus is "prometheus-server.prometheus-system": ours is the monitoring stack's
    assert theirs["prometheus"]["internal"]["serviceName"] != ours["prometheus"]["internal"]["serviceName"]
    assert ours["prometheus"]["internal"]["serviceName"] == "kps-prometheus"
    # clusterName is the DNS domain of the Prometheus address the chart joins, not the EKS cluster's name
    assert v["clusterName"] == chart["clusterName"] == "cluster.local"
    # every key of the chart's sample cost model is ours: none of its sample prices stays
    assert set(theirs["customPricing"]["costModel"]) <= set(ours["customPricing"]["costModel"])
    assert ours["customPricing"]["costModel"]["GPU"] != str(theirs["customPricing"]["costModel"]["GPU"])
    assert ours["customPricing"]["enabled"] is True and theirs["customPricing"]["enabled"] is False
    # the UI and the MCP server are on by default; Prometheus scrapes it only with the ServiceMonitor
    assert theirs["ui"]["enabled"] is True and ours["ui"]["enabled"] is False
    assert theirs["mcp"]["enabled"] is True and ours["mcp"]["enabled"] is False
    assert ours["metrics"]["serviceMonitor"]["enabled"] is True
    # the CSV is mounted where CSV_PATH points, from the volume the chart's extraVolumes adds
    env = ours["exporter"]["extraEnv"]
    (mount,) = ours["exporter"]["extraVolumeMounts"]
    (volume,) = v["extraVolumes"]
    assert env["USE_CSV_PROVIDER"] == "true"
    assert env["CSV_PATH"] == f"{mount['mountPath']}/{oc.NODE_PRICES_KEY}"
    assert mount["name"] == volume["name"] and volume["configMap"]["name"] == oc.NODE_PRICES_CONFIGMAP
    assert ours["cloudCost"]["enabled"] is False


@pytest.mark.parametrize(
    ("capacity_type", "option"),
    [
        ("on_demand", Option.on_demand),
        ("capacity_block", Option.capacity_block),
        ("capacity_reservation", Option.on_demand),  # an ODCR bills its instances at the On-Demand rate
        ("spot", Option.spot),
    ],
)
def test_each_pool_is_priced_at_its_purchase_option(prod: dict, capacity_type: str, option: Option) -> None:
    raw = with_value(prod, "node_pools.train.capacity_type", capacity_type)
    if capacity_type in ("capacity_block", "capacity_reservation"):
        reservation = {"id": "cr-0123456789abcdef0", "availability_zone": "us-east-1a"}
        raw = with_value(raw, "node_pools.train.capacity_reservation", reservation)
    cfg, prices, _, _ = built(raw)
    (row,) = [r for r in prices.rows if r.pool == "train"]
    entry = load_price_table().instances[cfg.region]["p5.48xlarge"]
    table = {
        Option.on_demand: entry.on_demand.usd,
        Option.capacity_block: entry.capacity_block.usd if entry.capacity_block else None,
        Option.spot: max(entry.spot.zones.values()) if entry.spot else None,
    }
    assert (row.option, row.usd, row.gpus) == (option, table[option], 8)
    assert row.source in load_price_table().sources
    # and that is what OpenCost charges for a node of the pool
    csv = oc.node_prices_csv(prices, table_read="2026-11-30")
    node = {POOL_LABEL: "train", REGION_LABEL: cfg.region, TYPE_LABEL: "p5.48xlarge"}
    assert csv_price(csv, node) == pytest.approx(row.usd, abs=1e-6)


def test_karpenter_nodes_are_priced_by_type_and_managed_ones_by_pool(dev: dict) -> None:
    cfg, prices, _, _ = built(dev)
    csv = oc.node_prices_csv(prices, table_read="2026-11-30")
    by_type = {r.instance_type: r for r in prices.rows if r.by_type}
    assert by_type and {r.pool for r in by_type.values()} == set(cfg.cluster_services.karpenter.node_pools)
    assert {r.option for r in by_type.values()} == {Option.spot}  # spot-gpu launches Spot only
    for it, row in by_type.items():
        node = {POOL_LABEL: row.pool, REGION_LABEL: cfg.region, TYPE_LABEL: it}
        assert csv_price(csv, node) == pytest.approx(row.usd, abs=1e-6), it
    for name, pool in cfg.node_pools.items():
        (row,) = [r for r in prices.rows if r.pool == name and not r.by_type]
        node = {POOL_LABEL: name, REGION_LABEL: cfg.region, TYPE_LABEL: pool.instance_type}
        assert csv_price(csv, node) == pytest.approx(row.usd, abs=1e-6), name
    # a node no row names gets no price from the file (OpenCost then uses the default rates)
    stray = {POOL_LABEL: "other", REGION_LABEL: cfg.region, TYPE_LABEL: "m7i.2xlarge"}
    assert csv_price(csv, stray) is None
    assert prices.unpriced == ()


def test_a_type_both_kinds_of_pool_price_differently_keeps_the_managed_pools_price(dev: dict) -> None:
    # the managed gpu pool's g5.xlarge On-Demand; spot-gpu launches it as Spot: a class row would reprice both
    cfg, prices, _, _ = built(with_value(dev, "node_pools.gpu.capacity_type", "on_demand"))
    assert "g5.xlarge" not in {r.instance_type for r in prices.rows if r.by_type}
    assert [field for field, why in prices.unpriced if "g5.xlarge is also a managed pool's type" in why] == [
        "cluster_services.karpenter.node_pools.spot-gpu"
    ]
    csv = oc.node_prices_csv(prices, table_read="2026-11-30")
    node = {POOL_LABEL: "gpu", REGION_LABEL: cfg.region, TYPE_LABEL: "g5.xlarge"}
    assert csv_price(csv, node) == load_price_table().instances[cfg.region]["g5.xlarge"].on_demand.usd


def test_default_prices_add_up_to_the_cpu_pool_and_take_the_dearest_gpu(prod: dict) -> None:
    cfg, prices, defaults, _ = built(prod)
    facts, table = region_facts(cfg), load_price_table()
    first = sorted(n for n, p in cfg.node_pools.items() if p.runs_system_pods)[0]
    it = cfg.node_pools[first].instance_type
    f = facts.instances[it]
    # the vCPUs and GiB of the CPU pool's instance at the default rates cost its On-Demand price
    total = f.vcpus * defaults.cpu + f.memory_mib / 1024 * defaults.ram
    assert total == pytest.approx(table.instances[cfg.region][it].on_demand.usd)
    assert defaults.cpu / defaults.ram == pytest.approx(oc.OPENCOST_CPU_PER_GIB_RATIO)
    gpu_rows = [r for r in prices.rows if r.gpus]
    assert defaults.gpu == max(r.usd / r.gpus for r in gpu_rows)
    assert it in defaults.sources["CPU"] and "p5.48xlarge" in defaults.sources["GPU"]


def _no_budgets(raw: dict) -> dict:
    """The config without team budgets (a budget is refused without monitoring)."""
    teams = {
        name: {k: v for k, v in team.items() if k != "budget"} for name, team in raw.get("teams", {}).items()
    }
    return {**raw, "teams": teams} if teams else raw


def test_opencost_without_monitoring_is_refused(prod: dict) -> None:
    prod = _no_budgets(prod)
    cfg = parse_platform_config(with_value(prod, "monitoring.enabled", False))
    found = [f for f in run_rules(Phase.plan, RuleContext(cfg)) if f.rule == "opencost-needs-monitoring"]
    assert [f.field for f in found] == ["aiplat:platform.opencost.enabled"]
    assert "monitoring.enabled is false" in found[0].problem
    off = parse_platform_config(
        with_value(with_value(prod, "monitoring.enabled", False), "opencost.enabled", False)
    )
    assert not [f for f in run_rules(Phase.plan, RuleContext(off)) if f.rule == "opencost-needs-monitoring"]


@pytest.mark.parametrize("stack", ["prod-us-train", "dev-us-train", "prod-sg-infer"])
@pytest.mark.parametrize("monitoring", [True, False])
def test_the_image_cache_counts_the_chart_exactly_where_the_stack_installs_it(
    stack_config, stack: str, monitoring: bool
) -> None:
    """``aiplat images copy`` and the image gaps follow the mirror's list of installed charts: it names
    OpenCost's exactly where the wiring installs it (``installs_opencost``)."""
    from infra.mirror.rules import stack_charts
    from infra.opencost.rules import installs_opencost

    cfg = parse_platform_config(
        with_value(_no_budgets(stack_config(stack)), "monitoring.enabled", monitoring)
    )
    listed = "opencost.chart" in {path for path, _ in stack_charts(cfg)}
    assert listed == installs_opencost(cfg)
    assert listed == (stack != "prod-sg-infer" and monitoring)


def test_a_region_the_table_does_not_price_keeps_opencosts_defaults_and_says_so(prod: dict) -> None:
    cfg, prices, defaults, _ = built(with_value(prod, "region", "eu-west-1"))
    assert not load_price_table().prices_region("eu-west-1")
    assert prices.rows == () and {f for f, _ in prices.unpriced} == {
        f"node_pools.{n}" for n in cfg.node_pools
    }
    assert all("aiplat prices refresh --region eu-west-1" in why for _, why in prices.unpriced)
    # OpenCost's own configs/default.json, named as the source: never a GPU priced at 0
    assert defaults.cpu / defaults.ram == pytest.approx(oc.OPENCOST_CPU_PER_GIB_RATIO) and defaults.gpu > 0
    assert set(defaults.sources.values()) == {oc.OPENCOST_DEFAULTS}
