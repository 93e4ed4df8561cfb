"""An attempt's cost in its run record: GPU hours x the node-hour price the runtime gives the pod
($AIPLAT_PRICE, built from the price table: tests/infra/cost/test_runs.py) / the node's GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.checkpoint.sidewrites import SideWriter
from trainer.run.cost import NO_PRICE, PRICE_ENV, attempt_cost
from trainer.run.runrecord import RunRecord, resources

PRICE = {
    "pool": "train",
    "instance_type": "p5.48xlarge",
    "capacity_type": "on_demand",
    "purchase_option": "on_demand",
    "region": "us-east-1",
    "node_gpus": 8,
    "usd_per_node_hour": 55.04,
    "source": "karpenter",
    "source_kind": "third-party",
    "source_url": "https://example.invalid/pricing",
    "note": "",
    "prices_read": "2026-11-30",
}


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, price: dict | None, hours: float) -> tuple:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # 4 of the node's 8 GPUs, on 2 nodes
    if price is None:
        monkeypatch.delenv(PRICE_ENV, raising=False)
    else:
        monkeypatch.setenv(PRICE_ENV, json.dumps(price))
    writer = SideWriter(timeout_s=30)
    record = RunRecord.open(str(tmp_path), "0-uid", {"resources": resources(8, True)}, writer)
    assert record is not None
    record.start()
    record.t0 -= hours * 3600  # the attempt ran `hours` (its wall time is measured from t0)
    record.finish(0, "ok")
    assert writer.close() == []
    folder = tmp_path / "run-records"
    return (json.loads((folder / f"0-uid.{e}.json").read_text()) for e in ("start", "end"))


def test_the_end_record_holds_gpu_hours_times_the_gpu_share_of_the_node_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, end = _record(tmp_path, monkeypatch, PRICE, hours=1.5)
    hours = end["resources"]["gpu_hours"]
    assert hours == pytest.approx(2 * 4 * 1.5, rel=1e-3)  # nodes x GPUs per node x wall time
    cost = end["cost"]
    assert cost["usd"] == pytest.approx(hours * PRICE["usd_per_node_hour"] / PRICE["node_gpus"], abs=1e-6)
    assert cost["gpu_hours"] == hours and cost["unknown"] is None
    assert {k: cost[k] for k in PRICE} == PRICE  # where it ran, at what price, from which source
    # the start record names the price already; the amount comes at the end
    assert start["cost"]["usd"] is None and start["cost"]["instance_type"] == "p5.48xlarge"
    assert "not ended" in start["cost"]["unknown"]


def test_a_price_the_table_lacks_is_null_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lacking = {**PRICE, "usd_per_node_hour": None, "source": "none", "note": "not in the price table"}
    _, end = _record(tmp_path, monkeypatch, lacking, hours=1)
    assert end["cost"]["usd"] is None and end["resources"]["gpu_hours"] > 0
    assert end["cost"]["unknown"] == "no price for p5.48xlarge on_demand: not in the price table"


def test_off_the_runtime_there_is_no_price(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, end = _record(tmp_path, monkeypatch, None, hours=1)
    assert end["cost"]["usd"] is None and end["cost"]["unknown"] == NO_PRICE


@pytest.mark.parametrize("raw", ["{", '{"node_gpus": 0}', "[]"])
def test_a_bad_price_variable_is_named_not_guessed(raw: str) -> None:
    cost = attempt_cost(10.0, {PRICE_ENV: raw})
    assert cost["usd"] is None and PRICE_ENV in cost["unknown"]
