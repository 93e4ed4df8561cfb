"""Dynamic batching: concurrent generation requests share one forward pass per step.

One worker thread owns the model's compute (HTTP handlers only enqueue and wait, so ``/healthz`` and
``/metrics`` answer while the model works). When idle it takes the first waiting request, collects more
until ``max_batch`` rows or ``max_wait_ms`` have passed, prefills them as one left-padded batch
(inference/engine.py) and then generates for all rows with one forward per step. Requests that arrive
while a batch runs join it at the next step (prefilled as a group, their cache merged in), up to
``max_batch`` rows, so a new request never waits for a long generation to finish; rows that are done
(``max_new_tokens`` reached, end-of-text generated, or the client gone) leave at once.

A running batch stays on the model it started with; after a swap (inference/store.py), new requests wait
until that batch is done and then start on the new model, so no request ever mixes two models.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

import torch

from inference.config import ServerConfig
from inference.engine import KVCache, decode, prefill, sample
from inference.metrics import Metrics
from inference.store import LoadedModel

log = logging.getLogger(__name__)


class Unavailable(Exception):
    """The request cannot be taken now (503): no model, queue full, or shutting down."""


@dataclass(frozen=True)
class Result:
    """A finished generation."""

    tokens: list[int]
    finish_reason: str  # "length" (max_new_tokens reached) or "eot" (the model ended the text)
    model: LoadedModel
    queued_s: float  # from accepting the request to its prefill


@dataclass(eq=False)
class Job:
    """One request as the batcher sees it."""

    prompt: list[int]
    max_new_tokens: int
    temperature: float
    top_k: int
    future: Future[Result] = field(default_factory=Future)
    accepted_at: float = field(default_factory=time.monotonic)
    started_at: float = 0.0
    out: list[int] = field(default_factory=list)

    def finish(self, reason: str, model: LoadedModel) -> None:
        """Deliver the result (unless the waiting side gave up: then nothing to do)."""
        result = Result(list(self.out), reason, model, self.started_at - self.accepted_at)
        with contextlib.suppress(InvalidStateError):
            self.future.set_result(result)

    def fail(self, exc: Exception) -> None:
        """Deliver an error."""
        with contextlib.suppress(InvalidStateError):
            self.future.set_exception(exc)


@dataclass
class _Running:
    model: LoadedModel
    jobs: list[Job]
    cache: KVCache
    logits: torch.Tensor  # (rows, vocab): next-token logits of every row


class Batcher:
    """The generation worker; :meth:`submit` from any thread, results through each job's future."""

    def __init__(
        self, current: Callable[[], LoadedModel | None], cfg: ServerConfig, metrics: Metrics
    ) -> None:
        self.current = current  # the store's serving model, read at the start of every batch
        self.cfg = cfg
        self.metrics = metrics
        self._queue: queue.Queue[Job] = queue.Queue(maxsize=cfg.max_queue)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: _Running | None = None

    # ----------------------------------------------------------------------------------------- API
    def submit(self, job: Job) -> None:
        """Queue ``job``; :class:`Unavailable` when stopping or the queue is full."""
        if self._stop.is_set():
            raise Unavailable("the server is shutting down")
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise Unavailable(f"{self.cfg.max_queue} requests are already waiting; retry shortly") from None
        self.metrics.queue_depth.inc()

    def start(self) -> None:
        """Start the worker thread."""
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the worker; requests still queued or running get :class:`Unavailable`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        leftovers = list(self._running.jobs) if self._running else []
        self._running = None
        while True:
            try:
                leftovers.append(self._take_nowait())
            except queue.Empty:
                break
        for job in leftovers:
            job.fail(Unavailable("the server shut down before this request finished"))

    # ---------------------------------------------------------------------------------------- loop
    def _take_nowait(self) -> Job:
        job = self._queue.get_nowait()
        self.metrics.queue_depth.dec()
        return job

    def _take_up_to(self, n: int, deadline: float | None) -> list[Job]:
        """Up to ``n`` queued jobs, waiting for more until ``deadline`` (monotonic) if one is given."""
        jobs: list[Job] = []
        while len(jobs) < n:
            try:
                if deadline is None:
                    jobs.append(self._take_nowait())
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    jobs.append(self._queue.get(timeout=left))
                    self.metrics.queue_depth.dec()
            except queue.Empty:
                break
        return jobs

    def _loop(self) -> None:
        while not self._stop.is_set():
            run = self._running
            try:
                if run is None:
                    try:
                        first = self._queue.get(timeout=0.05)
                    except queue.Empty:
                        continue
                    self.metrics.queue_depth.dec()
                    deadline = time.monotonic() + self.cfg.max_wait_ms / 1000
                    jobs = [first, *self._take_up_to(self.cfg.max_batch - 1, deadline)]
                    model = self.current()
                    if model is None:
                        for job in jobs:
                            job.fail(Unavailable("no verified model is loaded"))
                        continue
                    run = self._running = self._prefill(model, jobs)
                elif run.model is self.current() and len(run.jobs) < self.cfg.max_batch:
                    joining = self._take_up_to(self.cfg.max_batch - len(run.jobs), None)
                    new = self._prefill(run.model, joining) if joining else None
                    if new is not None:
                        run.jobs += new.jobs
                        run.cache = run.cache.merge(new.cache)
                        run.logits = torch.cat([run.logits, new.logits])
                if run is not None:
                    self._running = self._step(run)
            except Exception as exc:  # e.g. CUDA out of memory: fail this batch, keep serving
                jobs = list(run.jobs) if run else []
                self._running = None
                log.error("generation failed for %d request(s): %s: %s", len(jobs), type(exc).__name__, exc)
                for job in jobs:
                    job.fail(RuntimeError(f"generation failed: {type(exc).__name__}"))
            if self.cfg.debug_step_delay_ms:
                time.sleep(self.cfg.debug_step_delay_ms / 1000)

    def _prefill(self, model: LoadedModel, jobs: list[Job]) -> _Running | None:
        fits = []
        for job in jobs:
            if job.future.done():  # abandoned while queued (timed out)
                continue
            # The handler checked this against the model of that moment; a swap can intervene.
            if len(job.prompt) + job.max_new_tokens > model.context:
                job.fail(
                    ValueError(f"prompt + max_new_tokens is over the model's context of {model.context}")
                )
            else:
                fits.append(job)
        if not fits:
            return None
        jobs = fits
        now = time.monotonic()
        for job in jobs:
            job.started_at = now
        self.metrics.batch_size.labels("prefill").observe(len(jobs))
        try:
            logits, cache = prefill(model.model, [j.prompt for j in jobs])
        except Exception:
            for job in jobs:  # these are not in the running batch yet: fail them here
                job.fail(RuntimeError("generation failed while reading the prompt"))
            raise
        return _Running(model, jobs, cache, logits)

    def _step(self, run: _Running) -> _Running | None:
        """Sample one token for every row, finish the rows that are done, run one forward for the rest."""
        jobs, tok = run.jobs, run.model.tokenizer
        temps = torch.tensor([j.temperature for j in jobs])
        top_k = torch.tensor([j.top_k for j in jobs], dtype=torch.long)
        tokens = sample(run.logits, temps, top_k, tok.vocab_size).cpu()
        now = time.monotonic()
        keep: list[int] = []
        produced = 0
        for row, (job, t) in enumerate(zip(jobs, tokens.tolist(), strict=True)):
            if job.future.done():  # the client gave up (timeout): drop the row
                continue
            if not job.out:
                self.metrics.first_token.observe(now - job.accepted_at)
            if t == tok.eot:
                job.finish("eot", run.model)
                continue
            job.out.append(t)
            produced += 1
            if len(job.out) >= job.max_new_tokens:
                job.finish("length", run.model)
                continue
            keep.append(row)
        self.metrics.generated(produced)
        if not keep:
            return None
        cache = run.cache
        if len(keep) < len(jobs):
            idx = torch.tensor(keep, device=run.logits.device)
            cache = cache.select(idx)
            tokens = tokens[keep]
        self.metrics.batch_size.labels("decode").observe(len(keep))
        logits, cache = decode(run.model.model, cache, tokens)
        return _Running(run.model, [jobs[i] for i in keep], cache, logits)
