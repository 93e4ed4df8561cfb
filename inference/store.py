"""The model store: finds the release to serve, verifies and loads it beside the one serving, swaps it in.

Each poll lists ``<release_root>/release/<model_name>/`` once and tries, newest first, the versions newer
than the one serving (or exactly ``INFERENCE_PIN_VERSION``: rollback) with ``trainer.release.download`` /
``load_model`` and a warm-up step that must give finite logits; only then is the serving model replaced.
Requests in flight finish on the model they started with, so both copies are in memory for that moment:
size the GPU for two models. A failed version is logged, counted in
``inference_model_load_failures_total{reason}`` and retried only when its objects change (replication
catching up); a store that does not answer is ``store_unavailable``, retried at the next poll.
Not ``trainer.release.newest_valid``: it re-reads every candidate's weights, and a poll that finds nothing
new must cost one LIST. Behaviour: docs/inference/server.md.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.config import ServerConfig
from inference.engine import prefill
from inference.metrics import Metrics
from inference.tokenizer import ByteTokenizer
from trainer.blobstore import open_blobs
from trainer.errors import BadInput, StoreUnavailable
from trainer.release import RELEASE_PREFIX, Release, ReleaseError, download, list_versions, load_model

log = logging.getLogger(__name__)
INCOMING = ".incoming-"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class LoadedModel:
    """A verified release in memory, ready to generate."""

    release: Release
    model: torch.nn.Module
    tokenizer: ByteTokenizer
    device: torch.device
    loaded_at: float  # time.time()

    @property
    def version(self) -> str:
        """The release version, ``<YYYYmmddTHHMMSSZ>-step<N>``."""
        return self.release.version

    @property
    def context(self) -> int:
        """Tokens the model can attend over (prompt plus generated)."""
        return int(self.release.config.seq_len)


# bfloat16 tensor-core math starts with Ampere (compute capability 8.0: A10G on g5, A100 on p4d/p4de, H100
# on p5); Turing (T4 on g4dn, 7.5) and Volta (V100, 7.0) only have float16 tensor cores, and PyTorch's
# flash / memory-efficient SDPA kernels take bfloat16 only from sm_80, so bfloat16 there runs emulated or
# on the math fallback. https://docs.nvidia.com/cuda/cuda-c-programming-guide/#compute-capabilities
# https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
BF16_MIN_CAPABILITY = (8, 0)


def auto_dtype(device: str) -> str:
    """The dtype ``auto`` means on ``device``: float32 on cpu; on cuda bfloat16 from compute capability
    8.0 (:data:`BF16_MIN_CAPABILITY`), float16 below it (review finding F11: T4 nodes in the infer pools)."""
    if device != "cuda":
        return "float32"
    return "bfloat16" if torch.cuda.get_device_capability() >= BF16_MIN_CAPABILITY else "float16"


def resolve_device(device: str, dtype: str) -> tuple[torch.device, torch.dtype]:
    """``auto`` picks cuda when a GPU is visible; :class:`ValueError` when cuda is asked for and absent.
    An ``auto`` dtype follows :func:`auto_dtype`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("no GPU is visible to torch (request nvidia.com/gpu and use the CUDA image)")
    if dtype == "auto":
        dtype = auto_dtype(device)
    return torch.device(device), DTYPES[dtype]


