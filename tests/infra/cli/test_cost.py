"""``aiplat cost`` end to end: the printed amounts are the data file's prices times the stack files' sizes."""

from __future__ import annotations

import pytest
import yaml

from infra.cli.main import main
from infra.io.stackfiles import load_stack_config
from tests.conftest import REPO

DATA = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")


def test_cost_all_prints_pools_totals_and_the_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--all", "--on", "2026-11-30", "--artifact-gb-per-month", "1000"]) == 0
    out = capsys.readouterr().out
    train = load_stack_config("prod-us-train").node_pools["train"]
    p5 = DATA["instances"]["us-east-1"]["p5.48xlarge"]["on_demand"]["usd"]
    monthly = train.desired_size * p5 * DATA["hours_per_month"]
    row = next(line for line in out.splitlines() if "│ train " in line and "p5.48xlarge" in line)
    assert f"{monthly:,.2f}" in row
    assert f"{p5:,.4f}" in row
    assert "all stacks, as configured (USD)" in out
    assert "data transfer us-east-1 -> ap-east-1" in out  # an unknown price is named, not zero
    assert DATA["sources"]["karpenter"]["url"] in out  # every price traces to its source


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["cost", "--all", "--artifact-gb-per-month", "-5"])
    assert exc.value.code == 2
    assert "--artifact-gb-per-month: -5 is negative" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["cost", "--all", "--on", "soon"])
    assert exc.value.code == 2


def test_unknown_stack_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--stack", "prod-us-trian"]) == 2
    assert "did you mean 'prod-us-train'?" in capsys.readouterr().err


def test_karpenter_pools_are_priced(capsys: pytest.CaptureFixture[str]) -> None:
    """prod-hk-infer has no managed GPU pool: its GPU cost is the Karpenter pool's row, from the candidate
    types of the offline AWS data and the data file's prices."""
    from infra.io import snapshot
    from infra.karpenter.gpu_offers import gpu_offer

    assert main(["cost", "--stack", "prod-hk-infer", "--on", "2026-11-30"]) == 0
    out = capsys.readouterr().out
    cfg = load_stack_config("prod-hk-infer")
    pool = cfg.cluster_services.karpenter.node_pools["gpu"]
    types = gpu_offer(cfg, snapshot.region_facts(cfg), pool).instance_types
    prices = {t: DATA["instances"]["ap-east-1"][t]["on_demand"]["usd"] for t in types}
    cheapest = min(prices, key=prices.__getitem__)
    assert cfg.inference is not None
    row = next(line for line in out.splitlines() if "│ karpenter.gpu " in line)
    replicas = cfg.inference.models["gpt2-small"].replicas.min
    assert f"{replicas}/{replicas}/{pool.gpu_limit}" in row
    assert f"{cheapest} {prices[cheapest]:,.4f}" in row
    assert f"{replicas * prices[cheapest]:,.2f}" in row
    assert "Karpenter pools: GPUs at min/desired" in " ".join(out.split())


def _eu_stack(tmp_path, gpu_type: str):
    """dev-us-train moved to eu-west-1 with ``gpu_type`` on its GPU pool (valid config, a plan question)."""
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.dev-us-train.yaml").read_text())
    doc["config"]["aiplat:platform"]["region"] = "eu-west-1"
    doc["config"]["aiplat:platform"]["node_pools"]["gpu"]["instance_type"] = gpu_type
    (tmp_path / "Pulumi.eu-dev.yaml").write_text(yaml.safe_dump(doc))
    return str(tmp_path)


def test_a_stack_the_plan_refuses_is_not_priced_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _eu_stack(tmp_path, "g6e.12xlarge")  # not offered in eu-west-1 (moto's snapshot)
    assert main(["cost", "--stack", "eu-dev", "--stacks-dir", folder]) == 2
    captured = capsys.readouterr()
    assert (
        "error: eu-dev: aiplat:platform.node_pools.gpu.instance_type: 'g6e.12xlarge' is not offered in "
        in (captured.err)
    )
    assert "[data: moto " in captured.err
    assert "all stacks" not in captured.out  # nothing priced


def test_cost_json_is_the_estimate_as_data(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    args = ["cost", "--stack", "prod-us-train", "--on", "2026-11-30", "--artifact-gb-per-month", "1000"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (stack,) = doc["stacks"]
    train = next(p for p in stack["pools"] if p["pool"] == "train")
    cfg = load_stack_config("prod-us-train").node_pools["train"]
    p5 = DATA["instances"]["us-east-1"]["p5.48xlarge"]["on_demand"]["usd"]
    assert train["instance_type"] == "p5.48xlarge"
    assert train["nodes"] == {"min": cfg.min_size, "desired": cfg.desired_size, "max": cfg.max_size}
    assert train["prices"]["on_demand"]["usd"] == p5
    assert train["prices"]["on_demand"]["source_kind"] == DATA["sources"]["karpenter"]["kind"]
    assert train["hourly"]["desired"]["usd"] == pytest.approx(cfg.desired_size * p5)
    transfer = "data transfer us-east-1 -> ap-east-1"
    assert transfer in stack["totals"]["as_configured"]["monthly"]["max"]["unknown"]
    assert doc["sources"]["karpenter"]["url"] == DATA["sources"]["karpenter"]["url"]


def test_cost_fits_80_columns_without_cutting_instance_types(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["cost", "--all", "--on", "2026-11-30"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    words = set(out.replace("│", " ").split())
    for stack in ("prod-us-train", "prod-sg-infer", "dev-us-train", "prod-hk-infer"):
        for pool in load_stack_config(stack).node_pools.values():
            assert pool.instance_type in words, (stack, pool.instance_type)


def test_prices_from_third_party_blogs_are_marked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--stack", "prod-sg-infer", "--on", "2026-11-30"]) == 0
    out = capsys.readouterr().out
    nat = DATA["regional"]["ap-southeast-1"]["nat_gateway_hour"]["source"]
    assert DATA["sources"][nat]["kind"] == "third-party-blog"
    row = next(line for line in out.splitlines() if line.startswith("│ NAT gateway, ap-southeast-1 "))
    assert f"{nat} (third-party blog only)" in row
    assert "marked: " in out and "NAT gateway, ap-southeast-1" in out.split("marked: ", 1)[1]
