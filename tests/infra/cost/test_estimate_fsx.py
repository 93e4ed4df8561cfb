"""The FSx for Lustre line of the cost estimate: provisioned GiB times the GB-month rate of the deployment
type's throughput tier, from the price table; a tier the table lacks is unknown, never guessed."""

from __future__ import annotations

import datetime as dt

import yaml

from infra.cost.estimate import Usage, estimate_stack
from infra.io.prices import load_price_table
from infra.io.stackfiles import load_stack_config
from tests.conftest import EXAMPLES_DIR, REPO

DATA = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())
USAGE = Usage(on=dt.date(2026, 11, 30))


def _fsx_items(cfg):
    cost = estimate_stack("fsx", cfg, load_price_table(), USAGE)
    return [i for i in cost.items if i.name.startswith("FSx for Lustre")], cost


def _with(cfg, **fields):
    fsx = cfg.cluster_services.fsx.model_copy(update=fields)
    return cfg.model_copy(update={"cluster_services": cfg.cluster_services.model_copy(update={"fsx": fsx})})


def test_fsx_line_is_capacity_times_the_tier_rate() -> None:
    cfg = load_stack_config("fsx", EXAMPLES_DIR)
    (item,), cost = _fsx_items(cfg)
    rate = DATA["regional"]["us-east-1"]["fsx_lustre_persistent_2_125_gb_month"]["usd"]
    assert item.name == "FSx for Lustre (2400 GiB, PERSISTENT_2 125 MB/s/TiB)"
    assert item.price.source == "c3x-fsx" and item.price.unit == "GB-month"
    assert item.monthly(cost.hours_per_month).usd == 2400 * rate
    # a monthly amount: the same whatever hours a month has
    assert item.monthly(1.0).usd == item.monthly(744.0).usd


def test_unpriced_tier_is_unknown_and_off_is_no_line() -> None:
    cfg = load_stack_config("fsx", EXAMPLES_DIR)
    (item,), cost = _fsx_items(_with(cfg, per_unit_storage_throughput=500))
    assert item.price.usd is None
    assert not item.monthly(cost.hours_per_month).complete
    (none, _) = _fsx_items(_with(cfg, enabled=False))
    assert none == []
