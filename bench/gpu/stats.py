"""Parsing and statistics of the GPU check (bench/gpu/), kept free of any GPU library so the tests check them
on CPU (tests/bench/test_gpu_stats.py): the trainer's JSON lines, and the result files of
``vllm bench serve``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any


def trainer_events(stdout: str, kind: str) -> list[dict[str, Any]]:
    """The ``{"event": kind, ...}`` JSON lines the trainer prints on rank 0 (trainer/training/metrics.py), in
    order;
    other lines (logs, warnings, broken JSON) are skipped."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == kind:
            out.append(rec)
    return out


def trainer_steps(stdout: str) -> list[dict[str, Any]]:
    """The trainer's ``step`` records (:func:`trainer_events`)."""
    return trainer_events(stdout, "step")


def median(values: Iterable[float]) -> float:
    """The 50th percentile (:func:`percentile`)."""
    return percentile(values, 50)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation between closest ranks (numpy's default);
    :class:`ValueError` on no values."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q={q}: use 0-100")
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# The figures read from each result file of `vllm bench serve --save-result --percentile-metrics
# ttft,tpot,itl --metric-percentiles 50,99` (vllm 0.33.0 vllm/benchmarks/serve.py: benchmark() and main()).
SERVING_KEYS = (
    "max_concurrency",
    "completed",
    "failed",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p50_tpot_ms",
    "p99_tpot_ms",
    "p50_itl_ms",
    "p99_itl_ms",
)


def serving_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per concurrency from ``vllm bench serve`` result JSONs: :data:`SERVING_KEYS`, plus output
    tokens/s and p50 TTFT as ratios to the single-client run (which must be among ``results``).
    :class:`ValueError` for a result with failed requests or without a key (another vLLM, other flags)."""
    rows = []
    for res in results:
        missing = [k for k in SERVING_KEYS if k not in res]
        if missing:
            raise ValueError(f"a vllm bench serve result lacks {', '.join(missing)} (another vLLM or flags?)")
        if res["failed"] or not res["completed"]:
            raise ValueError(
                f"concurrency {res['max_concurrency']}: {res['failed']} of "
                f"{res['failed'] + res['completed']} requests failed"
            )
        rows.append({k: res[k] for k in SERVING_KEYS})
    rows.sort(key=lambda r: r["max_concurrency"])
    base = next((r for r in rows if r["max_concurrency"] == 1), None)
    if base is None:
        raise ValueError("the single-client run (--max-concurrency 1) is missing: ratios are relative to it")
    for r in rows:
        r["output_throughput_x1"] = r["output_throughput"] / base["output_throughput"]
        r["p50_ttft_x1"] = r["p50_ttft_ms"] / base["p50_ttft_ms"]
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """A plain text table of :func:`serving_rows`."""
    cols = ("clients", "done", "out tok/s", "x1", "TTFT p50", "x1", "TTFT p99", "TPOT p50", "ITL p99")
    lines = [" ".join(f"{c:>10}" for c in cols)]
    for r in rows:
        cells = (
            f"{r['max_concurrency']}",
            f"{r['completed']}",
            f"{r['output_throughput']:.0f}",
            f"{r['output_throughput_x1']:.2f}",
            f"{r['p50_ttft_ms']:.1f}ms",
            f"{r['p50_ttft_x1']:.2f}",
            f"{r['p99_ttft_ms']:.1f}ms",
            f"{r['p50_tpot_ms']:.2f}ms",
            f"{r['p99_itl_ms']:.2f}ms",
        )
        lines.append(" ".join(f"{c:>10}" for c in cells))
    return "\n".join(lines)
