"""Sharded, asynchronous, verifiable checkpoints with ``torch.distributed.checkpoint`` (DCP).

Save (every ``interval`` steps, at the last step and on SIGTERM):

1. rank 0 clears a leftover folder for this step (a failed earlier attempt);
2. ``dcp.async_save`` stages the state to host memory (the only time the loop is blocked), then a DCP
   thread writes each rank's shard and DCP's ``.metadata``
   (https://pytorch.org/docs/stable/distributed.checkpoint.html);
3. a commit thread per rank waits for that, gathers every rank's ``{file: size, sha256}`` and rank 0
   writes ``manifest.json`` **last**; only then does the checkpoint count. Rank 0 then prunes to the
   newest ``keep`` committed checkpoints.

DCP and the commit thread use a dedicated gloo group, so their collectives never interleave with the
training loop's (torchtitan does the same). A new save waits for the previous one, so at most one
checkpoint is in flight.

Load: rank 0 walks the checkpoints from newest to oldest, skips (with a warning) any without a manifest or
whose files do not match it, and broadcasts the chosen step; every rank then loads its part.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer.checkpoint_store import LocalStore, S3Store, make_store
from trainer.config import CheckpointConfig
from trainer.distributed import DistInfo
from trainer.errors import BadInput
from trainer.hashing import MANIFEST

log = logging.getLogger(__name__)

MANIFEST_FORMAT = "trainer-ckpt-v1"


@dataclass
class SaveResult:
    """Outcome of one save, the same on every rank."""

    step: int
    committed: bool
    error: str
    blocked_s: float  # time the training loop was blocked (staging for async saves)
    duration_s: float  # start of the save to manifest written
    bytes: int


def describe_error(exc: BaseException) -> str:
    """One line per failing rank with the root cause (DCP wraps per-rank exceptions with tracebacks)."""
    if isinstance(exc, CheckpointException):
        parts = []
        for rank, failure in sorted(exc.failures.items()):
            cause = failure[0] if isinstance(failure, tuple) else failure
            parts.append(f"rank {rank}: {type(cause).__name__}: {cause}")
        return "; ".join(parts)
    return f"{type(exc).__name__}: {exc}"


def validate_checkpoint(store: LocalStore | S3Store, step: int, verify_hashes: bool) -> str:
    """Return "" if the checkpoint at ``step`` is complete and intact, else the reason it is not."""
    try:
        raw = store.read_bytes(step, MANIFEST)
    except Exception as exc:  # missing object / file: not committed
        return f"no {MANIFEST} (save did not finish: {type(exc).__name__})"
    try:
        manifest = json.loads(raw)
        files: dict[str, dict[str, Any]] = manifest["files"]
        if manifest.get("format") != MANIFEST_FORMAT or manifest.get("step") != step:
            return f"{MANIFEST} is for another format/step"
    except (ValueError, KeyError, TypeError) as exc:
        return f"{MANIFEST} unreadable ({exc})"
    if ".metadata" not in files:
        return f"{MANIFEST} lists no DCP .metadata"
    present = store.list_files(step)
    for name, info in files.items():
        if name not in present:
            return f"{name} missing"
        if present[name] != info["size"]:
            return f"{name} has {present[name]} bytes, manifest says {info['size']}"
    if verify_hashes:
        for name, info in files.items():
            if store.sha256(step, name) != info["sha256"]:
                return f"{name} sha256 mismatch"
    return ""


class Checkpointer:
    """Saves and restores the training state (model, optimizer, scheduler, data position, step, RNG)."""

    def __init__(
        self,
        cfg: CheckpointConfig,
        info: DistInfo,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        extras: dict[str, Any],
        job_config: dict[str, Any] | None = None,
        manifest_info: dict[str, Any] | None = None,
    ) -> None:
        self.cfg = cfg
        self.info = info
        self.model = model
        self.optimizer = optimizer
        # Objects with state_dict()/load_state_dict() of small picklable state (scheduler, data position...).
        self.extras = extras
        self.job_config = job_config or {}
        # Written into every manifest: run_id, data (dataset fingerprint, tokenizer), ...
        self.manifest_info = manifest_info or {}
        self._metrics: dict[str, Any] | None = None
        self.enabled = bool(cfg.uri)
        self.store = (
            make_store(cfg.uri, cfg.s3_region, cfg.s3_endpoint, cfg.s3_max_attempts) if self.enabled else None
        )
        # A gloo group used only by checkpoint threads (see module docstring).
        self.pg = dist.new_group(backend="gloo") if self.enabled else None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-commit")
        self._pending: Future[SaveResult] | None = None
        self._done: list[SaveResult] = []
        self._dirs: set[int] | None = None  # step folders that may exist (listed once, then tracked)
        self.last_committed_step = -1
        self.last_result: SaveResult | None = None

    # ----------------------------------------------------------------------------------------- state
    def _state(self, step: int) -> dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        rng = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state()
        return {
            "model": model_sd,
            "optim": optim_sd,
            # Small picklable objects; DCP stores them once (deduplicated across ranks).
            "extra": {"step": step, **{k: v.state_dict() for k, v in self.extras.items()}},
            # Per-rank key: DCP would otherwise keep only one rank's copy of a replicated tensor.
            f"rng_rank{self.info.rank}": rng,
        }

    # ------------------------------------------------------------------------------------------ save
    def poll(self) -> None:
        """Collect the in-flight save's result if it finished (non-blocking); see :meth:`drain`."""
        if self._pending is not None and self._pending.done():
            self._take()

    def wait(self) -> None:
        """Block until the in-flight save (if any) is committed or failed."""
        if self._pending is not None:
            self._pending.result()
            self._take()

    def drain(self) -> list[SaveResult]:
        """Results of saves that finished since the last call (same list on every rank, in order)."""
        out, self._done = self._done, []
        return out

    def _take(self) -> None:
        assert self._pending is not None
        res = self._pending.result()
        self._pending = None
        self.last_result = res
        self._done.append(res)
        if res.committed:
            self.last_committed_step = res.step
            if res.duration_s > self.cfg.shutdown_window_s:
                log.warning(
                    "checkpoint at step %d took %.1fs, longer than checkpoint.shutdown_window_s=%.0fs: "
                    "a save on SIGTERM would be killed; raise torchrun --shutdown-timeout / "
                    "terminationGracePeriodSeconds",
                    res.step,
                    res.duration_s,
                    self.cfg.shutdown_window_s,
                )

    def save(
        self, step: int, blocking: bool = False, metrics: dict[str, Any] | None = None
    ) -> SaveResult | None:
        """Start a checkpoint of the state after ``step``; with ``blocking`` wait and return its result.
        ``metrics`` (the trainer's step record) goes into the manifest.

        Every rank must call this at the same step (it is collective). Results also go to :meth:`drain`."""
        if not self.enabled:
            return None
        self.wait()  # at most one save in flight
        self._metrics = metrics
        assert self.store is not None
        t0 = time.perf_counter()
        if self.info.is_main and step in self._existing_dirs():
            log.warning("removing leftover checkpoint folder %s before saving again", self.store.uri(step))
            self.store.delete(step)
            self._existing_dirs().discard(step)
        writer, hfs = self.store.writer(step)
        state = self._state(step)
        upload: Future[Any]
        if self.cfg.async_save:
            # Returns once the state is copied to host memory; the writes run in a DCP thread.
            upload = dcp.async_save(state, storage_writer=writer, process_group=self.pg)  # type: ignore[assignment]
        else:
            upload = Future()
            try:
                upload.set_result(dcp.save(state, storage_writer=writer, process_group=self.pg))
            except (Exception, CheckpointException) as exc:  # same handling as an async failure
                upload.set_exception(exc)
        blocked = time.perf_counter() - t0
        if self.info.is_main:
            self._existing_dirs().add(step)
        self._pending = self._pool.submit(self._commit, step, upload, hfs, t0, blocked)
        if blocking:
            self.wait()
            return self.last_result
        return None

    def _existing_dirs(self) -> set[int]:
        # One LIST per job instead of one per save keeps saves cheap for the loop on S3. A stale entry
        # (pruned meanwhile) only costs a no-op delete.
        assert self.store is not None
        if self._dirs is None:
            self._dirs = set(self.store.list_steps())
        return self._dirs

    def _commit(self, step: int, upload: Future[Any], hfs: Any, t0: float, blocked: float) -> SaveResult:
        """Runs in the commit thread of every rank: wait for DCP, then rank 0 writes the manifest."""
        ok, err = True, ""
        try:
            upload.result()
        # DCP's CheckpointException derives from BaseException, not Exception.
        except (Exception, CheckpointException) as exc:
            ok, err = False, describe_error(exc)
        gathered: list[Any] = [None] * self.info.world_size
        dist.all_gather_object(gathered, (ok, err, dict(hfs.files)), group=self.pg)
        committed, error, nbytes = False, "", 0
        if self.info.is_main:
            errors = [e for (o, e, _) in gathered if not o]
            if errors:
                error = errors[0][:2000]
            else:
                files: dict[str, dict[str, Any]] = {}
                for _, _, recorded in gathered:
                    for name, (size, sha) in recorded.items():
                        files[name] = {"size": size, "sha256": sha}
                nbytes = sum(f["size"] for f in files.values())
                manifest = {
                    "format": MANIFEST_FORMAT,
                    "step": step,
                    "world_size": self.info.world_size,
                    "created_unix": time.time(),
                    "files": files,
                    "config": self.job_config,
                    **self.manifest_info,
                    "metrics": self._metrics,
                }
                try:
                    assert self.store is not None
                    self.store.write_bytes(step, MANIFEST, json.dumps(manifest, indent=1).encode())
                    committed = True
                except Exception as exc:
                    error = f"writing {MANIFEST}: {type(exc).__name__}: {exc}"
            if committed:
                try:
                    self._prune(step)
                except Exception as exc:  # pruning is best effort; the next commit tries again
                    log.warning("pruning old checkpoints failed: %s", exc)
        obj = [(committed, error, nbytes)]
        dist.broadcast_object_list(obj, src=0, group=self.pg)
        committed, error, nbytes = obj[0]
        return SaveResult(step, committed, error, blocked, time.perf_counter() - t0, nbytes)

    def _prune(self, newest: int) -> None:
        """Keep the newest ``keep`` committed checkpoints; drop uncommitted folders older than ``newest``."""
        assert self.store is not None
        committed, partial = [], []
        for s in self.store.list_steps():
            (committed if s in (newest,) or MANIFEST in self.store.list_files(s) else partial).append(s)
        for s in committed[: -self.cfg.keep]:
            self.store.delete(s)
        for s in partial:
            if s < newest:
                self.store.delete(s)

    # ------------------------------------------------------------------------------------------ load
    def find_latest_valid(self) -> int:
        """Newest intact checkpoint's step, agreed by all ranks (rank 0 decides); -1 if none."""
        chosen = -1
        if self.enabled and self.info.is_main:
            assert self.store is not None
            for step in reversed(self.store.list_steps()):
                reason = validate_checkpoint(self.store, step, self.cfg.verify_on_load)
                if not reason:
                    chosen = step
                    break
                log.warning("skipping checkpoint %s: %s", self.store.uri(step), reason)
        if self.enabled:
            obj = [chosen]
            dist.broadcast_object_list(obj, src=0, group=self.pg)
            chosen = obj[0]
        return chosen

    def load(self, step: int) -> int:
        """Restore everything from the checkpoint at ``step``; returns the step to continue after."""
        assert self.store is not None
        state = self._state(step)
        reader = self.store.reader(step)
        metadata = reader.read_metadata()
        rng_key = f"rng_rank{self.info.rank}"
        if not any(k.startswith(rng_key + ".") for k in metadata.state_dict_metadata):
            # Resumed with more ranks than saved: this rank has no RNG state; it keeps its seeded one.
            state.pop(rng_key)
        dcp.load(state, storage_reader=self.store.reader(step), process_group=self.pg)
        set_state_dict(
            self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        extra = state["extra"]
        for key, obj in self.extras.items():
            obj.load_state_dict(extra[key])
        if rng_key in state:
            torch.set_rng_state(state[rng_key]["cpu"])
            if "cuda" in state[rng_key] and torch.cuda.is_available():
                torch.cuda.set_rng_state(state[rng_key]["cuda"])
        self.last_committed_step = int(extra["step"])
        return int(extra["step"])

    def close(self) -> None:
        """Wait for the in-flight save and stop the commit thread."""
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)


