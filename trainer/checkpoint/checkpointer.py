"""Sharded, asynchronous, verifiable checkpoints with ``torch.distributed.checkpoint`` (DCP).

Save (every ``interval`` steps, at the last step and on SIGTERM): ``dcp.async_save`` stages into reused
host buffers (the only time the loop blocks) and writes ``step_N/<attempt>/``
(https://pytorch.org/docs/stable/distributed.checkpoint.html); a commit thread then has rank 0 write
``manifest.json`` last and create-only, the moment the checkpoint counts, and prune to ``keep``.
Invariants: a store outage after staging is a failed save (``on_save_failure``), never an exception in the
training loop; DCP and the commit use their own gloo group (``train.dist_timeout_s``), as torchtitan does;
at most one save is in flight.

Load: the newest checkpoint whose manifest, files, sizes and step check out, each rank hashing its share;
``trainer/checkpoint/manifest.py`` decides whether to resume from it. What fails is skipped with one warning.
"""

from __future__ import annotations

import datetime
import json
import logging
import secrets
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer.checkpoint.manifest import FORMAT, CheckpointManifest, ManifestError, parse_manifest
from trainer.checkpoint.store import STEP_RE, LocalStore, S3Store, make_store
from trainer.config import CheckpointConfig
from trainer.errors import BadInput, BlobExists, BlobNotFound, StoreUnavailable, TrainerError
from trainer.storage.blobstore import retry_unavailable
from trainer.storage.hashing import MANIFEST
from trainer.training.distributed import DistInfo, error_for_code

log = logging.getLogger(__name__)

Store = LocalStore | S3Store
KNOB = "checkpoint.store_wait_s"


@dataclass
class SaveResult:
    """Outcome of one save, the same on every rank."""

    step: int
    committed: bool
    error: str
    blocked_s: float  # time the training loop was blocked (staging for async saves)
    duration_s: float  # start of the save to manifest written
    bytes: int


@dataclass
class Restored:
    """The checkpoint a run resumed from."""

    manifest: CheckpointManifest
    verified_files: int  # files this rank hashed
    verified_bytes: int
    notes: list[str] = field(default_factory=list)  # allowed changes (dataset, global batch) to log


def describe_error(exc: BaseException) -> str:
    """One line per failing rank with the root cause (DCP wraps per-rank exceptions with tracebacks)."""
    if isinstance(exc, CheckpointException):
        parts = []
        for rank, failure in sorted(exc.failures.items()):
            cause = failure[0] if isinstance(failure, tuple) else failure
            parts.append(f"rank {rank}: {type(cause).__name__}: {cause}")
        return "; ".join(parts)
    return f"{type(exc).__name__}: {exc}"


def new_attempt_id() -> str:
    """``attempt-<UTC time>-<random>``: the folder one training attempt writes its shards into."""
    return f"attempt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


# ------------------------------------------------------------------------------------------- inspect
def inspect_checkpoint(store: Store, step: int) -> CheckpointManifest:
    """The manifest of ``step`` if it type-checks and every file it names is there with its size.
    Raises :class:`ManifestError` (the reason to skip it); store errors pass through."""
    try:
        raw = store.read_bytes(step, MANIFEST)
    except BlobNotFound:
        raise ManifestError(f"no {MANIFEST} (the save did not finish)") from None
    m = parse_manifest(raw, step)
    present = store.list_files(step, m.attempt)
    if m.attempt and not present:  # else the first file named would be reported, e.g. ".metadata missing"
        raise ManifestError(f"attempt folder {m.attempt}/ is missing or empty (named in {MANIFEST})")
    for name, entry in sorted(m.files.items()):
        if name not in present:
            raise ManifestError(f"{name} missing")
        if present[name] != entry.size:
            raise ManifestError(f"{name} has {present[name]} bytes, {MANIFEST} says {entry.size}")
    return m


def read_saved_step(store: Store, m: CheckpointManifest) -> int:
    """The step recorded inside the saved state (one small DCP read in this process, no collective)."""
    sd: dict[str, Any] = {"extra": {"step": -1}}
    with warnings.catch_warnings():  # DCP warns that no_dist means "a single process": intended
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(sd, storage_reader=store.reader(m.step, m.attempt), no_dist=True)
    return int(sd["extra"]["step"])


