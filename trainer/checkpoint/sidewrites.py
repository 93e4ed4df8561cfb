"""Side writes: storage writes that are not the checkpoint (run records), kept off the training thread.

A store that stops answering (a network partition, a stalled endpoint, a saturated NAT) does not refuse a
request: it holds it until the client's read timeout, times its retries, which is minutes. A write that is
only bookkeeping must never sit on the path of a step, a collective or the shutdown, so :class:`SideWriter`
runs such writes in one daemon thread, in the order they were submitted, and the caller only queues them.
Each write has its own deadline (``checkpoint.side_write_timeout_s`` from when it was submitted). At the end
:meth:`SideWriter.close` waits for each write until its deadline and abandons what is left with one warning
line per write; the thread, perhaps blocked in a socket read, is a daemon and does not keep the process
alive. What a rank reports (its committed checkpoint, its exit code) is decided before ``close``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class SideWrite:
    """One queued write: ``what`` names it in log lines (e.g. ``the run record s3://... (running)``)."""

    what: str
    fn: Callable[[], None]
    deadline: float  # time.monotonic() by which it should be done
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False  # finished without an error
    abandoned: bool = False  # given up at close: not started if it had not started yet


class SideWriter:
    """One background thread that runs best-effort writes, each bounded by ``timeout_s`` at shutdown;
    ``knob`` is the setting that sets the timeout (named in the warning)."""

    def __init__(self, timeout_s: float, knob: str = "checkpoint.side_write_timeout_s") -> None:
        self.timeout_s = timeout_s
        self.knob = knob
        self._queue: queue.Queue[SideWrite | None] = queue.Queue()
        self._pending: list[SideWrite] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._work, daemon=True, name="side-writes")
        self._thread.start()

    def submit(self, what: str, fn: Callable[[], None]) -> SideWrite:
        """Queue ``fn`` and return at once; an error it raises is logged by the writer thread."""
        job = SideWrite(what, fn, time.monotonic() + self.timeout_s)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"side writes are closed; {what} was not queued")
            self._pending.append(job)
        self._queue.put(job)
        return job

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                with self._lock:
                    skip = job.abandoned
                if not skip:
                    job.fn()
                    job.ok = True
            except Exception as exc:  # best effort: a refused write is logged and skipped
                log.warning("could not write %s: %s", job.what, exc)
            finally:
                job.done.set()
                with self._lock:
                    self._pending.remove(job)

    def close(self) -> list[SideWrite]:
        """Wait for every queued write until its deadline; abandon the rest (one warning each) and return
        them. Idempotent; nothing can be submitted afterwards."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            jobs = list(self._pending)
        for job in jobs:
            job.done.wait(max(0.0, job.deadline - time.monotonic()))
        with self._lock:
            abandoned = [j for j in jobs if not j.done.is_set()]
            for job in abandoned:
                job.abandoned = True
        for job in abandoned:
            log.warning(
                "abandoned %s: the store did not answer within %gs (%s)", job.what, self.timeout_s, self.knob
            )
        self._queue.put(None)  # the thread stops once it is free; not waited for if it is blocked
        return abandoned
