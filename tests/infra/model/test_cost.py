"""The cost model's arithmetic, checked against the price data file read independently here (plain YAML),
and the shipped stack files."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from infra.io.prices import load_price_table
from infra.io.stackfiles import load_stack_config
from infra.model.config.parse import parse_model, parse_platform_config
from infra.model.cost import Money, Option, PriceTable, Usage, estimate_stack
from infra.model.errors import ConfigErrors
from tests.conftest import REPO

DATA = yaml.safe_load((REPO / "infra/model/data/prices.yaml").read_text())
HOURS = DATA["hours_per_month"]
TODAY = dt.date(2026, 11, 30)


def od(region: str, itype: str) -> float:
    return DATA["instances"][region][itype]["on_demand"]["usd"]


def spot(region: str, itype: str) -> float:
    return max(DATA["instances"][region][itype]["spot"]["zones"].values())


def regional(region: str, item: str) -> float:
    return DATA["regional"][region][item]["usd"]


def _raw(stack: str, folder: Path = REPO / "stacks") -> dict:
    return yaml.safe_load((folder / f"Pulumi.{stack}.yaml").read_text())["config"]["aiplat:platform"]


def test_every_price_names_a_known_source_and_every_source_a_date_or_undated() -> None:
    table = load_price_table()
    assert table.hours_per_month == 8760 / 12
    for key, source in table.sources.items():
        assert source.what, key
        assert key == "none" or source.url.startswith("https://"), key
    raw = yaml.safe_load((REPO / "infra/model/data/prices.yaml").read_text())
    raw["regional"]["us-east-1"]["nat_gateway_hour"]["source"] = "a-blog-nobody-read"
    with pytest.raises(ConfigErrors, match=r"sources \['a-blog-nobody-read'\] that are not under 'sources'"):
        parse_model(raw, PriceTable, "prices.yaml")


def test_train_stack_desired_hourly_is_the_sum_of_its_parts() -> None:
    cfg = load_stack_config("prod-us-train")
    cost = estimate_stack(
        "prod-us-train", cfg, load_price_table(), Usage(on=TODAY, artifact_gb_per_month=1000)
    )
    pools = cfg.node_pools
    nodes = pools["system"].desired_size * od("us-east-1", "m6i.2xlarge") + pools["train"].desired_size * od(
        "us-east-1", "p5.48xlarge"
    )
    eks = DATA["global"]["eks_cluster_hour_standard"]["usd"]
    nat = cfg.network.az_count * regional("us-east-1", "nat_gateway_hour")
    endpoints = len(cfg.network.interface_endpoints) * cfg.network.az_count
    endpoint_cost = endpoints * regional("us-east-1", "interface_endpoint_az_hour")
    replication = 1000 * DATA["transfer_gb"]["us-east-1"]["ap-southeast-1"]["usd"] / HOURS
    hourly = cost.hourly("desired")
    assert hourly.usd == pytest.approx(nodes + eks + nat + endpoint_cost + replication)
    # us-east-1 -> ap-east-1 has no price: the amount says so instead of counting it as 0
    assert hourly.unknown == ("data transfer us-east-1 -> ap-east-1",)
    assert cost.monthly("desired").usd == pytest.approx(hourly.usd * HOURS)


def test_sizes_and_purchase_options_of_a_pool() -> None:
    cfg = load_stack_config("dev-us-train")
    cost = estimate_stack("dev-us-train", cfg, load_price_table(), Usage(on=TODAY))
    gpu = next(p for p in cost.pools if p.pool == "gpu")
    pool = cfg.node_pools["gpu"]
    assert gpu.configured is Option.spot
    for size, n in (("min", pool.min_size), ("desired", pool.desired_size), ("max", pool.max_size)):
        assert gpu.hourly(size).usd == pytest.approx(n * spot("us-west-2", "g5.xlarge"))
        assert gpu.hourly(size, Option.on_demand).usd == pytest.approx(n * od("us-west-2", "g5.xlarge"))
    # no Capacity Block price for g5 in the table: unknown, except for zero nodes
    assert gpu.hourly("max", Option.capacity_block).unknown == ("g5.xlarge capacity block, us-west-2",)


def test_capacity_block_bills_every_reserved_instance() -> None:
    cfg = parse_platform_config(_raw("capacity-block", REPO / "examples"))
    cost = estimate_stack("capacity-block", cfg, load_price_table(), Usage(on=TODAY))
    train = next(p for p in cost.pools if p.pool == "train")
    block = DATA["instances"]["us-east-1"]["p5.48xlarge"]["capacity_block"]["usd"]
    reserved = cfg.node_pools["train"].max_size
    assert cfg.node_pools["train"].min_size == 0  # nothing runs at min, the block is still paid
    assert [train.hourly(s).usd for s in ("min", "desired", "max")] == [pytest.approx(reserved * block)] * 3
    assert train.hourly("min", Option.on_demand) == Money()


def test_odcr_bills_the_reservation_at_the_on_demand_rate() -> None:
    cfg = parse_platform_config(_raw("odcr", REPO / "examples"))
    cost = estimate_stack("odcr", cfg, load_price_table(), Usage(on=TODAY))
    train = next(p for p in cost.pools if p.pool == "train")
    assert train.configured is Option.on_demand
    reserved = cfg.node_pools["train"].max_size
    assert train.hourly("min").usd == pytest.approx(reserved * od("us-west-2", "p4d.24xlarge"))


def test_zero_of_an_unknown_price_is_known_and_usage_lines_scale() -> None:
    cfg = load_stack_config("prod-hk-infer")
    table = load_price_table()
    quiet = estimate_stack("prod-hk-infer", cfg, table, Usage(on=TODAY))
    processing = next(i for i in quiet.items if i.name.startswith("NAT data processing"))
    assert processing.price.usd is None and processing.monthly(HOURS) == Money()
    busy = estimate_stack("prod-hk-infer", cfg, table, Usage(on=TODAY, nat_gb_per_month=100))
    processing = next(i for i in busy.items if i.name.startswith("NAT data processing"))
    assert processing.monthly(HOURS).unknown == ("NAT gateway data processing, ap-east-1",)

    events = estimate_stack(
        "prod-hk-infer", cfg, table, Usage(on=TODAY, cloudtrail_data_events_per_month=2_500_000)
    )
    trail = next(i for i in events.items if i.name.startswith("CloudTrail"))
    assert trail.monthly(HOURS).usd == pytest.approx(
        25 * DATA["global"]["cloudtrail_data_events_per_100k"]["usd"]
    )


def test_load_balancers_default_to_one_per_infer_stack() -> None:
    table = load_price_table()
    infer = estimate_stack("prod-sg-infer", load_stack_config("prod-sg-infer"), table, Usage(on=TODAY))
    train = estimate_stack("prod-us-train", load_stack_config("prod-us-train"), table, Usage(on=TODAY))
    assert [i.quantity for i in infer.items if i.name == "application load balancers"] == [1]
    assert [i.name for i in train.items if "load balancer" in i.name] == []
    two = estimate_stack(
        "prod-us-train", load_stack_config("prod-us-train"), table, Usage(on=TODAY, load_balancers=2)
    )
    alb = next(i for i in two.items if i.name == "application load balancers")
    assert alb.hourly(HOURS).usd == pytest.approx(2 * regional("us-east-1", "alb_hour"))


def test_extended_support_after_the_end_of_standard_support() -> None:
    cfg = load_stack_config("prod-us-train")
    table = load_price_table()
    end = dt.date.fromisoformat(DATA["eks_standard_support_ends"]["1.35"]["date"])
    before = estimate_stack("s", cfg, table, Usage(on=end - dt.timedelta(days=1)))
    after = estimate_stack("s", cfg, table, Usage(on=end))
    eks = [next(i for i in c.items if i.name == "EKS control plane") for c in (before, after)]
    assert eks[0].price.usd == DATA["global"]["eks_cluster_hour_standard"]["usd"]
    assert eks[1].price.usd == DATA["global"]["eks_cluster_hour_extended"]["usd"]
    assert after.notes[0] == f"EKS: Kubernetes 1.35 left standard support on {end.isoformat()}"


def test_a_version_without_support_dates_is_unknown() -> None:
    raw = _raw("prod-us-train")
    raw["cluster"] = {"kubernetes_version": "1.36", "addons": {"kube_proxy": "v1.36.0-eksbuild.14"}}
    cost = estimate_stack("s", parse_platform_config(raw), load_price_table(), Usage(on=TODAY))
    assert "EKS cluster, support level unknown" in cost.hourly().unknown


def test_a_region_without_prices() -> None:
    cfg = parse_platform_config(_raw("minio", REPO / "examples"))  # eu-west-1: not in the table
    cost = estimate_stack("minio", cfg, load_price_table(), Usage(on=TODAY))
    unknown = cost.hourly().unknown
    assert "m6i.2xlarge on demand, eu-west-1" in unknown and "NAT gateway, eu-west-1" in unknown
    assert cost.hourly().usd == pytest.approx(DATA["global"]["eks_cluster_hour_standard"]["usd"])
