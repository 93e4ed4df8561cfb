"""``python -m trainer.tools.allreduce_bench``: nccl-tests' bus bandwidth, two CPU ranks with gloo, and the
exit code the bandwidth-check job's failure policy keys on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer import exitcodes
from trainer.tools.allreduce_bench import _rank_argv, bus_bandwidth, sizes

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`

REPO = Path(__file__).resolve().parents[2]


# NVIDIA/nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw * 2 (n - 1) / n
@pytest.mark.parametrize(
    ("algbw", "ranks", "busbw"), [(100.0, 2, 100.0), (100.0, 8, 175.0), (100.0, 16, 187.5), (10.0, 1, 0.0)]
)
def test_bus_bandwidth_is_nccl_tests_formula(algbw: float, ranks: int, busbw: float) -> None:
    assert bus_bandwidth(algbw, ranks) == pytest.approx(busbw)


def test_sizes_double_up_to_the_largest() -> None:
    assert list(sizes(1024, 8192, 2)) == [1024, 2048, 4096, 8192]
    assert list(sizes(1000, 3000, 2))[-1] == 3000  # the largest size is always measured
    with pytest.raises(ValueError):
        list(sizes(8, 4, 2))


def test_launch_arguments_are_not_passed_to_the_ranks() -> None:
    argv = [
        "--launch",
        "--nnodes=2",
        "--nproc-per-node",
        "8",
        "--rdzv-endpoint=h:1",
        "--max-bytes=64",
        "--min-busbw=1",
    ]
    assert _rank_argv(argv) == ["--max-bytes=64", "--min-busbw=1"]


def _bench(*args: str, work_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "trainer.tools.allreduce_bench",
        "--launch",
        "--nnodes=1",
        "--nproc-per-node=2",
    ]
    cmd += ["--min-bytes=1024", "--max-bytes=65536", "--warmup=1", "--iters=3", *args]
    return subprocess.run(cmd, cwd=work_dir, env=env, capture_output=True, text=True, timeout=240)


def test_two_gloo_ranks_report_busbw_and_pass(work_dir: Path) -> None:
    out = work_dir / "bench.json"
    r = _bench("--min-busbw=0.000001", f"--json={out}", work_dir=work_dir)
    assert r.returncode == exitcodes.OK, r.stderr[-3000:]
    summary = json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])
    assert summary["ranks"] == 2 and summary["bytes"] == 65536 and summary["passed"] is True
    rows = json.loads(out.read_text())["results"]
    assert [row["bytes"] for row in rows] == [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    for row in rows:
        assert row["correct"] is True
        # the reported numbers are consistent with the measured time: algbw = S / t, busbw = algbw (n = 2)
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-6)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])


def test_below_the_threshold_exits_with_the_final_code(work_dir: Path) -> None:
    r = _bench("--min-busbw=1000000", work_dir=work_dir)
    assert r.returncode == exitcodes.BAD_INPUT, r.stderr[-3000:]
    assert "is below 1000000.0 GB/s" in r.stderr
