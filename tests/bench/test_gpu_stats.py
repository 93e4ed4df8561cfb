"""The GPU check's parsing and statistics (bench/gpu/stats.py), on CPU: the trainer's real step lines and the
result files of `vllm bench serve` (0.33.0's keys), and how run.sh is put together."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.gpu.stats import SERVING_KEYS, format_rows, percentile, serving_rows, trainer_events, trainer_steps
from tests.trainer._support import make_corpus
from trainer.tools.make_shards import encode, write_shards

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def work() -> Iterator[Path]:
    """A private temp dir (pytest's shared one keeps only 3 sessions; see tests/trainer/conftest.py)."""
    d = Path(tempfile.mkdtemp(prefix="gpu-stats-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_percentile_interpolates_like_numpy() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (percentile(xs, 0), percentile(xs, 50), percentile(xs, 100)) == (1.0, 3.0, 5.0)
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


@pytest.mark.slow
def test_trainer_step_lines_are_what_the_check_reads(work: Path) -> None:
    """What the check reads is what the trainer prints (a real CPU run of the debug model)."""
    tmp_path = work
    write_shards(encode(make_corpus(40)), tmp_path / "shards", shard_tokens=40_000)
    cmd = [sys.executable, "-m", "trainer.train", "--config", str(REPO / "trainer/configs/debug.toml")]
    for kv in (f"data.source={tmp_path / 'shards'}", f"data.cache_dir={tmp_path / 'cache'}",
               f"checkpoint.uri={tmp_path / 'ckpt'}", "train.steps=4", "checkpoint.interval=4",
               "checkpoint.async_save=false", "metrics.port_base=0", "metrics.log_interval=1"):  # fmt: skip
        cmd += ["--set", kv]
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    steps = trainer_steps(r.stdout + "\nnot json\n{broken")
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert all(s["tokens_per_s"] > 0 and s["mfu"] is None for s in steps)  # no MFU on CPU
    (start,) = trainer_events(r.stdout, "start")
    assert start["device"] == "cpu" and start["params"] > 0


def vllm_result(concurrency: int, output_throughput: float, p50_ttft: float, **over: Any) -> dict[str, Any]:
    """A result file as `vllm bench serve --save-result --percentile-metrics ttft,tpot,itl
    --metric-percentiles 50,99` writes it (vllm 0.33.0 vllm/benchmarks/serve.py), with extra keys it also
    writes."""
    res: dict[str, Any] = {
        "date": "20261202-120000",
        "backend": "vllm",
        "max_concurrency": concurrency,
        "completed": 4 * concurrency,
        "failed": 0,
        "request_throughput": output_throughput / 128,
        "output_throughput": output_throughput,
        "total_token_throughput": 2 * output_throughput,
        "mean_ttft_ms": p50_ttft,
        "median_ttft_ms": p50_ttft,
        "p50_ttft_ms": p50_ttft,
        "p99_ttft_ms": 2 * p50_ttft,
        "p50_tpot_ms": 1.5,
        "p99_tpot_ms": 2.5,
        "p50_itl_ms": 1.4,
        "p99_itl_ms": 3.0,
    }
    return {**res, **over}


def test_serving_rows_are_sorted_and_relative_to_one_client() -> None:
    rows = serving_rows(
        [vllm_result(64, 12000.0, 40.0), vllm_result(1, 400.0, 8.0), vllm_result(16, 5000.0, 10.0)]
    )
    assert [r["max_concurrency"] for r in rows] == [1, 16, 64]
    assert [r["output_throughput_x1"] for r in rows] == [1.0, 12.5, 30.0]
    assert [r["p50_ttft_x1"] for r in rows] == [1.0, 1.25, 5.0]
    assert set(rows[0]) == {*SERVING_KEYS, "output_throughput_x1", "p50_ttft_x1"}
    table = format_rows(rows).splitlines()
    assert len(table) == 4 and table[3].split()[:4] == ["64", "256", "12000", "30.00"]


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([vllm_result(16, 5000.0, 10.0)], r"single-client run \(--max-concurrency 1\) is missing"),
        ([vllm_result(1, 400.0, 8.0, failed=3, completed=1)], "concurrency 1: 3 of 4 requests failed"),
        ([{k: v for k, v in vllm_result(1, 400.0, 8.0).items() if k != "p99_itl_ms"}], "lacks p99_itl_ms"),
    ],
)
def test_serving_rows_refuse_what_cannot_be_compared(results: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serving_rows(results)


@pytest.mark.parametrize(
    ("script", "says"),
    [("serve_bench.py", "vllm bench serve"), ("train_bench.py", "MFU"), ("serve_models.py", "vllm-router")],
)
def test_the_check_scripts_import_without_a_gpu(script: str, says: str) -> None:
    r = subprocess.run([sys.executable, str(REPO / "bench/gpu" / script), "--help"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert says in r.stdout


def test_the_gpu_check_serves_the_vllm_version_the_deployment_pins() -> None:
    """bench/gpu/run.sh installs the vLLM the inference Deployment runs (infra/inference/config.py)."""
    from infra.inference.config import VLLM_VERSION

    script = (Path(__file__).resolve().parents[2] / "bench" / "gpu" / "run.sh").read_text()
    (pinned,) = re.findall(r"^VLLM_VERSION=(\S+)$", script, flags=re.M)
    assert pinned == VLLM_VERSION


def test_run_sh_measures_the_trainer_before_it_installs_anything() -> None:
    """The lent GPU machine has no network: part 1 runs with the Python that is there, and every install
    (part 2's vLLM) comes after it, behind the check that vLLM is installed or an index answers."""
    lines = (REPO / "bench" / "gpu" / "run.sh").read_text().splitlines()
    code = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    part1 = next(i for i, ln in enumerate(code) if "train_bench.py" in ln)
    installs = [i for i, ln in enumerate(code) if re.search(r"pip(3)? install|uv pip", ln)]
    assert installs and min(installs) > part1
    skip = next(i for i, ln in enumerate(code) if "serving skipped:" in ln)
    assert part1 < skip < min(installs) and code[skip + 1].strip() == "exit 0"


@pytest.mark.slow
def test_run_sh_without_vllm_or_an_index_skips_serving_with_one_line_and_exits_0(work: Path) -> None:
    """What the lent H200 does (no vLLM, no network), on CPU: part 1 as a dry run prints its JSON, then one
    line says serving was skipped, and the exit code is part 1's 0."""
    env = {
        "PATH": os.environ["PATH"], "HOME": str(work), "OMP_NUM_THREADS": "1", "WORK": str(work / "w"),
        "PYTHON": sys.executable, "TRAIN_BENCH_ARGS": "--dry-run",
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",  # no index answers
    }  # fmt: skip
    r = subprocess.run(["bash", str(REPO / "bench/gpu/run.sh")], cwd="/", env=env, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    first, skipped = r.stdout.strip().splitlines()
    assert json.loads(first)["mode"] == "dry-run" and json.loads(first)["checkpoint"] is None
    assert skipped.startswith("serving skipped: vLLM 0.33.0 is not installed and no package index answers")
    assert json.loads((work / "w" / "train.json").read_text()) == json.loads(first)