def check_saved_step(store: Store, m: CheckpointManifest, wait_s: float = 0) -> None:
    """Raise :class:`ManifestError` unless the saved state is the step the folder and manifest name.
    A read that fails while the store does not answer is an outage (:class:`StoreUnavailable`), not a
    reason to skip."""
    try:
        saved = read_saved_step(store, m)
    except (Exception, CheckpointException) as exc:
        retry_unavailable(store.blobs.check, wait_s, f"checkpoint.uri={store.root}", KNOB)
        raise ManifestError(f"saved state unreadable ({describe_error(exc)[:300]})") from None
    if saved != m.step:
        raise ManifestError(f"saved state is step {saved}, folder and manifest say {m.step}")


def validated_manifest(store: Store, step: int, verify_hashes: bool) -> CheckpointManifest:
    """The manifest of ``step`` if the checkpoint is complete and intact (checked in this process); else
    :class:`ManifestError` with the reason."""
    m = inspect_checkpoint(store, step)
    if verify_hashes:
        for name, entry in sorted(m.files.items()):
            if store.sha256(step, name, m.attempt) != entry.sha256:
                raise ManifestError(f"{name} sha256 mismatch")
    check_saved_step(store, m)
    return m


def validate_checkpoint(store: Store, step: int, verify_hashes: bool) -> str:
    """ "" if the checkpoint at ``step`` is complete and intact (in this process), else the reason."""
    try:
        validated_manifest(store, step, verify_hashes)
    except ManifestError as exc:
        return str(exc)
    return ""


def _share(files: dict[str, Any], world: int) -> list[list[str]]:
    """Files per rank for hashing: biggest first to the least loaded rank (same on every rank)."""
    load = [0] * world
    out: list[list[str]] = [[] for _ in range(world)]
    for name, entry in sorted(files.items(), key=lambda kv: (-kv[1].size, kv[0])):
        r = min(range(world), key=lambda i: (load[i], i))
        out[r].append(name)
        load[r] += entry.size
    return out


