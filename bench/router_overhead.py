"""What the model-name router adds: p50/p99 latency and throughput of completions sent through the router
against the same completions sent straight to the backend, at concurrency 1, 16 and 64, in one run.

    python bench/router_overhead.py [--requests 128] [--max-tokens 1] [--concurrency 1 16 64]

The servers are the CPU test's (tests/infra/inference/router/fleet.py): the real router (the
pinned vllm-router, started with the Deployment's own command line) between two real OpenAI-compatible
servers on 127.0.0.1 (``transformers serve`` behind the vLLM pods' gate, a tiny random GPT-2 and Llama
each). Both paths send the same request (``tiny-gpt2``, the key, ``--max-tokens`` greedy tokens: 1 keeps
the backend's own time small so the router's share shows), in rounds that alternate direct and routed so
drift on a shared machine hits both. Prints one row per concurrency: p50 and p99 of each path in ms, the
added p50/p99 (router - direct, ms), throughput of each (requests/s) and the ratios router/direct; then the
same as JSON. A CPU transformers server, not vLLM on a GPU, and client, router and servers share this
machine's cores: the ratios depend on both.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.gpu.stats import percentile  # noqa: E402
from tests.infra.inference.router.fleet import completion, running_fleet  # noqa: E402

MODEL = "tiny-gpt2"


def one_round(base: str, n: int, concurrency: int, max_tokens: int) -> tuple[list[float], float]:
    """Latencies (s) of ``n`` requests ``concurrency`` at a time, and the wall time of the round."""

    def one(_: int) -> float:
        t = time.perf_counter()
        status, body = completion(base, MODEL, max_tokens=max_tokens)
        if status != 200:
            raise RuntimeError(f"{base}: {status} {body}")
        return time.perf_counter() - t

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        lat = list(pool.map(one, range(n)))
    return lat, time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=128, help="requests per path and concurrency")
    p.add_argument("--rounds", type=int, default=2, help="alternating direct/router rounds per concurrency")
    p.add_argument("--max-tokens", type=int, default=1)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_fleet(Path(tmp)) as fleet:
        direct = fleet.backends[MODEL]
        for base in (direct, fleet.router):  # warm-up: model loaded, connections made
            one_round(base, 8, 4, a.max_tokens)
        for c in a.concurrency:
            lat: dict[str, list[float]] = {"direct": [], "router": []}
            wall = {"direct": 0.0, "router": 0.0}
            per_round = max(c, a.requests // a.rounds)
            for _ in range(a.rounds):
                for name, base in (("direct", direct), ("router", fleet.router)):
                    got, took = one_round(base, per_round, c, a.max_tokens)
                    lat[name] += got
                    wall[name] += took
            f = {
                k: {"p50": percentile(v, 50), "p99": percentile(v, 99), "rps": len(v) / wall[k]}
                for k, v in lat.items()
            }
            rows.append(
                {
                    "concurrency": c,
                    "requests": len(lat["router"]),
                    "direct_p50_ms": 1e3 * f["direct"]["p50"],
                    "router_p50_ms": 1e3 * f["router"]["p50"],
                    "direct_p99_ms": 1e3 * f["direct"]["p99"],
                    "router_p99_ms": 1e3 * f["router"]["p99"],
                    "added_p50_ms": 1e3 * (f["router"]["p50"] - f["direct"]["p50"]),
                    "added_p99_ms": 1e3 * (f["router"]["p99"] - f["direct"]["p99"]),
                    "direct_rps": f["direct"]["rps"],
                    "router_rps": f["router"]["rps"],
                    "p50_ratio": f["router"]["p50"] / f["direct"]["p50"],
                    "p99_ratio": f["router"]["p99"] / f["direct"]["p99"],
                    "throughput_ratio": f["router"]["rps"] / f["direct"]["rps"],
                }
            )
    columns = {
        "conc": "concurrency",
        "p50 dir": "direct_p50_ms",
        "p50 rtr": "router_p50_ms",
        "+p50": "added_p50_ms",
        "p99 dir": "direct_p99_ms",
        "p99 rtr": "router_p99_ms",
        "+p99": "added_p99_ms",
        "rps dir": "direct_rps",
        "rps rtr": "router_rps",
        "p50 x": "p50_ratio",
        "p99 x": "p99_ratio",
        "rps x": "throughput_ratio",
    }
    print(" ".join(f"{h:>8}" for h in columns))
    for r in rows:
        cells = [r[k] for k in columns.values()]
        print(" ".join(f"{x:>8}" if isinstance(x, int) else f"{x:>8.2f}" for x in cells))
    print(
        json.dumps(
            {"backend": "transformers serve (CPU), tiny GPT-2", "max_tokens": a.max_tokens, "rows": rows}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
