"""SIGTERM handling: the handler only sets a flag; the ranks agree on it once per step.

Spot reclaims and pod evictions send SIGTERM, then SIGKILL after the grace period
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html,
https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination). torchrun forwards SIGTERM
to its workers. A rank that stopped on its own would leave the others blocked in the next all-reduce,
so the flag is combined across ranks with one small all-reduce per step (MAX), and every rank checkpoints
at the same step.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType

import torch
import torch.distributed as dist


class StopFlags:
    """Local stop requests (SIGTERM, a failed checkpoint under ``on_save_failure=stop``), agreed per step."""

    def __init__(self) -> None:
        self._sigterm = threading.Event()
        # time.monotonic() of the first SIGTERM: the preemption window (and SIGKILL) counts from it
        self.sigterm_at: float | None = None
        self.save_failed = False
        self._installed = False

    def install(self) -> None:
        """Install handlers for SIGTERM and SIGINT (main thread only)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._handler)
            signal.signal(signal.SIGINT, self._handler)
            self._installed = True

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # Only set a flag: no I/O, no collectives, no exceptions (except a repeated Ctrl-C) from a handler.
        if signum == signal.SIGINT and self._sigterm.is_set():
            # A second Ctrl-C at an interactive run means "now" (what Python's default handler does).
            # SIGTERM is not escalated this way because launchers may repeat it during one shutdown.
            raise KeyboardInterrupt
        if self.sigterm_at is None:
            self.sigterm_at = time.monotonic()
        self._sigterm.set()

    @property
    def sigterm(self) -> bool:
        """True once this process received SIGTERM/SIGINT."""
        return self._sigterm.is_set()

    def request_stop(self) -> None:
        """Ask for a graceful stop as if SIGTERM had arrived (used by tests and tools)."""
        if self.sigterm_at is None:
            self.sigterm_at = time.monotonic()
        self._sigterm.set()

    def agree(self, group: dist.ProcessGroup | None = None) -> tuple[bool, bool]:
        """One all-reduce (MAX) over ``[sigterm, save_failed]``; returns the job-wide values.

        The tensor stays on the CPU so that on CUDA it travels over the gloo backend and does not add
        a NCCL launch plus device sync to every step; ``group`` (default: the default group) must have
        a CPU backend.
        """
        flags = torch.tensor([int(self.sigterm), int(self.save_failed)], dtype=torch.int32)
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=group)
        return bool(flags[0]), bool(flags[1])
