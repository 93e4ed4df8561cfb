"""Token shards on local disk (``numpy.memmap``), a deterministic global sampler and a prefetching loader.

Layout of a shard directory (written by ``python -m trainer.tools.make_shards``)::

    index.json          {"format": "trainer-shards-v1", "dtype": "uint16", "vocab_size": 257, ...,
                         "shards": [{"file": "shard_00000.bin", "tokens": N, "sha256": "..."}]}
    shard_00000.bin     raw little-endian uint16 token ids

A *sample* is ``seq_len + 1`` consecutive tokens inside one shard (inputs and shifted targets); samples do
not overlap. The sampler walks a per-epoch permutation of all sample ids; its whole state is one integer,
the *global sample offset* (samples consumed by the job so far). Each optimizer step consumes
``micro_batch * grad_accum * world_size`` consecutive positions; rank ``r`` takes the ``r``-th contiguous
part. Because the offset does not depend on the world size, a job can resume with a different number
of ranks and still see every sample exactly once per epoch.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainer.errors import BadInput, BlobNotFound
from trainer.storage.blobstore import open_blobs, retry_unavailable, split_s3_uri
from trainer.storage.hashing import sha256_bytes

log = logging.getLogger(__name__)

INDEX_FILE = "index.json"
SHARD_FORMAT = "trainer-shards-v1"


def dataset_fingerprint(index: dict) -> str:
    """sha256 of what defines the token stream (format, dtype, vocabulary, every shard's name, length and
    sha256), independent of the JSON's formatting: it changes exactly when the samples would."""
    keys = ("format", "dtype", "tokenizer", "vocab_size", "eot_token")
    canon = {k: index.get(k) for k in keys}
    canon["shards"] = [[s.get("file"), s.get("tokens"), s.get("sha256")] for s in index.get("shards", [])]
    return sha256_bytes(json.dumps(canon, sort_keys=True).encode())


def tokenizer_info(index: dict) -> dict:
    """What a consumer of the model needs to encode and decode text (from the shard index)."""
    return {k: index.get(k) for k in ("tokenizer", "vocab_size", "eot_token")}


