"""Prometheus metrics of the server, in a registry of their own (served at ``GET /metrics``).

- ``inference_requests_total{code}`` (counter): ``POST /v1/generate`` answers by HTTP status.
- ``inference_request_duration_seconds`` (histogram): time to answer a successful generation.
- ``inference_time_to_first_token_seconds`` (histogram): from accepting a request to its first token.
- ``inference_requests_in_flight`` (gauge): generations accepted and not answered yet; the load signal
  for the HorizontalPodAutoscaler (it counts queued and running requests, which is what a GPU replica is
  busy with; CPU use says little about a GPU server).
- ``inference_queue_depth`` (gauge): of those, the ones still waiting for a batch slot.
- ``inference_generated_tokens_total`` (counter): tokens generated; ``rate()`` of it is tokens/s.
- ``inference_tokens_per_second`` (gauge): tokens generated over the last 10 s, per second.
- ``inference_batch_size{phase}`` (histogram): rows per forward pass, ``prefill`` (new requests joining)
  or ``decode`` (one step of the running batch).
- ``inference_model_info{model_name,version,step}`` (gauge): 1 for the model being served.
- ``inference_model_ready`` (gauge): 1 while a verified model is loaded and the server is not draining.
- ``inference_model_loads_total`` (counter): releases loaded and swapped in.
- ``inference_model_load_failures_total{reason}`` (counter): releases or polls that failed; reasons
  ``invalid_release``, ``load_error``, ``store_unavailable``, ``store_refused``, ``pinned_missing``.
- ``inference_model_load_duration_seconds`` (gauge): download + verify + load + warm-up of the last load.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
LOAD_FAILURE_REASONS = (
    "invalid_release",
    "load_error",
    "store_unavailable",
    "store_refused",
    "pinned_missing",
)
RATE_WINDOW_S = 10.0
# The per-pod load signal the HorizontalPodAutoscaler scales on (docs/inference/server.md); the cluster's
# autoscaler query names it too (infra/inference/documents/inference.py IN_FLIGHT_METRIC, tied by a test).
IN_FLIGHT = "inference_requests_in_flight"


class TokenRate:
    """Tokens per second over the last ``window_s`` seconds (thread-safe)."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def add(self, n: int, now: float | None = None) -> None:
        """Record ``n`` tokens generated at ``now`` (monotonic seconds)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._events.append((now, n))
            self._expire(now)  # here too, not only on a scrape: unscraped, the window would grow forever

    def value(self, now: float | None = None) -> float:
        """The rate over the window ending at ``now``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            return sum(n for _, n in self._events) / self.window_s

    def _expire(self, now: float) -> None:
        """Drop the events older than the window ending at ``now`` (the caller holds the lock)."""
        while self._events and self._events[0][0] < now - self.window_s:
            self._events.popleft()


class Metrics:
    """Every metric of the server (see the module docstring for names and meaning)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "inference_requests", "POST /v1/generate answers by HTTP status", ["code"], registry=r
        )
        self.latency = Histogram(
            "inference_request_duration_seconds",
            "Time to answer a successful generation",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.first_token = Histogram(
            "inference_time_to_first_token_seconds",
            "From accepting a request to its first generated token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(IN_FLIGHT, "Generations accepted and not answered yet", registry=r)
        self.queue_depth = Gauge(
            "inference_queue_depth", "Accepted generations waiting for a batch slot", registry=r
        )
        self.tokens = Counter("inference_generated_tokens", "Tokens generated", registry=r)
        self.token_rate = TokenRate()
        tps = Gauge(
            "inference_tokens_per_second",
            f"Tokens generated over the last {RATE_WINDOW_S:.0f}s, per second",
            registry=r,
        )
        tps.set_function(self.token_rate.value)
        self.batch_size = Histogram(
            "inference_batch_size",
            "Rows per forward pass: prefill (new requests) or decode (one step of the running batch)",
            ["phase"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.model_info = Gauge(
            "inference_model_info",
            "1 for the model being served",
            ["model_name", "version", "step"],
            registry=r,
        )
        self.ready = Gauge(
            "inference_model_ready",
            "1 while a verified model is loaded and the server is not draining",
            registry=r,
        )
        self.loads = Counter("inference_model_loads", "Releases loaded and swapped in", registry=r)
        self.load_failures = Counter(
            "inference_model_load_failures",
            "Releases or polls that failed, by reason",
            ["reason"],
            registry=r,
        )
        for reason in LOAD_FAILURE_REASONS:
            self.load_failures.labels(reason)  # every series exists from the start (rate() needs a zero)
        self.load_seconds = Gauge(
            "inference_model_load_duration_seconds",
            "Download, verify, load and warm-up time of the last model loaded",
            registry=r,
        )

    def generated(self, n: int) -> None:
        """Count ``n`` new tokens."""
        if n:
            self.tokens.inc(n)
            self.token_rate.add(n)

    def serving(self, model_name: str, version: str, step: int) -> None:
        """The model now served (the previous one's info series is removed)."""
        self.model_info.clear()
        self.model_info.labels(model_name, version, str(step)).set(1)