# ------------------------------------------------------------------------------------- checkpointer
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
        timeout_s: float = 300.0,
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
        self.enabled = bool(cfg.uri)
        self.store = (
            make_store(cfg.uri, cfg.s3_region, cfg.s3_endpoint, cfg.s3_max_attempts) if self.enabled else None
        )
        # A gloo group used only by checkpoint threads (see module docstring); torch's default timeout
        # would be 30 minutes, longer than the run's own collective timeout.
        self.pg = (
            dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
            if self.enabled
            else None
        )
        self.attempt = self._bcast(new_attempt_id() if info.is_main else None) if self.enabled else ""
        self._stager: Any = None
        if self.enabled and cfg.async_save:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

            # One set of host buffers, refilled at every save: allocating (and page-faulting) a fresh copy
            # of the state each time was most of the loop's blocked time. Safe because a save starts only
            # after the previous one finished reading its buffers.
            self._stager = DefaultStager(
                StagingOptions(
                    use_pinned_memory=torch.cuda.is_available(),
                    use_shared_memory=False,
                    use_async_staging=False,
                    use_non_blocking_copy=False,
                )
            )
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-commit")
        self._pending: Future[SaveResult] | None = None
        self.pending_step: int | None = None
        self._done: list[SaveResult] = []
        self._metrics: dict[str, Any] | None = None
        # Rank 0: steps checked for pruning ("" = verified, else the reason), and steps this attempt found
        # unusable at start, whose manifest it may replace when it reaches that step again.
        self._checked: dict[int, str] = {}
        self._replaceable: set[int] = set()
        self.last_committed_step = -1
        self.last_result: SaveResult | None = None

    def _bcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (over the checkpoint group)."""
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.pg)
        return box[0]

    @property
    def wait_s(self) -> float:
        """How long to retry an unreachable store before giving up (``checkpoint.store_wait_s``)."""
        return self.cfg.store_wait_s

    def _retry(self, fn: Callable[[], Any], *, bounded: bool = True) -> Any:
        assert self.store is not None
        return retry_unavailable(fn, self.wait_s, f"checkpoint.uri={self.store.root}", KNOB, bounded=bounded)

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
        self.pending_step = None
        self.last_result = res
        self._done.append(res)
        if res.committed:
            self.last_committed_step = res.step
            self._warn_shutdown_window(res)

    def _warn_shutdown_window(self, res: SaveResult) -> None:
        """Compare what a SIGTERM right now could cost with ``checkpoint.shutdown_window_s``: with async
        saves, SIGTERM can land just after the loop moved past a save's step, so the trainer first waits for
        that save, then saves the current step (about as long again)."""
        in_flight = res.duration_s if self.cfg.async_save else 0.0
        worst = in_flight + res.duration_s
        if worst > self.cfg.shutdown_window_s:
            log.warning(
                "a SIGTERM now could need up to %.1fs to checkpoint (finish the save in flight: up to %.1fs, "
                "then save the current step: about %.1fs), more than checkpoint.shutdown_window_s=%gs: "
                "raise the launcher's --shutdown-timeout / terminationGracePeriodSeconds and the window",
                worst,
                in_flight,
                res.duration_s,
                self.cfg.shutdown_window_s,
            )

    def window_skip(self, step: int, deadline: float | None) -> str:
        """Why a save of ``step`` must not start ("" if it may), the same on every rank (collective).

        ``deadline`` is this rank's end of the preemption window (``time.monotonic()`` of SIGTERM plus the
        window; ``None`` without SIGTERM). A save expected to outlast it (estimate: the last save's
        duration) would be cut by SIGKILL half-written and replace nothing, so it is skipped and said so:
        the next attempt resumes from the last committed step. With no save yet there is no estimate."""
        if not self.enabled:
            return ""
        mine = ""
        last = self.last_result
        if deadline is not None and last is not None:
            left = deadline - time.monotonic()
            if last.duration_s > left:
                mine = (
                    f"the last save (step {last.step}) took {last.duration_s:.1f}s and "
                    f"{max(left, 0.0):.1f}s of the preemption window are left"
                )
        gathered: list[Any] = [None] * self.info.world_size
        dist.all_gather_object(gathered, mine, group=self.pg)
        reason = next((r for r in gathered if r), "")
        if reason and self.info.is_main:
            done = self.last_committed_step
            log.warning(
                "not saving step %d: %s; the next attempt resumes from %s",
                step,
                reason,
                f"step {done}" if done >= 0 else "the newest committed checkpoint (or the beginning)",
            )
        return reason

    def save(
        self, step: int, blocking: bool = False, metrics: dict[str, Any] | None = None
    ) -> SaveResult | None:
        """Start a checkpoint of the state after ``step``; with ``blocking`` wait and return its result.
        ``metrics`` (the trainer's step record) goes into the manifest.

        Every rank must call this at the same step (it is collective). Results also go to :meth:`drain`.
        No storage request runs on the calling thread: failures arrive as a :class:`SaveResult`."""
        if not self.enabled:
            return None
        self.wait()  # at most one save in flight
        assert self.store is not None
        self._metrics = metrics
        t0 = time.perf_counter()
        upload: Future[Any]
        hfs: Any = None
        try:
            writer, hfs = self.store.writer(step, self.attempt)
            state = self._state(step)
            if self.cfg.async_save:
                # Returns once the state is copied to host memory; the writes run in a DCP thread.
                upload = dcp.async_save(  # type: ignore[assignment]
                    state, storage_writer=writer, process_group=self.pg, async_stager=self._stager
                )
            else:
                upload = Future()
                upload.set_result(dcp.save(state, storage_writer=writer, process_group=self.pg))
        except (Exception, CheckpointException) as exc:  # same handling as an async failure
            upload = Future()
            upload.set_exception(exc)
        blocked = time.perf_counter() - t0
        self.pending_step = step
        self._pending = self._pool.submit(self._commit, step, upload, hfs, t0, blocked)
        if blocking:
            self.wait()
            return self.last_result
        return None

    def _commit(self, step: int, upload: Future[Any], hfs: Any, t0: float, blocked: float) -> SaveResult:
        """Runs in the commit thread of every rank: wait for DCP, then rank 0 writes the manifest."""
        ok, err = True, ""
        try:
            upload.result()
        # DCP's CheckpointException derives from BaseException, not Exception.
        except (Exception, CheckpointException) as exc:
            ok, err = False, describe_error(exc)
        recorded = dict(hfs.files) if hfs is not None else {}
        gathered: list[Any] = [None] * self.info.world_size
        dist.all_gather_object(gathered, (ok, err, recorded), group=self.pg)
        committed, error, nbytes = False, "", 0
        if self.info.is_main:
            errors = [e for (o, e, _) in gathered if not o]
            if errors:
                error = errors[0][:2000]
            else:
                files: dict[str, dict[str, Any]] = {}
                for _, _, rec in gathered:
                    for name, (size, sha) in rec.items():
                        files[name] = {"size": size, "sha256": sha}
                nbytes = sum(f["size"] for f in files.values())
                manifest = {
                    "format": FORMAT,
                    "step": step,
                    "attempt": self.attempt,
                    "world_size": self.info.world_size,
                    "created_unix": time.time(),
                    "files": files,
                    "config": self.job_config,
                    **self.manifest_info,
                    "metrics": self._metrics,
                }
                try:
                    self._write_manifest(step, json.dumps(manifest, indent=1).encode())
                    committed = True
                except Exception as exc:
                    error = f"writing {MANIFEST}: {exc}"
            if committed:
                self._checked[step] = ""
                try:
                    self._prune(step)
                except Exception as exc:  # pruning is best effort; the next commit tries again
                    log.warning("pruning old checkpoints failed: %s", exc)
        committed, error, nbytes = self._bcast((committed, error, nbytes))
        return SaveResult(step, committed, error, blocked, time.perf_counter() - t0, nbytes)

    def _write_manifest(self, step: int, data: bytes) -> None:
        """Create-only: a committed checkpoint is never replaced, except one this attempt found unusable
        at start (it may write that step again)."""
        assert self.store is not None
        try:
            self.store.write_bytes(step, MANIFEST, data, create_only=True)
            return
        except BlobExists:
            if step not in self._replaceable:
                try:
                    other = json.loads(self.store.read_bytes(step, MANIFEST)).get("attempt", "?")
                except Exception:
                    other = "?"
                raise RuntimeError(
                    f"step {step} is already committed by {other} (this is {self.attempt}; a leftover "
                    "process of an earlier attempt?); not replaced"
                ) from None
        self.store.delete_file(step, MANIFEST)
        self._replaceable.discard(step)
        self.store.write_bytes(step, MANIFEST, data, create_only=True)

    def _verified(self, step: int) -> bool:
        """Rank 0: the checkpoint at ``step`` is complete and its state is that step (cached)."""
        assert self.store is not None
        if step not in self._checked:
            try:
                check_saved_step(self.store, inspect_checkpoint(self.store, step))
                self._checked[step] = ""
            except ManifestError as exc:
                self._checked[step] = str(exc)
        return not self._checked[step]

    def _prune(self, newest: int) -> None:
        """Keep the newest ``keep`` verified checkpoints; drop other folders older than ``newest``."""
        assert self.store is not None
        steps = self.store.list_steps()
        valid = [s for s in steps if s == newest or self._verified(s)]
        for s in valid[: -self.cfg.keep]:
            self.store.delete(s)
            self._checked.pop(s, None)
        for s in steps:
            if s not in valid and s < newest:
                self.store.delete(s)
                self._checked.pop(s, None)

    # ------------------------------------------------------------------------------------------ load
    def find_latest_valid(self) -> int:
        """Newest intact checkpoint's step, agreed by all ranks; -1 if none (nothing is loaded)."""
        found = self._discover(load=False)
        return found.manifest.step if found else -1

    def restore(self, check: Callable[[CheckpointManifest], list[str]] | None = None) -> Restored | None:
        """Load the newest intact checkpoint that ``check`` accepts (it raises :class:`BadInput` to refuse
        and returns notes to log); ``None`` when there is none (a fresh start). Collective."""
        return self._discover(load=True, check=check)

    def _discover(
        self, *, load: bool, check: Callable[[CheckpointManifest], list[str]] | None = None
    ) -> Restored | None:
        if not self.enabled:
            return None
        assert self.store is not None
        below: int | None = None
        steps: list[int] | None = None
        while True:
            payload: Any = None
            if self.info.is_main:
                try:
                    if steps is None:
                        steps = self._retry(self.store.list_steps)
                    payload = ("ok", self._next_candidate(steps, below))
                except TrainerError as exc:
                    payload = ("error", exc.code, str(exc))
            payload = self._bcast(payload)
            if payload[0] == "error":
                raise error_for_code(payload[1], payload[2])
            cand: CheckpointManifest | None = payload[1]
            if cand is None:
                return None
            below = cand.step
            notes = check(cand) if check is not None else []
            reason, nfiles, nbytes = self._verify_shared(cand) if self.cfg.verify_on_load else ("", 0, 0)
            if reason:
                if self.info.is_main:
                    log.warning("skipping checkpoint %s: %s", self.store.uri(cand.step), reason)
                    self._replaceable.add(cand.step)
                    self._checked[cand.step] = reason
                continue
            if self.info.is_main:
                self._checked[cand.step] = ""  # verified just now: pruning need not read it again
            if load:
                self._load(cand)
            return Restored(cand, nfiles, nbytes, notes)

    def _next_candidate(self, steps: list[int], below: int | None) -> CheckpointManifest | None:
        """Rank 0: the newest checkpoint under ``below`` whose manifest, files and saved step agree."""
        assert self.store is not None
        store = self.store
        for step in reversed(steps):
            if below is not None and step >= below:
                continue
            try:
                m = self._retry(lambda s=step: inspect_checkpoint(store, s))  # type: ignore[misc]
                check_saved_step(store, m, self.wait_s)
                return m
            except ManifestError as exc:
                log.warning("skipping checkpoint %s: %s", store.uri(step), exc)
                self._replaceable.add(step)
                self._checked[step] = str(exc)
        return None

    def _verify_shared(self, m: CheckpointManifest) -> tuple[str, int, int]:
        """Every rank hashes its share of the files; returns (first mismatch or "", files, bytes hashed
        by this rank). An unreachable store raises :class:`StoreUnavailable` on every rank."""
        assert self.store is not None
        store = self.store
        mine = _share(m.files, self.info.world_size)[self.info.rank]
        bad, err, nbytes = [], "", 0
        for name in mine:
            try:
                # Streamed, any size: a stall ends at the client's read timeout, not at a total bound.
                sha = self._retry(lambda n=name: store.sha256(m.step, n, m.attempt), bounded=False)  # type: ignore[misc]
            except BlobNotFound:
                bad.append(f"{name} missing")
                continue
            except TrainerError as exc:
                err = str(exc)
                break
            nbytes += m.files[name].size
            if sha != m.files[name].sha256:
                bad.append(f"{name} sha256 mismatch")
        gathered: list[Any] = [None] * self.info.world_size
        dist.all_gather_object(gathered, (sorted(bad), err), group=self.pg)
        if errs := [e for _, e in gathered if e]:
            raise StoreUnavailable(errs[0])
        reasons = sorted(r for b, _ in gathered for r in b)
        return (reasons[0] if reasons else ""), len(mine), nbytes

    def load(self, step: int) -> int:
        """Restore everything from the checkpoint at ``step`` (no verification); returns its step."""
        assert self.store is not None
        return self._load(inspect_checkpoint(self.store, step))

    def _load(self, m: CheckpointManifest) -> int:
        assert self.store is not None
        state = self._state(m.step)
        metadata = self.store.reader(m.step, m.attempt).read_metadata()
        rng_key = f"rng_rank{self.info.rank}"
        if not any(k.startswith(rng_key + ".") for k in metadata.state_dict_metadata):
            # Resumed with more ranks than saved: this rank has no RNG state; it keeps its seeded one.
            state.pop(rng_key)
        dcp.load(state, storage_reader=self.store.reader(m.step, m.attempt), process_group=self.pg)
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
            if self._stager is not None:
                self._stager.close()
            if self.pg is not None and dist.is_initialized():
                dist.destroy_process_group(self.pg)
                self.pg = None


# ------------------------------------------------------------------------------------ for publishing
@dataclass
class CommittedCheckpoint:
    """A committed checkpoint whose files matched its manifest when it was opened."""

    store: Store
    manifest: CheckpointManifest

    @property
    def step(self) -> int:
        """Training step of the checkpoint."""
        return self.manifest.step

    @property
    def uri(self) -> str:
        """Location of the checkpoint folder."""
        return self.store.uri(self.step)

    @property
    def run_id(self) -> str:
        """The run that wrote it (manifest ``run_id``, else the checkpoint root's last path component)."""
        return self.manifest.run_id or str(self.store.root).rstrip("/").rsplit("/", 1)[-1]

    def load_model_weights(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Only the model's tensors (no optimizer state), read into ``model.state_dict()`` in this process
        (no process group needed) and returned."""
        sd = model.state_dict()
        with warnings.catch_warnings():  # DCP warns that no_dist means "a single process": intended
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(
                {"model": sd},
                storage_reader=self.store.reader(self.step, self.manifest.attempt),
                no_dist=True,
            )
        return sd


def open_committed(uri: str, step: int | None = None) -> CommittedCheckpoint:
    """The committed checkpoint at ``step`` (newest valid one when ``None``) under the checkpoint root
    ``uri``, with every file's sha256 checked; ``uri`` may also name a ``step_XXXXXXXXX`` folder.
    Raises :class:`BadInput` when there is none."""
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
        try:
            return CommittedCheckpoint(store, validated_manifest(store, s, verify_hashes=True))
        except ManifestError as exc:
            if step is not None:
                raise BadInput(f"{store.uri(s)} is not a committed checkpoint: {exc}") from None
            log.warning("skipping checkpoint %s: %s", store.uri(s), exc)
    raise BadInput(f"no committed checkpoint under {root}")
