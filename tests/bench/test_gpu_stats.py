"""The GPU check's parsing, statistics and client (bench/gpu/), on CPU: the trainer's real step lines, a
stand-in streaming server speaking vLLM's completion stream, and the table's ratios."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench.gpu.load import one_request, run_level
from bench.gpu.stats import (
    LoadRun,
    Request,
    format_rows,
    percentile,
    serving_table,
    sse_payloads,
    steady_training,
    trainer_steps,
)
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
def test_trainer_step_lines_give_steady_tokens_per_second(work: Path) -> None:
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
    fig = steady_training(steps, warmup=2)
    assert fig.steps == 2 and fig.mfu is None  # no MFU on CPU
    assert fig.tokens_per_s == pytest.approx(percentile([s["tokens_per_s"] for s in steps[2:]], 50))
    with pytest.raises(ValueError, match="no step after the 4 warm-up steps"):
        steady_training(steps, warmup=4)


def test_sse_stream_parsing_stops_at_done() -> None:
    lines = [
        b": ping\n",
        b'data: {"a": 1}\n',
        b"\n",
        'data: {"b": 2}',
        b"data: [DONE]\n",
        b'data: {"c": 3}\n',
    ]
    assert list(sse_payloads(lines)) == [{"a": 1}, {"b": 2}]


class _Stream(BaseHTTPRequestHandler):
    """Streams what vLLM's /v1/completions streams: text chunks, then a usage chunk, then [DONE]."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(req["max_tokens"]):
            chunk = {"choices": [{"index": 0, "text": f"t{i}"}], "usage": None}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": req["max_tokens"]}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def stream_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_client_measures_ttft_and_reads_the_usage(stream_server: int) -> None:
    r = one_request("127.0.0.1", stream_server, "m", "hello", max_tokens=7, timeout=30)
    assert r.output_tokens == 7 and 0 < r.ttft_s <= r.total_s
    run = run_level("127.0.0.1", stream_server, "m", concurrency=3, per_client=2, max_tokens=5, timeout=30)
    assert len(run.requests) == 6 and sum(q.output_tokens for q in run.requests) == 30
    assert run.output_tokens_per_s == pytest.approx(30 / run.wall_s)


def test_table_ratios_are_relative_to_the_single_client_run() -> None:
    one = LoadRun(1, [Request(0.01, 1.0, 100), Request(0.03, 1.0, 100)], wall_s=2.0)
    many = LoadRun(16, [Request(0.02 * (i + 1), 1.0, 100) for i in range(16)], wall_s=4.0)
    rows = serving_table([many, one])
    assert [r["clients"] for r in rows] == [1, 16]
    assert rows[0]["output_tok_per_s_ratio"] == 1.0
    assert rows[1]["output_tok_per_s_ratio"] == pytest.approx((1600 / 4.0) / (200 / 2.0))
    assert rows[1]["ttft_p50_ratio"] == pytest.approx(many.ttft(50) / one.ttft(50))
    assert rows[1]["ttft_p99_ratio"] == pytest.approx(many.ttft(99) / one.ttft(99))
    assert "16" in format_rows(rows).splitlines()[2]
    with pytest.raises(ValueError, match="single-client run is missing"):
        serving_table([many])


def test_the_check_script_imports_without_a_gpu() -> None:
    r = subprocess.run([sys.executable, str(REPO / "bench/gpu/gpu_check.py"), "--help"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "1, 16 and 64 concurrent" in r.stdout


def test_the_gpu_check_serves_the_vllm_version_the_deployment_pins() -> None:
    """bench/gpu/run.sh installs the vLLM the inference Deployment runs (infra/inference/config.py)."""
    import re

    from infra.inference.config import VLLM_VERSION

    script = (Path(__file__).resolve().parents[2] / "bench" / "gpu" / "run.sh").read_text()
    (pinned,) = re.findall(r"^VLLM_VERSION=(\S+)$", script, flags=re.M)
    assert pinned == VLLM_VERSION
