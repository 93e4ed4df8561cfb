"""Benchmark: inference server throughput and latency, concurrent clients against a single-request baseline.

    python bench/inference_latency.py [--clients 16] [--requests 192] [--max-new-tokens 32]
                                      [--layers 4 --d-model 256] [--torch-threads 2]

Trains a small GPT for one step with ``python -m trainer.train`` (on this README's text), publishes it with
``python -m trainer.publish`` to a local release directory, and starts ``python -m inference.serve`` twice
on it: with dynamic batching (``INFERENCE_MAX_BATCH=--max-batch``) and without (``INFERENCE_MAX_BATCH=1``).
Against each it measures, in this one run:

- ``single``: one client, one request at a time (the baseline: no queueing, no batching);
- ``concurrent``: ``--clients`` clients sending back to back (keep-alive connections).

Every request asks for exactly ``--max-new-tokens`` tokens (greedy, prompts cut to fit the context); it
prints requests/s, generated tokens/s and p50/p99 latency per case and the ratios of concurrent to single
throughput, and batched to unbatched under the same concurrency. A benchmark, not a test: numbers depend
on the machine (CPU here; on a GPU the gain from batching is larger, a forward being nearly free per row).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.ports import free_port  # noqa: E402
from trainer.tools.make_shards import encode, write_shards  # noqa: E402

MODEL = "bench"
PROMPTS = [
    "Models are trained in the US and served",
    "The offline plan",
    "Each stack gets one",
    "Checkpoints go to",
    "A",
    "GPU nodes scale with traffic when",
    "make test",
    "Inference in Hong Kong and Singapore",
]


def env(extra: dict[str, str]) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("INFERENCE_")}
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def make_release(work: Path, args: argparse.Namespace) -> str:
    """Train one step of the benchmark model, publish it; returns the release root."""
    write_shards(encode((REPO / "README.md").read_text()), work / "shards", shard_tokens=1 << 20)
    sets = {
        "data.source": work / "shards",
        "data.cache_dir": work / "data-cache",
        "checkpoint.uri": work / "ckpt",
        "checkpoint.async_save": "false",
        "train.steps": 1,
        "train.micro_batch": 1,
        "train.grad_accum": 1,
        "metrics.port_base": 0,
        "model.n_layer": args.layers,
        "model.d_model": args.d_model,
        "model.n_head": max(1, args.d_model // 64),
        "model.seq_len": args.context,
    }
    cmd = [sys.executable, "-m", "trainer.train", "--config", str(REPO / "trainer/configs/debug.toml")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, cwd=REPO, env=env({}), check=True, capture_output=True, timeout=600)
    root = work / "releases"
    subprocess.run(
        [sys.executable, "-m", "trainer.publish", "--checkpoint", str(work / "ckpt"),
         "--release-root", str(root), "--model-name", MODEL],
        cwd=REPO, env=env({}), check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return str(root)


class Server:
    """``python -m inference.serve`` on a free port."""

    def __init__(self, root: str, work: Path, max_batch: int, args: argparse.Namespace) -> None:
        self.port = free_port()
        self.log = work / f"server-batch{max_batch}.log"
        settings = {
            "INFERENCE_RELEASE_ROOT": root,
            "INFERENCE_MODEL_NAME": MODEL,
            "INFERENCE_CACHE_DIR": str(work / f"cache-{max_batch}"),
            "INFERENCE_HOST": "127.0.0.1",
            "INFERENCE_HTTP_PORT": str(self.port),
            "INFERENCE_MAX_BATCH": str(max_batch),
            "INFERENCE_MAX_WAIT_MS": str(args.max_wait_ms),
            "INFERENCE_MAX_QUEUE": str(max(256, args.clients * 2)),
            "INFERENCE_TORCH_THREADS": str(args.torch_threads),
            "INFERENCE_POLL_INTERVAL_S": "3600",
        }
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "inference.serve"], cwd=REPO, env=env(settings), stdout=out, stderr=out
            )
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        self.context = json.loads(
                            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/model").read()
                        )["context_tokens"]
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not become ready:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def run_clients(port: int, clients: int, requests: int, max_new: int, context: int) -> dict[str, float]:
    """``requests`` generations spread over ``clients`` threads; latency of each, wall time of all."""
    latencies: list[float] = []
    tokens = [0]
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            prompt = PROMPTS[i % len(PROMPTS)][: max(0, context - max_new - 1)]
            body = json.dumps({"prompt": prompt, "max_new_tokens": max_new, "temperature": 0})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/generate", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            dt = time.perf_counter() - t0
            with lock:
                if resp.status != 200:
                    errors.append(f"{resp.status} {data}")
                else:
                    latencies.append(dt)
                    tokens[0] += data["generated_tokens"]
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, e.g. {errors[:3]}")
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "rps": len(latencies) / wall,
        "tps": tokens[0] / wall,
        "p50": statistics.median(latencies) * 1000,
        "p99": q[98] * 1000,
        "n": len(latencies),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=192, help="per concurrent case")
    ap.add_argument("--single-requests", type=int, default=32, help="for the one-client baseline")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--torch-threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-inference-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        root = make_release(work, args)
        print(
            f"model: {args.layers} layers, d_model {args.d_model}, context {args.context}; trained and "
            f"published in {time.perf_counter() - t0:.1f}s; {args.max_new_tokens} new tokens per request, "
            f"torch threads {args.torch_threads}"
        )
        rows: dict[str, dict[str, float]] = {}
        for max_batch in (args.max_batch, 1):
            server = Server(root, work, max_batch, args)
            try:
                run_clients(server.port, 2, 8, args.max_new_tokens, server.context)  # warm-up
                if max_batch != 1:
                    rows["single"] = run_clients(
                        server.port, 1, args.single_requests, args.max_new_tokens, server.context
                    )
                name = f"concurrent x{args.clients}, " + ("batched" if max_batch != 1 else "max_batch=1")
                rows[name] = run_clients(
                    server.port, args.clients, args.requests, args.max_new_tokens, server.context
                )
            finally:
                server.stop()
    print(f"{'case':36} {'req/s':>8} {'tok/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'n':>5}")
    for name, r in rows.items():
        print(f"{name:36} {r['rps']:8.2f} {r['tps']:9.1f} {r['p50']:9.1f} {r['p99']:9.1f} {int(r['n']):5d}")
    single, batched, unbatched = rows.values()
    print(f"throughput, concurrent batched / single:   {batched['rps'] / single['rps']:.2f}x")
    print(f"throughput, concurrent batched / max_batch=1: {batched['rps'] / unbatched['rps']:.2f}x")
    print(f"p50 latency, concurrent batched / single:  {batched['p50'] / single['p50']:.2f}x")


if __name__ == "__main__":
    main()
