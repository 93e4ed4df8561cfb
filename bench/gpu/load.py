"""Concurrent streaming clients against vLLM's OpenAI completions endpoint (stdlib only: the GPU check's
client needs nothing vLLM does not bring). Each request asks for exactly ``max_tokens`` tokens
(``ignore_eos``, vLLM's extra sampling parameter) and reads the usage vLLM sends at the end of the stream."""

from __future__ import annotations

import http.client
import json
import threading
import time

from bench.gpu.stats import LoadRun, Request, sse_payloads

PROMPTS = [
    "The platform trains models in the United States and serves them in",
    "A checkpoint is committed once its manifest",
    "Kubernetes schedules the inference pods on nodes with",
    "The release folder holds a config, the weights and",
]


def one_request(host: str, port: int, model: str, prompt: str, max_tokens: int, timeout: float) -> Request:
    """One streamed completion; raises on an HTTP error or a stream without usage."""
    body = json.dumps(
        {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
         "stream": True, "stream_options": {"include_usage": True}}
    )  # fmt: skip
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.perf_counter()
    ttft = None
    tokens = None
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        for payload in sse_payloads(iter(resp.readline, b"")):
            choices = payload.get("choices") or []
            if ttft is None and choices and choices[0].get("text"):
                ttft = time.perf_counter() - t0
            if payload.get("usage"):
                tokens = payload["usage"]["completion_tokens"]
    finally:
        conn.close()
    if ttft is None or tokens is None:
        raise RuntimeError("the stream ended without text or usage")
    return Request(ttft_s=ttft, total_s=time.perf_counter() - t0, output_tokens=tokens)


def run_level(host: str, port: int, model: str, concurrency: int, per_client: int, max_tokens: int,
              timeout: float) -> LoadRun:  # fmt: skip
    """``concurrency`` clients, each sending ``per_client`` requests one after another."""
    results: list[Request] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        for k in range(per_client):
            try:
                r = one_request(host, port, model, PROMPTS[(i + k) % len(PROMPTS)], max_tokens, timeout)
            except Exception as exc:  # reported below: a failed request fails the check
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} of {concurrency * per_client} requests failed: {errors[0]}")
    return LoadRun(concurrency=concurrency, requests=results, wall_s=wall)


def run_levels(host: str, port: int, model: str, levels: tuple[int, ...], max_tokens: int,
               deadline: float) -> list[LoadRun]:  # fmt: skip
    """A warm-up request, then each level with at least 32 requests (and 2 per client)."""
    one_request(host, port, model, PROMPTS[0], max_tokens, timeout=120)
    runs = []
    for c in levels:
        left = deadline - time.monotonic()
        if left < 10:
            raise RuntimeError(f"out of time before the {c}-client run")
        per_client = max(2, 32 // c)
        runs.append(run_level(host, port, model, c, per_client, max_tokens, timeout=left))
        print(f"{c} clients: {runs[-1].output_tokens_per_s:,.0f} output tokens/s", flush=True)
    return runs
