"""Parsing and statistics of the GPU check (bench/gpu/run.sh), kept free of any GPU library so the tests
check them on CPU (tests/bench/test_gpu_stats.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def trainer_steps(stdout: str) -> list[dict[str, Any]]:
    """The ``{"event": "step", ...}`` JSON lines the trainer prints on rank 0 (trainer/metrics.py), in order;
    other lines (logs, warnings) are skipped."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == "step":
            out.append(rec)
    return out


@dataclass(frozen=True)
class TrainFigures:
    """Steady-state training throughput: medians over the steps after the warm-up."""

    steps: int
    tokens_per_s: float
    mfu: float | None


def steady_training(steps: list[dict[str, Any]], warmup: int) -> TrainFigures:
    """Median tokens/s and MFU of ``steps`` past the first ``warmup`` (torch.compile and allocator warm-up);
    :class:`ValueError` when none is left."""
    steady = [s for s in steps if s["step"] > warmup]
    if not steady:
        raise ValueError(f"no step after the {warmup} warm-up steps (got {len(steps)} steps)")
    mfus = [s["mfu"] for s in steady if s.get("mfu") is not None]
    return TrainFigures(
        steps=len(steady),
        tokens_per_s=median([s["tokens_per_s"] for s in steady]),
        mfu=median(mfus) if mfus else None,
    )


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


def sse_payloads(lines: Iterable[bytes | str]) -> Iterable[dict[str, Any]]:
    """The JSON objects of a server-sent event stream (``data: {...}`` lines, as vLLM's OpenAI server
    streams completions); stops at ``data: [DONE]``."""
    for raw in lines:
        line = raw.decode() if isinstance(raw, bytes) else raw
        line = line.strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


@dataclass(frozen=True)
class Request:
    """One streamed completion as a client saw it (seconds from its own start)."""

    ttft_s: float  # until the first chunk with text
    total_s: float
    output_tokens: int


@dataclass(frozen=True)
class LoadRun:
    """Every request at one concurrency, and the wall time from the first start to the last end."""

    concurrency: int
    requests: list[Request]
    wall_s: float

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens of all requests per wall-clock second."""
        return sum(r.output_tokens for r in self.requests) / self.wall_s

    def ttft(self, q: float) -> float:
        """The ``q``-th percentile time to first token."""
        return percentile((r.ttft_s for r in self.requests), q)


def serving_table(runs: list[LoadRun]) -> list[dict[str, float]]:
    """One row per concurrency: output tokens/s and p50/p99 TTFT, each also as a ratio to the single-client
    run (which must be among ``runs``)."""
    base = next((r for r in runs if r.concurrency == 1), None)
    if base is None:
        raise ValueError("the single-client run is missing: ratios are relative to it")
    rows = []
    for r in sorted(runs, key=lambda r: r.concurrency):
        tps, p50, p99 = r.output_tokens_per_s, r.ttft(50), r.ttft(99)
        rows.append(
            {
                "clients": r.concurrency,
                "requests": len(r.requests),
                "output_tok_per_s": tps,
                "output_tok_per_s_ratio": tps / base.output_tokens_per_s,
                "ttft_p50_s": p50,
                "ttft_p50_ratio": p50 / base.ttft(50),
                "ttft_p99_s": p99,
                "ttft_p99_ratio": p99 / base.ttft(99),
            }
        )
    return rows


def format_rows(rows: list[dict[str, float]]) -> str:
    """A plain text table of :func:`serving_table`'s rows."""
    cols = ("clients", "requests", "out tok/s", "x1", "TTFT p50", "x1", "TTFT p99", "x1")
    lines = [" ".join(f"{c:>10}" for c in cols)]
    for r in rows:
        cells = (
            f"{r['clients']}",
            f"{r['requests']}",
            f"{r['output_tok_per_s']:.0f}",
            f"{r['output_tok_per_s_ratio']:.2f}",
            f"{r['ttft_p50_s'] * 1000:.1f}ms",
            f"{r['ttft_p50_ratio']:.2f}",
            f"{r['ttft_p99_s'] * 1000:.1f}ms",
            f"{r['ttft_p99_ratio']:.2f}",
        )
        lines.append(" ".join(f"{c:>10}" for c in cells))
    return "\n".join(lines)
