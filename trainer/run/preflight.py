"""One-time checks before any worker starts (run by ``trainer.run.launch``): the dataset is there and
readable,
the checkpoint store answers, and the newest checkpoint fits this config (or already finished the run).

A deterministic problem then fails at once with one line and exit 2, instead of every rank crashing and the
elastic agent restarting them into the same crash. The workers apply the same rules again when they load
(a plain ``torchrun -m trainer.train`` has no launcher), so nothing here is the only line of defence.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from trainer.checkpoint.checkpointer import KNOB, check_saved_step, inspect_checkpoint
from trainer.checkpoint.manifest import CheckpointManifest, ManifestError, check_data, check_model
from trainer.checkpoint.store import make_store
from trainer.config import ConfigError, JobConfig
from trainer.errors import BadInput
from trainer.storage.blobstore import retry_unavailable
from trainer.training.data import check_shards, dataset_fingerprint, read_index

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Preflight:
    """What the checks found."""

    fingerprint: str
    num_samples: int
    checkpoint: CheckpointManifest | None = None  # the one the workers will resume from
    complete: bool = False  # that checkpoint is at or beyond train.steps: nothing to train
    notes: list[str] = field(default_factory=list)  # allowed changes (dataset, global batch)


def check_dataset(cfg: JobConfig) -> tuple[str, int]:
    """``data.source``: index readable and valid, every shard present with its size, vocabulary and
    ``model.seq_len`` usable. Returns (fingerprint, samples per epoch)."""
    d = cfg.data
    index = read_index(d.source, d.store_wait_s)
    check_shards(d.source, index, d.store_wait_s)
    if index["vocab_size"] > cfg.model.vocab_size:
        raise ConfigError(
            "model.vocab_size",
            cfg.model.vocab_size,
            f"must be >= the shards' vocab_size {index['vocab_size']} (index.json of {d.source})",
        )
    seq = cfg.model.seq_len
    samples = sum(max(0, (s["tokens"] - 1) // seq) for s in index["shards"])
    if samples == 0:
        raise BadInput(
            f"data.source={d.source}: the shards hold no sample of model.seq_len+1={seq + 1} tokens"
        )
    return dataset_fingerprint(index), samples


def newest_checkpoint(cfg: JobConfig) -> CheckpointManifest | None:
    """The checkpoint the workers would resume from, judged by its manifest, files and saved step; the
    workers hash every byte (each rank a share), except for a checkpoint that would end the run here
    (at or beyond ``train.steps``), which is hashed now. Unusable ones are skipped with one warning line
    each."""
    c = cfg.checkpoint
    store = make_store(c.uri, c.s3_region, c.s3_endpoint, c.s3_max_attempts)
    what = f"checkpoint.uri={store.root}"

    def retry(fn: Callable[[], T], bounded: bool = True) -> T:
        return retry_unavailable(fn, c.store_wait_s, what, KNOB, bounded=bounded)

    for step in reversed(retry(store.list_steps)):
        try:
            m = retry(lambda s=step: inspect_checkpoint(store, s))  # type: ignore[misc]
            check_saved_step(store, m, c.store_wait_s)
            if m.step >= cfg.train.steps and c.verify_on_load:
                for name, entry in sorted(m.files.items()):
                    # Streamed, any size: bounded by the client's read timeout (retry_unavailable).
                    sha = retry(lambda n=name, m=m: store.sha256(m.step, n, m.attempt), False)  # type: ignore[misc]
                    if sha != entry.sha256:
                        raise ManifestError(f"{name} sha256 mismatch")
            return m
        except ManifestError as exc:
            log.warning("skipping checkpoint %s: %s", store.uri(step), exc)
    return None


def preflight(cfg: JobConfig, world_size: int | None) -> Preflight:
    """All checks; ``world_size`` (None when elastic) lets the global batch be compared too."""
    fingerprint, samples = check_dataset(cfg)
    result = Preflight(fingerprint, samples)
    if not cfg.checkpoint.uri:
        return result
    m = newest_checkpoint(cfg)
    if m is None:
        return result
    result.checkpoint = m
    where = make_store(cfg.checkpoint.uri).uri(m.step)
    check_model(m, dataclasses.asdict(cfg.model), where)
    if m.step >= cfg.train.steps:
        result.complete = True  # nothing will be trained: the data rules do not matter
        return result
    t = cfg.train
    result.notes = check_data(
        m,
        {
            "fingerprint": fingerprint,
            "num_samples": samples,
            "global_batch": t.micro_batch * t.grad_accum * world_size if world_size else None,
        },
        allow_dataset_change=cfg.checkpoint.allow_dataset_change,
        allow_batch_change=cfg.checkpoint.allow_batch_change,
        where=where,
    )
    return result