class TokenShards:
    """Read-only view over the shards of one directory; sample ``i`` is an array of ``seq_len + 1`` tokens."""

    def __init__(self, directory: str | os.PathLike[str], seq_len: int, source: str = "") -> None:
        self.directory = Path(directory)
        where = f"data.source={source or directory}"
        try:
            raw = (self.directory / INDEX_FILE).read_bytes()
        except OSError as exc:
            raise BadInput(
                f"{where}: cannot read {INDEX_FILE} in {self.directory} ({exc.strerror})"
            ) from None
        self.index = parse_index(raw, where)
        self.seq_len = seq_len
        self.vocab_size = int(self.index["vocab_size"])
        self.fingerprint = dataset_fingerprint(self.index)
        self.index_sha256 = sha256_bytes(raw)  # of index.json as stored (run records)
        dtype = np.dtype(self.index["dtype"])
        self._maps: list[np.memmap] = []
        counts = []
        for shard in self.index["shards"]:
            path = self.directory / shard["file"]
            if not path.is_file() or path.stat().st_size != shard["tokens"] * dtype.itemsize:
                size = path.stat().st_size if path.is_file() else None
                raise BadInput(
                    f"{where}: {shard['file']} has {size} bytes, {INDEX_FILE} says {shard['tokens']} tokens "
                    f"of {dtype.itemsize} bytes"
                )
            mm = np.memmap(path, dtype=dtype, mode="r") if shard["tokens"] else np.empty(0, dtype=dtype)
            self._maps.append(mm)
            counts.append(max(0, (mm.shape[0] - 1) // seq_len))
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.num_samples = int(self._starts[-1])
        if self.num_samples == 0:
            raise BadInput(f"{where}: the shards hold no sample of model.seq_len+1={seq_len + 1} tokens")

    def sample(self, i: int) -> np.ndarray:
        """Tokens ``[start, start + seq_len + 1)`` of global sample ``i``."""
        shard = int(np.searchsorted(self._starts, i, side="right") - 1)
        start = (i - int(self._starts[shard])) * self.seq_len
        return self._maps[shard][start : start + self.seq_len + 1]


class GlobalSampler:
    """Deterministic order of sample ids: a seeded permutation per epoch, addressed by global offset."""

    def __init__(self, num_samples: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.num_samples)
            self._perm_epoch = epoch
        return self._perm

    def ids(self, offset: int, count: int) -> np.ndarray:
        """Sample ids at global positions ``offset .. offset + count - 1`` (crossing epochs as needed)."""
        out = np.empty(count, dtype=np.int64)
        for j, pos in enumerate(range(offset, offset + count)):
            epoch, k = divmod(pos, self.num_samples)
            out[j] = self._permutation(epoch)[k]
        return out

    def rank_ids(self, offset: int, micro_batch: int, grad_accum: int, rank: int, world: int) -> np.ndarray:
        """This rank's ids for the step starting at ``offset``: shape ``(grad_accum, micro_batch)``."""
        per_rank = micro_batch * grad_accum
        ids = self.ids(offset + rank * per_rank, per_rank)
        return ids.reshape(grad_accum, micro_batch)


@dataclass
class Batch:
    """One optimizer step's inputs for this rank."""

    micro: list[tuple[torch.Tensor, torch.Tensor]]  # (inputs, targets) per micro-step
    offset_after: int  # global sample offset once this step is done
    tokens: int  # tokens in the global batch (all ranks)


class TokenLoader:
    """Prefetches this rank's batches in a background thread (memmap reads and int64 conversion overlap
    the training step); the trainer reads ``data_wait_s`` to see when it is input-bound."""

    def __init__(
        self,
        shards: TokenShards,
        sampler: GlobalSampler,
        *,
        micro_batch: int,
        grad_accum: int,
        rank: int,
        world: int,
        device: torch.device,
        prefetch: int = 4,
        offset: int = 0,
    ) -> None:
        self.shards = shards
        self.sampler = sampler
        self.micro_batch = micro_batch
        self.grad_accum = grad_accum
        self.rank = rank
        self.world = world
        self.device = device
        self.prefetch = prefetch
        self.global_batch = micro_batch * grad_accum * world
        self.offset = offset  # samples consumed by steps the trainer has taken
        self.data_wait_s = 0.0
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[Batch] = queue.Queue(maxsize=prefetch)
        self._stop = threading.Event()

    def make_batch(self, offset: int) -> Batch:
        """Build the step starting at ``offset`` (host tensors, pinned on CUDA hosts)."""
        ids = self.sampler.rank_ids(offset, self.micro_batch, self.grad_accum, self.rank, self.world)
        micro = []
        for row in ids:
            arr = np.stack([self.shards.sample(int(i)) for i in row]).astype(np.int64)
            t = torch.from_numpy(arr)
            if self.device.type == "cuda":
                t = t.pin_memory()
            micro.append((t[:, :-1], t[:, 1:]))
        return Batch(micro, offset + self.global_batch, self.global_batch * self.shards.seq_len)

    def _worker(self, start: int) -> None:
        offset = start
        while not self._stop.is_set():
            batch = self.make_batch(offset)
            offset = batch.offset_after
            while not self._stop.is_set():
                try:
                    self._queue.put(batch, timeout=0.1)
                    break
                except queue.Full:
                    continue

    def _start(self) -> None:
        self._stop.clear()
        self._queue = queue.Queue(maxsize=self.prefetch)
        self._thread = threading.Thread(target=self._worker, args=(self.offset,), daemon=True, name="loader")
        self._thread.start()

    def close(self) -> None:
        """Stop the prefetch thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def next(self) -> Batch:
        """The next step's batch, moved to the device; advances ``offset``."""
        if self._thread is None:
            self._start()
        t0 = time.perf_counter()
        batch = self._queue.get()
        self.data_wait_s = time.perf_counter() - t0
        if batch.offset_after - self.global_batch != self.offset:  # pragma: no cover - internal invariant
            raise RuntimeError("loader out of sync with the trainer's offset")
        self.offset = batch.offset_after
        if self.device.type != "cpu":
            batch.micro = [
                (x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))
                for x, y in batch.micro
            ]
        return batch

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next()

    def state_dict(self) -> dict[str, int]:
        """Checkpointed position: only the world-size independent global sample offset."""
        return {"global_offset": self.offset}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at a saved global sample offset (restarts the prefetch thread)."""
        self.close()
        self.offset = int(state["global_offset"])


def local_shard_dir(source: str, cache_dir: str | os.PathLike[str]) -> Path:
    """Where :func:`fetch_shards` puts (or found) the shards of ``source`` on this node."""
    if not source.startswith("s3://"):
        return Path(source)
    bucket, prefix = split_s3_uri(source)
    return Path(cache_dir) / bucket / prefix


def parse_index(raw: bytes, where: str) -> dict:
    """Parse and type-check ``index.json``; :class:`BadInput` naming ``where`` when it is not usable."""
    try:
        index = json.loads(raw)
    except ValueError as exc:
        raise BadInput(f"{where}: {INDEX_FILE} is not valid JSON ({exc})") from None
    fix = "; rewrite it with python -m trainer.tools.make_shards"
    if not isinstance(index, dict) or index.get("format") != SHARD_FORMAT:
        raise BadInput(f"{where}: {INDEX_FILE} is not a {SHARD_FORMAT} index{fix}")
    if index.get("dtype") not in ("uint16", "uint32"):
        raise BadInput(f"{where}: {INDEX_FILE} dtype {index.get('dtype')!r} is not uint16 or uint32{fix}")
    vocab = index.get("vocab_size")
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1:
        raise BadInput(f"{where}: {INDEX_FILE} vocab_size {vocab!r} is not a positive integer{fix}")
    shards = index.get("shards")
    ok = isinstance(shards, list) and bool(shards)
    for sh in shards if ok else []:
        ok = ok and isinstance(sh, dict) and isinstance(sh.get("file"), str) and "/" not in sh["file"]
        ok = (
            ok
            and isinstance(sh.get("tokens"), int)
            and sh["tokens"] >= 0
            and isinstance(sh.get("sha256"), str)
        )
    if not ok:
        raise BadInput(f"{where}: {INDEX_FILE} shards must be a list of {{file, tokens, sha256}}{fix}")
    return index


def read_index(source: str, wait_s: float = 0) -> dict:
    """``index.json`` of a local directory or ``s3://`` source, type-checked. Raises :class:`BadInput`
    (missing, unreadable, no bucket, access denied) or, after retrying ``wait_s`` seconds,
    :class:`StoreUnavailable`."""
    return parse_index(_index_bytes(source, wait_s), f"data.source={source}")


def _index_bytes(source: str, wait_s: float) -> bytes:
    where = f"data.source={source}"
    blobs = open_blobs(source)
    try:
        raw = retry_unavailable(lambda: blobs.read(INDEX_FILE), wait_s, where, "data.store_wait_s")
    except BlobNotFound:
        raise BadInput(
            f"{where}: no {INDEX_FILE}; write the shards with python -m trainer.tools.make_shards "
            "(--upload s3://... for S3)"
        ) from None
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None
    return raw


def check_shards(source: str, index: dict, wait_s: float = 0) -> None:
    """Every shard ``index.json`` names is in ``source`` with its size (one listing)."""
    where = f"data.source={source}"
    blobs = open_blobs(source)
    present = retry_unavailable(blobs.list, wait_s, where, "data.store_wait_s")
    itemsize = np.dtype(index["dtype"]).itemsize
    for sh in index["shards"]:
        if sh["file"] not in present:
            raise BadInput(f"{where}: {sh['file']} is missing (named in {INDEX_FILE})")
        if present[sh["file"]] != sh["tokens"] * itemsize:
            raise BadInput(
                f"{where}: {sh['file']} has {present[sh['file']]} bytes, {INDEX_FILE} says "
                f"{sh['tokens'] * itemsize}"
            )


def fetch_shards(
    source: str, cache_dir: str | os.PathLike[str], verify: bool = True, wait_s: float = 0
) -> Path:
    """Return a local directory with the shards of ``source``; ``s3://`` sources are downloaded once into
    ``cache_dir`` (skipped when a file with the right size is already there, e.g. after a restart),
    hashed while they download. Errors are one line naming ``data.source`` (:class:`BadInput`, or
    :class:`StoreUnavailable` after retrying ``wait_s`` seconds).

    boto3 honours ``AWS_ENDPOINT_URL`` (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html),
    so the same code reads from MinIO or a local moto server.
    """
    where = f"data.source={source}"
    raw = _index_bytes(source, wait_s)
    index = parse_index(raw, where)
    if not source.startswith("s3://"):
        return Path(source)
    blobs = open_blobs(source)
    local = local_shard_dir(source, cache_dir)
    local.mkdir(parents=True, exist_ok=True)
    for shard in index["shards"]:
        dst = local / shard["file"]
        expected = shard["tokens"] * np.dtype(index["dtype"]).itemsize
        if dst.is_file() and dst.stat().st_size == expected:
            continue
        part = local / f".{shard['file']}.part"
        try:
            # Streamed, any size: a stall ends at the client's read timeout, not at a total bound.
            sha, _ = retry_unavailable(
                lambda s=shard, p=part: blobs.download(s["file"], p),
                wait_s,
                where,
                "data.store_wait_s",
                bounded=False,
            )
        except BlobNotFound:
            raise BadInput(f"{where}: {shard['file']} is missing (named in {INDEX_FILE})") from None
        if verify and sha != shard["sha256"]:
            part.unlink()
            raise BadInput(f"{where}/{shard['file']}: sha256 does not match {INDEX_FILE}")
        os.replace(part, dst)  # atomic: a reader never sees half a shard
    tmp = local / f".{INDEX_FILE}.tmp"
    tmp.write_bytes(raw)
    os.replace(tmp, local / INDEX_FILE)  # index last, so its presence means the cache is complete
    log.info("shards from %s cached in %s", source, local)
    return local
