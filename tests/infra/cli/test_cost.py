"""``aiplat cost`` end to end: the printed amounts are the data file's prices times the stack files' sizes."""

from __future__ import annotations

import pytest
import yaml

from infra.cli.main import main
from infra.io.stackfiles import load_stack_config
from tests.conftest import REPO

DATA = yaml.safe_load((REPO / "infra/model/data/prices.yaml").read_text())


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
    from infra.model.gpu_offers import gpu_offer

    assert main(["cost", "--stack", "prod-hk-infer", "--on", "2026-11-30"]) == 0
    out = capsys.readouterr().out
    cfg = load_stack_config("prod-hk-infer")
    pool = cfg.cluster_services.karpenter.node_pools["gpu"]
    types = gpu_offer(cfg, snapshot.region_facts(cfg), pool).instance_types
    prices = {t: DATA["instances"]["ap-east-1"][t]["on_demand"]["usd"] for t in types}
    cheapest = min(prices, key=prices.__getitem__)
    assert cfg.inference is not None
    row = next(line for line in out.splitlines() if "│ karpenter.gpu " in line)
    replicas = cfg.inference.replicas.min
    assert f"{replicas}/{replicas}/{pool.gpu_limit}" in row
    assert f"{cheapest} {prices[cheapest]:,.4f}" in row
    assert f"{replicas * prices[cheapest]:,.2f}" in row
    assert "Karpenter pools: GPUs at min/desired" in " ".join(out.split())