@dataclass
class CommittedCheckpoint:
    """A committed checkpoint whose files matched its manifest when it was opened."""

    store: LocalStore | S3Store
    step: int
    manifest: dict[str, Any]

    @property
    def uri(self) -> str:
        """Location of the checkpoint folder."""
        return self.store.uri(self.step)

    @property
    def run_id(self) -> str:
        """The run that wrote it (manifest ``run_id``, else the checkpoint root's last path component)."""
        rid = self.manifest.get("run_id")
        return rid if isinstance(rid, str) and rid else str(self.store.root).rstrip("/").rsplit("/", 1)[-1]

    def load_model_weights(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Only the model's tensors (no optimizer state), read into ``model.state_dict()`` in this process
        (no process group needed) and returned."""
        sd = model.state_dict()
        with warnings.catch_warnings():  # DCP warns that no_dist means "a single process": intended
            warnings.simplefilter("ignore", UserWarning)
            dcp.load({"model": sd}, storage_reader=self.store.reader(self.step), no_dist=True)
        return sd


def open_committed(uri: str, step: int | None = None) -> CommittedCheckpoint:
    """The committed checkpoint at ``step`` (newest valid one when ``None``) under the checkpoint root
    ``uri``, with every file's sha256 checked; ``uri`` may also name a ``step_XXXXXXXXX`` folder.
    Raises :class:`BadInput` when there is none."""
    from trainer.checkpoint_store import STEP_RE

    root = uri.rstrip("/")
    last = root.rsplit("/", 1)[-1]
    if m := STEP_RE.match(last):
        if step is not None and step != int(m.group(1)):
            raise BadInput(f"--checkpoint={uri} is step {int(m.group(1))}, but --step={step}")
        root, step = root[: -len(last) - 1], int(m.group(1))
    store = make_store(root)
    steps = store.list_steps()
    if step is not None and step not in steps:
        raise BadInput(f"no checkpoint for step {step} under {root} (found steps {steps[-5:]})")
    for s in [step] if step is not None else reversed(steps):
        reason = validate_checkpoint(store, s, verify_hashes=True)
        if not reason:
            return CommittedCheckpoint(store, s, json.loads(store.read_bytes(s, MANIFEST)))
        if step is not None:
            raise BadInput(f"{store.uri(s)} is not a committed checkpoint: {reason}")
        log.warning("skipping checkpoint %s: %s", store.uri(s), reason)
    raise BadInput(f"no committed checkpoint under {root}")