class ModelStore:
    """Holds the serving model (:attr:`current`) and keeps it at the newest valid (or pinned) release."""

    def __init__(self, cfg: ServerConfig, metrics: Metrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.device, self.dtype = resolve_device(cfg.device, cfg.dtype)
        self.cache = Path(cfg.cache_dir)
        self._current: LoadedModel | None = None
        self._bad: dict[str, tuple[tuple[str, int], ...]] = {}  # version -> listing it failed with
        self._last_problem = "no poll yet"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------------------- state
    @property
    def current(self) -> LoadedModel | None:
        """The model serving now (a plain reference: reading it is atomic)."""
        return self._current

    @property
    def problem(self) -> str:
        """Why no model is loaded, or why a newer release is not served ("" when all is well): for
        ``/readyz`` and ``/v1/model``."""
        return self._last_problem

    def check_cache_dir(self) -> None:
        """Create the cache directory and prove it writable (:class:`OSError` otherwise); leftovers of
        interrupted downloads are removed."""
        self.cache.mkdir(parents=True, exist_ok=True)
        probe = self.cache / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
        for stale in self.cache.glob(f"{INCOMING}*"):
            shutil.rmtree(stale, ignore_errors=True)

    # ------------------------------------------------------------------------------------------ loop
    def start(self) -> None:
        """Poll now and then every ``poll_interval_s`` in a background thread."""
        self._thread = threading.Thread(target=self._loop, name="model-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop polling (a load in progress is abandoned with the process)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # never let the poller die: the server keeps serving what it has
                self._fail("load_error", f"model poll failed: {type(exc).__name__}: {exc}")
            self._stop.wait(self.cfg.poll_interval_s)

    # ------------------------------------------------------------------------------------------ poll
    def _serving(self) -> str:
        cur = self._current
        return f"still serving {cur.version}" if cur else "no model loaded, not ready"

    def _fail(self, reason: str, message: str) -> None:
        self.metrics.load_failures.labels(reason).inc()
        self._note(message, logging.WARNING)

    def _note(self, message: str, level: int) -> None:
        """Remember ``message`` for ``/readyz``; log it when it is news (not at every poll)."""
        if message != self._last_problem:
            log.log(level, "%s; %s", message, self._serving())
        self._last_problem = message

    def candidates(self, versions: list[str]) -> list[str]:
        """Versions to try, best first: the pin, or those newer than the serving one."""
        if self.cfg.pin_version:
            cur = self._current
            return [] if cur and cur.version == self.cfg.pin_version else [self.cfg.pin_version]
        newest_first = sorted(versions, reverse=True)
        cur = self._current
        return [v for v in newest_first if cur is None or v > cur.version]

    def poll_once(self) -> bool:
        """One look at ``release/``; returns True when a new model was swapped in."""
        cfg = self.cfg
        prefix = f"{RELEASE_PREFIX}/{cfg.model_name}"
        where = f"{cfg.release_root.rstrip('/')}/{prefix}"
        try:
            versions = list_versions(cfg.release_root, cfg.model_name)
        except StoreUnavailable as exc:
            self._fail("store_unavailable", f"release store unavailable: {exc}")
            return False
        except BadInput as exc:
            self._fail("store_refused", f"release store refused the listing: {exc}")
            return False
        cur = self._current
        if cfg.pin_version and cfg.pin_version not in versions:
            if cur is None or cur.version != cfg.pin_version:
                self._fail("pinned_missing", f"INFERENCE_PIN_VERSION={cfg.pin_version} is not under {where}/")
            return False
        if not versions and cur is None:
            self._note(
                f"no release under {where}/ yet (polling every {cfg.poll_interval_s:g}s)", logging.INFO
            )
        failed = False
        for version in self.candidates(versions):
            try:
                listing = tuple(
                    sorted(open_blobs(cfg.release_root).child(f"{prefix}/{version}").list().items())
                )
            except StoreUnavailable as exc:
                self._fail("store_unavailable", f"release store unavailable: {exc}")
                return False
            if self._bad.get(version) == listing:
                continue  # failed before with exactly these objects; logged then
            try:
                loaded = self.load(version)
            except ReleaseError as exc:
                failed = True
                self._bad[version] = listing
                self._fail("invalid_release", f"release {cfg.model_name}/{version} skipped: {exc.reason}")
                continue
            except StoreUnavailable as exc:
                self._fail("store_unavailable", f"release store unavailable while reading {version}: {exc}")
                return False
            except BadInput as exc:  # access denied, bucket gone: the store's fault, not this version's
                self._fail("store_refused", f"release store refused reading {version}: {exc}")
                return False
            except Exception as exc:  # a torch or device error: this version cannot be served here
                failed = True
                self._bad[version] = listing
                self._fail(
                    "load_error",
                    f"release {cfg.model_name}/{version} failed to load: {type(exc).__name__}: {exc}",
                )
                continue
            self.swap(loaded)
            if not failed:  # else keep the reason a newer version was skipped
                self._last_problem = ""
            return True
        return False

    def load(self, version: str) -> LoadedModel:
        """Download, verify, load and warm up ``version`` (the serving model is untouched)."""
        cfg = self.cfg
        t0 = time.monotonic()
        incoming = self.cache / f"{INCOMING}{version}"
        final = self.cache / version
        shutil.rmtree(incoming, ignore_errors=True)
        try:
            release = download(cfg.release_root, cfg.model_name, version, incoming)
            tokenizer = ByteTokenizer.for_release(release.tokenizer, release.config.vocab_size)
            shutil.rmtree(final, ignore_errors=True)
            incoming.rename(final)
        finally:
            shutil.rmtree(incoming, ignore_errors=True)
        # Cast while moving: a bfloat16 model on the GPU never holds a float32 copy there.
        try:
            model = load_model(final, "cpu").to(device=self.device, dtype=self.dtype)
            logits, _ = prefill(model, [[tokenizer.eot]])
            if not bool(torch.isfinite(logits[:, : tokenizer.vocab_size]).all()):
                raise ReleaseError("the weights give non-finite logits (NaN/inf) on a warm-up step")
        except BaseException:
            cur = self._current
            if cur is None or cur.version != version:  # keep only what serves in the cache
                shutil.rmtree(final, ignore_errors=True)
            raise
        self.metrics.load_seconds.set(time.monotonic() - t0)
        return LoadedModel(release, model, tokenizer, self.device, time.time())

    def swap(self, loaded: LoadedModel) -> None:
        """Make ``loaded`` the serving model and drop the cached files of every other version."""
        previous = self._current
        self._current = loaded
        rel = loaded.release
        self.metrics.loads.inc()
        self.metrics.serving(rel.model_name, rel.version, rel.step)
        log.info(
            "serving %s/%s (step %d of run %s) on %s%s",
            rel.model_name,
            rel.version,
            rel.step,
            rel.source.run_id,
            loaded.device,
            f"; replaced {previous.version}" if previous else "",
        )
        for path in self.cache.iterdir():
            if path.is_dir() and path.name != loaded.version:
                shutil.rmtree(path, ignore_errors=True)
