"""Part 1 of the GPU check (bench/gpu/train_bench.py) on CPU: its dry run goes through the trainer and prints
the fields the GPU run prints, its checks refuse with their exit codes, and it imports only what the lent GPU
machine has (torch, numpy, prometheus-client and this repository)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu import train_bench
from bench.gpu.train_bench import CheckFailed, check_driver, check_python, min_driver
from infra.pools.ami_drivers import CUDA_MIN_DRIVER
from trainer.config import ModelConfig
from trainer.training.model import GPT

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu" / "train_bench.py"
FIELDS = {
    "check", "mode", "model", "params", "params_non_embedding", "config", "dtype", "compile", "checkpoint",
    "device", "seq_len", "tokens_per_step", "steps", "warmup_steps", "steps_measured", "step_s",
    "tokens_per_s", "flops_per_token", "mfu", "mfu_formula", "peak_flops", "peak_flops_source", "python",
    "torch", "cuda", "gpu", "driver", "wall_s",
}  # fmt: skip


def run_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "1", "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd="/", capture_output=True, text=True, timeout=300,
        env={**base, **(env or {})},
    )  # fmt: skip


@pytest.mark.slow
def test_dry_run_trains_the_debug_model_and_prints_one_json_object(tmp_path: Path) -> None:
    """The CPU dry run is the GPU run's path with the debug model: the trainer's own step lines become
    tokens/s, step time and (against the peak given) MFU."""
    r = run_script("--dry-run", "--peak-flops", "1e12", "--work", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = r.stdout.strip().splitlines()  # one JSON object and nothing else on stdout
    rep = json.loads(line)
    assert set(rep) == FIELDS
    debug = GPT(ModelConfig(size="debug"))
    assert (rep["mode"], rep["model"], rep["device"], rep["dtype"], rep["compile"]) == (
        "dry-run", "debug", "cpu", "float32", False,
    )  # fmt: skip
    assert rep["params"] == debug.num_params(exclude_embeddings=False)
    assert rep["params_non_embedding"] == debug.num_params()
    assert rep["flops_per_token"] == debug.flops_per_token()
    assert rep["tokens_per_step"] == 4 * 2 * 32  # debug.toml: micro_batch 4, grad_accum 2, seq_len 32
    assert (rep["steps"], rep["warmup_steps"], rep["steps_measured"]) == (6, 2, 4)
    assert rep["tokens_per_s"] > 0 and 0 < rep["step_s"] < 60
    # tokens/s and step time are medians of the same steps, each of tokens_per_step tokens
    assert rep["tokens_per_s"] * rep["step_s"] == pytest.approx(rep["tokens_per_step"], rel=0.5)
    assert rep["mfu"] == pytest.approx(rep["flops_per_token"] * rep["tokens_per_s"] / 1e12)
    assert rep["peak_flops"] == 1e12 and "--peak-flops" in rep["peak_flops_source"]
    assert rep["gpu"] is None and rep["torch"] and rep["python"].startswith("3.")
    assert not list(tmp_path.iterdir())  # its shards are removed


def test_without_a_gpu_the_check_stops_with_exit_3_and_one_line() -> None:
    r = run_script()
    assert r.returncode == 3, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: ") and ("CPU build" in line or "CUDA is not available" in line)
    assert r.stdout == ""


def test_python_older_than_3_11_is_refused_with_exit_2() -> None:
    check_python((3, 11, 0))
    check_python((3, 12, 3, "final", 0))
    with pytest.raises(CheckFailed, match=r"Python 3\.10\.14: the GPU check needs Python >= 3\.11") as e:
        check_python((3, 10, 14, "final", 0))
    assert e.value.code == 2


def test_the_driver_must_be_new_enough_for_torchs_cuda() -> None:
    """torch 2.11+cu130 (the lent H200's) needs CUDA 13.0's minimum driver; the AMI's 580.159.03 has it."""
    check_driver("580.159.03", "13.0", "2.11.0+cu130")
    too_old = r"driver 570\.195\.03 is older than 580\.65\.06, the minimum for CUDA 13\.0"
    with pytest.raises(CheckFailed, match=too_old) as e:
        check_driver("570.195.03", "13.0", "2.11.0+cu130")
    assert e.value.code == 4 and "install a driver >= 580.65.06" in str(e.value)


def test_a_cuda_minor_not_in_the_table_takes_its_majors_minimum() -> None:
    """Minor-version compatibility (infra/pools/ami_drivers.py): a 13.x build runs on a 13.0 driver; a major
    the table does not know is refused, naming the table to extend."""
    assert "13.2" not in CUDA_MIN_DRIVER
    assert min_driver("13.2") == min_driver("13.0") == CUDA_MIN_DRIVER["13.0"]
    assert min_driver("12.8") == CUDA_MIN_DRIVER["12.8"]
    with pytest.raises(CheckFailed, match="add it to infra/pools/ami_drivers.py CUDA_MIN_DRIVER") as e:
        min_driver("11.8")
    assert e.value.code == 4


def test_peak_comes_from_the_trainers_table_with_its_source() -> None:
    peak, source = train_bench.peak_for("NVIDIA H200", None)
    assert peak == 989e12 and "https://www.nvidia.com/en-us/data-center/h200/" in source
    assert train_bench.peak_for("NVIDIA B300", None)[0] is None
    peak, source = train_bench.peak_for(None, None)
    assert peak is None and "--peak-flops" in source


def test_part_1_imports_only_what_the_gpu_machine_has() -> None:
    """The lent H200 has torch (with whatever torch itself loads), numpy and prometheus-client, and no network
    to install more: beyond what ``import torch`` loads, the trainer and the bench load only those."""
    probe = (
        "import importlib.metadata as md, json, sys\n"
        "dists = md.packages_distributions()\n"
        "def loaded():\n"
        "    tops = {m.split('.')[0] for m in list(sys.modules)} - set(sys.stdlib_module_names)\n"
        "    return {d.lower().replace('_', '-') for t in tops for d in dists.get(t, [])}\n"
        "import torch\n"
        "before = loaded()\n"
        "import bench.gpu.train_bench, bench.gpu.stats, trainer.train, trainer.tools.make_shards\n"
        "import infra.pools.ami_drivers, trainer.training.metrics\n"
        "print(json.dumps(sorted(loaded() - before)))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert r.returncode == 0, r.stderr
    added = set(json.loads(r.stdout))
    allowed = {"numpy", "prometheus-client", "aiplat"} | requirement_closure("torch")
    assert added <= allowed, f"beyond the GPU machine's packages: {sorted(added - allowed)}"


def requirement_closure(dist: str) -> set[str]:
    """``dist`` and what it requires, transitively (no extras): installed wherever ``dist`` is."""
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-"))
    return seen
