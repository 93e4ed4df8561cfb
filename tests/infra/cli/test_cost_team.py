"""``aiplat cost --team``: a team's run records, written by the trainer's own ``RunRecord`` into a local S3
emulator with the price the training runtime gives its pods, summed by job and by pool and purchase option;
the totals equal GPU hours x the price table's price, read here from the YAML itself."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.cli import common
from infra.cli.main import main
from infra.cost.runs import NO_END, pool_price
from infra.io import snapshot
from infra.io.prices import load_price_table
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import training_settings
from infra.pools.config import CapacityType
from infra.storage.config.storage import BucketPurpose
from infra.training.documents import runtime as t
from infra.training.documents import stack as training_stack
from tests.conftest import REPO
from trainer.checkpoint.sidewrites import SideWriter
from trainer.run.cost import PRICE_ENV
from trainer.run.runrecord import RunRecord, resources
from trainer.tools.moto_server import MotoServer

STACK = "prod-us-train"
CFG = load_stack_config(STACK)
FACTS = snapshot.region_facts(CFG)
DATA = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())
BUCKET = CFG.bucket_name(BucketPurpose.checkpoints)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")


def runtime_price(capacity: CapacityType) -> str:
    """``$AIPLAT_PRICE`` as the stack's runtime gives it to its pods, with the runtime pool bought as
    ``capacity`` (a runtime redeployed after the pool changed)."""
    assert CFG.training is not None
    name = CFG.training.runtime.pool
    pools = {**CFG.node_pools, name: CFG.node_pools[name].model_copy(update={"capacity_type": capacity})}
    cfg = CFG.model_copy(update={"node_pools": pools})
    settings = training_settings(CFG)
    assert settings is not None
    facts = FACTS.instances[cfg.node_pools[name].instance_type]
    price = pool_price(cfg, load_price_table(), name, FACTS)
    spec = training_stack.runtime_spec(cfg, facts, settings["runtime"], "img@sha256:" + "0" * 64, price=price)
    pod = t.runtime_document(spec)["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    [env] = [e["value"] for e in pod["template"]["spec"]["containers"][0]["env"] if e["name"] == PRICE_ENV]
    return env


def write_attempt(
    monkeypatch, uri: str, attempt: str, price: str, hours: float, *, end: bool = True, code: int = 0
) -> None:
    """One attempt of a 2-node job, 8 GPUs per node, through the trainer's own run record under ``uri``,
    ``hours`` long, ended with exit ``code`` (no end record: ``end`` False)."""
    monkeypatch.setenv(PRICE_ENV, price)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    writer = SideWriter(timeout_s=30)
    record = RunRecord.open(uri, attempt, {"resources": resources(16, True)}, writer, region=CFG.region)
    assert record is not None
    record.start()
    if end:
        record.t0 -= hours * 3600
        record.finish(code, "ok" if code == 0 else "test")
    assert writer.close() == []


@pytest.fixture
def records(moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Three jobs of team research: on the pool On-Demand (two attempts), as a Capacity Block, and one
    attempt that never wrote its end; returns the end records as stored."""
    s3 = moto_s3.client("s3", CFG.region)
    s3.create_bucket(Bucket=BUCKET)
    on_demand, block = runtime_price(CapacityType.on_demand), runtime_price(CapacityType.capacity_block)
    team = f"s3://{BUCKET}/research/checkpoints"
    write_attempt(monkeypatch, f"{team}/exp-a/", "0-uid1", on_demand, 1.5)
    write_attempt(monkeypatch, f"{team}/exp-a/", "1-uid2", on_demand, 0.25)
    write_attempt(monkeypatch, f"{team}/exp-b/", "0-uid3", block, 2.0)
    write_attempt(monkeypatch, f"{team}/exp-c/", "0-uid4", on_demand, 0, end=False)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    return [
        json.loads(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read())
        for k in keys
        if k.endswith(".end.json")
    ]


def table_price(record: dict) -> float:
    """GPU hours x the table's node-hour price of the record's type and option / the type's GPUs."""
    cost = record["cost"]
    entry = DATA["instances"][CFG.region][cost["instance_type"]][cost["purchase_option"]]
    gpus = FACTS.instances[cost["instance_type"]].gpu_count
    return record["resources"]["gpu_hours"] * entry["usd"] / gpus


