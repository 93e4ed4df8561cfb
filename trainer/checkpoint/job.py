"""The job contract's checkpoint helper: the bundled trainer's checkpoints for a team's own training script.

A team's script imports it (the platform ships the ``trainer`` package in its trainer image, and a team image
copies it, as ``examples/byo-llama/Dockerfile`` does) and gets what the trainer itself relies on
(docs/platform/job-contract.md, "Checkpoints"):

* every save goes to a fresh folder, ``step_N/<attempt>/`` (``torch.distributed.checkpoint``, one file per
  rank), so it never overwrites a checkpoint an earlier save committed;
* a checkpoint is **committed** once rank 0 has written ``step_N/manifest.json`` (every file's size and
  sha256), last and create-only (S3 ``If-None-Match: *``);
* :meth:`JobCheckpoint.restore` loads the newest committed checkpoint whose files match its manifest and
  nothing else: a folder without a manifest (a save cut short) is skipped;
* after SIGTERM a save that cannot finish before ``AIPLAT_PREEMPTION_WINDOW_S`` ends (estimate: the last
  save's duration) is skipped with a warning instead of being cut by SIGKILL.

::

    ckpt = JobCheckpoint(model, optimizer, model_config=config.to_dict())
    start = ckpt.restore()                      # 0 on a fresh start
    for step in range(start, steps):
        if ckpt.stop_requested():               # collective: every rank, every step
            if ckpt.last_committed_step != step:
                ckpt.save(step)                 # skipped when it cannot fit in the window
            ckpt.close()
            dist.destroy_process_group()
            return 143
        train_one_step()
        if (step + 1) % every == 0:
            ckpt.save(step + 1)
    if ckpt.last_committed_step != steps:       # a step is committed once (create-only)
        ckpt.save(steps)
    ckpt.close()                                # every rank, before destroy_process_group

``restore``, ``stop_requested``, ``save`` and ``close`` are collective: every rank calls them at the same
point. The one
implementation is :class:`trainer.checkpoint.checkpointer.Checkpointer` (this module only fills its
configuration from the job's environment).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

from trainer.checkpoint.checkpointer import Checkpointer
from trainer.config import CheckpointConfig
from trainer.run.signals import StopFlags
from trainer.training.distributed import init_distributed

log = logging.getLogger(__name__)

URI_ENV = "AIPLAT_CHECKPOINT_URI"
WINDOW_ENV = "AIPLAT_PREEMPTION_WINDOW_S"
# torchrun kills its workers this long after forwarding SIGTERM; the runtime sets it to the window less 5 s
# (docs/platform/job-contract.md), so under torchrun it is the ranks' real window.
TORCHRUN_WINDOW_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"
DEFAULT_WINDOW_S = 30.0  # the trainer's checkpoint.shutdown_window_s default


class JobCheckpoint:
    """Checkpoints of ``model`` and ``optimizer`` (plus ``extras``: objects with ``state_dict()`` and
    ``load_state_dict()``) under ``$AIPLAT_CHECKPOINT_URI``, committed by a manifest. Create it on every
    rank after ``torch.distributed.init_process_group``, with the model itself (not its DDP wrapper).
    ``model_config`` (a JSON-able dict) goes into every manifest so a checkpoint says what it holds."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        extras: dict[str, Any] | None = None,
        model_config: dict[str, Any] | None = None,
        uri: str | None = None,
        window_s: float | None = None,
        keep: int = 3,
        timeout_s: float = 600.0,
    ) -> None:
        uri = uri if uri is not None else os.environ.get(URI_ENV, "")
        if not uri:
            raise ValueError(f"{URI_ENV} is not set: the platform sets it on every pod of a team job")
        if window_s is None:
            window_s = float(os.environ.get(WINDOW_ENV) or DEFAULT_WINDOW_S)
            if os.environ.get(TORCHRUN_WINDOW_ENV):
                window_s = min(window_s, float(os.environ[TORCHRUN_WINDOW_ENV]))
        if window_s <= 0:
            raise ValueError(f"{WINDOW_ENV}={window_s:g}: the preemption window must be > 0 seconds")
        self.window_s = window_s
        self._out_of_window = False  # a save was skipped for the window: every later one would be too
        cfg = CheckpointConfig(
            uri=uri,
            keep=keep,
            # Blocking saves: save() returns with the step committed (or failed), so a team's loop needs
            # no polling; the trainer's async saves need its loop's bookkeeping.
            async_save=False,
            shutdown_window_s=window_s,
            side_write_timeout_s=window_s / 2,
        )
        # The team's script created the default group; this only reads rank, world size and device.
        self.info = init_distributed(timeout_s)
        self.flags = StopFlags()
        self.flags.install()
        self._ckpt = Checkpointer(
            cfg,
            self.info,
            model,
            optimizer,
            extras or {},
            job_config={"model": model_config or {}},
            manifest_info={"platform_attempt": os.environ.get("AIPLAT_ATTEMPT_ID", "")},
            timeout_s=timeout_s,
        )

    @property
    def attempt(self) -> str:
        """This attempt's folder name inside each step folder (``attempt-<UTC time>-<random>``)."""
        return self._ckpt.attempt

    @property
    def last_committed_step(self) -> int:
        """The newest step this process committed or restored; -1 if none."""
        return self._ckpt.last_committed_step

    def deadline(self) -> float | None:
        """``time.monotonic()`` at which the preemption window ends (SIGKILL), ``None`` before SIGTERM."""
        at = self.flags.sigterm_at
        return at + self.window_s if at is not None else None

    def restore(self) -> int:
        """Load the newest committed checkpoint (every file re-hashed against its manifest) and return its
        step; 0 when there is none. Folders without a manifest, or whose files disagree with it, are
        skipped with a warning."""
        found = self._ckpt.restore()
        return found.manifest.step if found else 0

    def stop_requested(self) -> bool:
        """Whether any rank got SIGTERM, the same answer on every rank (one small all-reduce)."""
        # Over the checkpoint's own gloo group: a CPU tensor, whatever backend the default group has (NCCL).
        return self.flags.agree(self._ckpt.pg)[0]

    def save(self, step: int) -> bool:
        """Checkpoint the state after ``step`` and commit it; True once committed. Skipped (False, with a
        warning on rank 0) after SIGTERM when the last save's duration exceeds what is left of the window.
        A failed save is logged and returns False; the previous committed checkpoint stays the newest."""
        if self._out_of_window:
            return False
        if self._ckpt.window_skip(step, self.deadline()):
            self._out_of_window = True  # agreed: every rank skips from here on
            return False
        res = self._ckpt.save(step, blocking=True)
        assert res is not None  # enabled: a uri is required above
        if not res.committed and self.info.is_main:
            log.warning("checkpoint of step %d not committed (%.1fs): %s", step, res.duration_s, res.error)
        return res.committed

    def close(self) -> None:
        """Stop the checkpoint thread and its process group (every rank, before destroying the default
        group)."""
        self._ckpt.close()
