"""The price the runtime gives its pods (``pool_price``) is the price table's for the pool's type and purchase
option, read here from the YAML itself; a team's attempts are summed from their records' own costs."""

from __future__ import annotations

import pytest
import yaml

from infra.cost.runs import NO_COST, NO_END, job_attempts, pool_price, price_drift, team_cost
from infra.io import snapshot
from infra.io.prices import load_price_table
from infra.io.stackfiles import load_stack_config
from infra.pools.config import CapacityType
from tests.conftest import REPO

DATA = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())


def _with_capacity(cfg, pool: str, capacity: CapacityType):
    """``cfg`` with ``pool`` bought another way (the price lookup only; not a validated stack)."""
    pools = {**cfg.node_pools, pool: cfg.node_pools[pool].model_copy(update={"capacity_type": capacity})}
    return cfg.model_copy(update={"node_pools": pools})


@pytest.fixture(scope="module")
def train():
    cfg = load_stack_config("prod-us-train")
    return cfg, snapshot.region_facts(cfg)


@pytest.mark.parametrize(
    ("capacity", "option", "usd"),
    [
        (CapacityType.on_demand, "on_demand", lambda e: e["on_demand"]["usd"]),
        (CapacityType.spot, "spot", lambda e: max(e["spot"]["zones"].values())),  # the highest zone's
        (CapacityType.capacity_reservation, "on_demand", lambda e: e["on_demand"]["usd"]),  # ODCR: On-Demand
        (CapacityType.capacity_block, "capacity_block", lambda e: e["capacity_block"]["usd"]),
    ],
)
def test_the_pool_price_is_the_tables_for_its_purchase_option(train, capacity, option, usd) -> None:
    cfg, facts = train
    cfg = _with_capacity(cfg, "train", capacity)
    price = pool_price(cfg, load_price_table(), "train", facts)
    pool = cfg.node_pools["train"]
    entry = DATA["instances"][cfg.region][pool.instance_type]
    assert price["purchase_option"] == option and price["capacity_type"] == capacity.value
    assert price["usd_per_node_hour"] == usd(entry)
    assert price["node_gpus"] == facts.instances[pool.instance_type].gpu_count
    assert price["source"] == entry[option]["source"]
    assert price["source_url"] == DATA["sources"][price["source"]]["url"]
    assert price["prices_read"] == DATA["read"]


def test_a_type_the_table_lacks_is_null_with_the_command_that_records_it(train) -> None:
    cfg, facts = train
    pools = {**cfg.node_pools}
    pools["train"] = pools["train"].model_copy(update={"instance_type": "p6-b200.48xlarge"})
    assert "p6-b200.48xlarge" not in DATA["instances"][cfg.region]
    price = pool_price(cfg.model_copy(update={"node_pools": pools}), load_price_table(), "train", facts)
    assert price["usd_per_node_hour"] is None
    assert f"aiplat prices refresh --region {cfg.region}" in price["note"]


def _end(usd: float | None, hours: float, **cost) -> dict:
    return {
        "status": "finished",
        "started_utc": "2026-11-20T00:00:00Z",
        "ended_utc": "2026-11-20T02:00:00Z",
        "exit": {"code": 0, "name": "ok"},
        "cost": {"usd": usd, "gpu_hours": hours, "pool": "train", "purchase_option": "on_demand", **cost},
    }


def test_attempts_pair_their_records_and_name_what_has_no_cost() -> None:
    started = {"started_utc": "2026-11-21T00:00:00Z", "cost": {"usd": None}}
    records = {
        "0-a.start.json": {"started_utc": "2026-11-20T00:00:00Z"},
        "0-a.end.json": _end(13.76, 2.0),
        "1-b.start.json": started,  # crashed: no end record
        "2-c.json": {"status": "finished", "ended_utc": "2026-11-22T00:00:00Z"},  # a team's, without cost
        "3-d.json": {"status": "running"},  # not an end
    }
    a, b, c = job_attempts("exp", records)
    assert (a.attempt, a.usd, a.gpu_hours, a.unknown) == ("0-a", 13.76, 2.0, None)
    assert (b.attempt, b.usd, b.unknown) == ("1-b", None, NO_END)
    assert (c.attempt, c.usd, c.unknown) == ("2-c", None, NO_COST)


def test_a_team_sums_its_records_by_job_and_by_pool_and_option() -> None:
    jobs = {
        "exp": {"0-a.end.json": _end(10.0, 1.0), "1-a.end.json": _end(5.5, 0.5)},
        "big": {"0-b.end.json": _end(7.0, 2.0, purchase_option="spot")},
    }
    cost = team_cost("research", "2026-11-01T00:00:00Z", jobs)
    assert cost.usd == pytest.approx(22.5) and cost.gpu_hours == pytest.approx(3.5)
    assert [(g.key, g.usd) for g in cost.by("job")] == [(("big",), 7.0), (("exp",), 15.5)]
    by_pool = {g.key: g.usd for g in cost.by("pool", "purchase_option")}
    assert by_pool == {("train", "on_demand"): 15.5, ("train", "spot"): 7.0}
    assert team_cost("research", "2026-11-21T00:00:00Z", jobs).attempts == ()  # the window


def test_records_priced_otherwise_than_todays_table_are_noted() -> None:
    table = load_price_table()
    today = DATA["instances"]["us-east-1"]["p5.48xlarge"]["on_demand"]["usd"]
    where = {"instance_type": "p5.48xlarge", "region": "us-east-1", "prices_read": "2026-01-01"}
    old = _end(8.0, 1.0, usd_per_node_hour=today + 1, **where)
    same = _end(8.0, 1.0, usd_per_node_hour=today, **where)
    cost = team_cost("research", "2026-11-01T00:00:00Z", {"a": {"0.end.json": old, "1.end.json": same}})
    [note] = price_drift(cost.priced, table)
    assert f"{today + 1:.4f}/node-h (table of 2026-01-01); the table now says {today:.4f}/node-h" in note