def test_team_cost_sums_the_records_by_job_and_by_pool_and_option(records, capsys) -> None:
    assert len(records) == 3
    for r in records:  # each record's cost is GPU hours x the table's price
        assert r["cost"]["usd"] == pytest.approx(table_price(r), abs=1e-5)
    code = main(["cost", "-s", STACK, "--team", "research", "--since", "30d", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["usd"] == pytest.approx(sum(table_price(r) for r in records), abs=1e-4)
    jobs = {j["job"]: j for j in doc["by_job"]}
    assert set(jobs) == {"exp-a", "exp-b"} and jobs["exp-a"]["attempts"] == 2
    for job in jobs:
        mine = [r for r in records if f"/{job}/" in r["artifacts"]["run_record"]]
        assert jobs[job]["usd"] == pytest.approx(sum(table_price(r) for r in mine), abs=1e-5)
    pools = {(p["pool"], p["purchase_option"]): p for p in doc["by_pool"]}
    assert set(pools) == {("train", "on_demand"), ("train", "capacity_block")}
    for (_, option), p in pools.items():
        mine = [r for r in records if r["cost"]["purchase_option"] == option]
        assert p["usd"] == pytest.approx(sum(table_price(r) for r in mine), abs=1e-5)
        assert p["gpu_hours"] == pytest.approx(sum(r["resources"]["gpu_hours"] for r in mine), abs=1e-5)
        entry = DATA["instances"][CFG.region]["p5.48xlarge"][option]
        assert p["sources"] == [entry["source"]]
    # every price source named, with its address
    assert {k: v["url"] for k, v in doc["sources"].items()} == {
        s: DATA["sources"][s]["url"] for s in ("karpenter", "aws-capacity-blocks")
    }
    # the attempt without an end record is listed apart, not priced
    [unknown] = doc["unknown"]
    assert unknown["job"] == "exp-c" and unknown["unknown"] == NO_END
    # the tables: every job, both ways to buy, the sources, the unpriced attempt
    assert main(["cost", "-s", STACK, "--team", "research"]) == 0
    text = capsys.readouterr().out
    assert "exp-a" in text and "capacity_block" in text and DATA["sources"]["karpenter"]["url"] in text
    assert f"{doc['usd']:,.2f}" in text
    assert "exp-c 0-uid4" in text and NO_END in text


def test_the_window_leaves_older_attempts_out(records, capsys) -> None:
    assert main(["cost", "-s", STACK, "--team", "research", "--since", "2099-01-01", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["usd"] == 0 and doc["attempts"] == []


def test_a_bad_since_names_the_flag_and_the_fix(capsys) -> None:
    assert main(["cost", "-s", STACK, "--team", "research", "--since", "a month"]) == common.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "--since: 'a month' is neither a duration nor a date" in err
    assert "fix: pass days or hours back from now (30d, 12h)" in err
    assert main(["cost", "-s", STACK, "--since", "30d"]) == common.EXIT_CONFIG
    assert "--since: only counts with --team; fix: add --team" in capsys.readouterr().err


def test_an_unknown_team_names_the_flag_and_the_teams(capsys) -> None:
    assert main(["cost", "-s", STACK, "--team", "reserch"]) == common.EXIT_TEAM
    err = capsys.readouterr().err
    assert "--team: 'reserch' is not a team of stack prod-us-train (its teams: production, research)" in err
    assert "fix: use one of them" in err


def test_one_stack_only(capsys) -> None:
    assert main(["cost", "--all", "--team", "research"]) == common.EXIT_CONFIG
    assert "--team: reads one stack's records; fix: pass exactly one --stack" in capsys.readouterr().err


def test_an_unreachable_bucket_is_an_aws_error(moto_s3: MotoServer, capsys) -> None:
    # no bucket in the emulator: the store refuses the listing
    assert main(["cost", "-s", STACK, "--team", "research"]) == common.EXIT_AWS
    assert f"run records under s3://{BUCKET}/research/checkpoints" in capsys.readouterr().err
