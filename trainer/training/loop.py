"""The training loop of one rank: :class:`Trainer` (process group, model, optimizer, data, checkpoints,
metrics, SIGTERM handling). The entry point is ``trainer/train.py``."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections import deque
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from trainer import exitcodes
from trainer.checkpoint.checkpointer import Checkpointer, SaveResult
from trainer.checkpoint.manifest import CheckpointManifest, check_data, check_model
from trainer.checkpoint.sidewrites import SideWrite, SideWriter
from trainer.config import ConfigError, JobConfig
from trainer.run.runrecord import RunRecord, node_name, resources
from trainer.run.signals import StopFlags
from trainer.training.data import (
    GlobalSampler,
    TokenLoader,
    TokenShards,
    fetch_shards,
    local_shard_dir,
    tokenizer_info,
)
from trainer.training.distributed import destroy_distributed, init_distributed, run_agreed
from trainer.training.metrics import Metrics, peak_flops
from trainer.training.model import GPT
from trainer.training.schedule import lr_lambda

log = logging.getLogger("trainer")

STEP_WINDOW = 1000  # steps kept in Trainer.step_durations


class Trainer:
    """Owns the process group, model, optimizer, data, checkpoints and metrics of one rank."""

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self.info = init_distributed(cfg.train.dist_timeout_s)
        self.device = self.info.device
        self.flags = StopFlags()
        self.flags.install()
        torch.manual_seed(cfg.train.seed)  # same initial weights on every rank (DDP also broadcasts them)

        # Data: local rank 0 of every node copies S3 shards to the node's disk; the others wait. Errors are
        # agreed, so that every rank stops with the same one-line message instead of waiting for a peer.
        world = self.info.world_size
        d = cfg.data
        fetch = lambda: fetch_shards(d.source, d.cache_dir, d.verify_checksums, d.store_wait_s)  # noqa: E731
        run_agreed(fetch if self.info.local_rank == 0 else None, world)
        self.shards = run_agreed(self._open_shards, world)

        # Precision: bf16 autocast on GPUs that have it, else fp16 with a GradScaler; fp32 on CPU.
        dtype = cfg.train.dtype
        if dtype == "auto":
            if self.device.type == "cuda":
                dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
            else:
                dtype = "float32"
        self.dtype = dtype
        self.autocast_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=dtype == "float16")

        self.raw_model = GPT(cfg.model).to(self.device)
        model: torch.nn.Module = self.raw_model
        if cfg.train.compile:
            model = torch.compile(model)  # type: ignore[assignment]
        if self.info.world_size > 1:
            model = DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.model = model
        o = cfg.optim
        decay = [p for p in self.raw_model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.raw_model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=o.lr,
            betas=(o.beta1, o.beta2),
            eps=o.eps,
            fused=self.device.type == "cuda",
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(cfg))
        self.loader = TokenLoader(
            self.shards,
            GlobalSampler(self.shards.num_samples, cfg.train.seed),
            micro_batch=cfg.train.micro_batch,
            grad_accum=cfg.train.grad_accum,
            rank=self.info.rank,
            world=self.info.world_size,
            device=self.device,
            prefetch=cfg.data.prefetch,
        )
        info = self.info
        self.metrics = run_agreed(
            lambda: Metrics(cfg.metrics, info.rank, info.local_rank, self.device), world
        )
        self.metrics.restarts.set(self.info.restart_count)
        extras = {"sched": self.scheduler, "data": self.loader}
        if self.scaler.is_enabled():
            extras["scaler"] = self.scaler
        self.ckpt = Checkpointer(
            cfg.checkpoint,
            self.info,
            self.model,
            self.optimizer,
            extras,
            timeout_s=cfg.train.dist_timeout_s,
            job_config=cfg.to_dict(),
            manifest_info={
                "run_id": cfg.resolved_run_id(),
                "data": {
                    "fingerprint": self.shards.fingerprint,
                    "num_samples": self.shards.num_samples,
                    "global_batch": self.loader.global_batch,
                    "tokenizer": tokenizer_info(self.shards.index),
                },
            },
        )
        self.peak = peak_flops(self.device)
        self.flops_per_token = self.raw_model.flops_per_token()
        self.step = 0
        self.record: RunRecord | None = None
        # Run records and other writes that are not the checkpoint: off the training thread (rank 0).
        self.side_writes = SideWriter(cfg.checkpoint.side_write_timeout_s) if self.info.is_main else None
        self.committed_steps: list[int] = []  # by this attempt
        self.exit_message = ""  # why run() returned what it returned (for the launcher)
        self.last_rec: dict[str, Any] | None = None
        # Wall time of the latest steps (benchmarks); bounded so a long run does not grow it.
        self.step_durations: deque[float] = deque(maxlen=STEP_WINDOW)

    def _open_shards(self) -> TokenShards:
        cfg = self.cfg
        shards = TokenShards(
            local_shard_dir(cfg.data.source, cfg.data.cache_dir), cfg.model.seq_len, cfg.data.source
        )
        if shards.vocab_size > cfg.model.vocab_size:
            raise ConfigError(
                "model.vocab_size",
                cfg.model.vocab_size,
                f"must be >= the shards' vocab_size {shards.vocab_size} (index.json of {cfg.data.source})",
            )
        return shards

    def _resume_rules(self, m: CheckpointManifest) -> list[str]:
        """The checks a checkpoint must pass before it is loaded (``trainer/checkpoint/manifest.py``)."""
        where = self.ckpt.store.uri(m.step) if self.ckpt.store else str(m.step)
        check_model(m, dataclasses.asdict(self.cfg.model), where)
        return check_data(
            m,
            {
                "fingerprint": self.shards.fingerprint,
                "num_samples": self.shards.num_samples,
                "global_batch": self.loader.global_batch,
            },
            allow_dataset_change=self.cfg.checkpoint.allow_dataset_change,
            allow_batch_change=self.cfg.checkpoint.allow_batch_change,
            where=where,
        )

    # -------------------------------------------------------------------------------------------- loop
    def resume(self) -> int:
        """Load the newest checkpoint that is intact and compatible, if any; returns the step to continue
        after. Raises :class:`BadInput` for a checkpoint the resume rules refuse."""
        restored = self.ckpt.restore(self._resume_rules)
        latest = -1
        if restored is not None:
            latest = restored.manifest.step
            self.step = latest
            if self.info.is_main:
                for note in restored.notes:
                    log.warning("%s", note)
        self.metrics.event(
            "start",
            pid=os.getpid(),
            resumed_from=latest if latest >= 0 else None,
            verified_files=restored.verified_files if restored else 0,
            verified_bytes=restored.verified_bytes if restored else 0,
            attempt=self.ckpt.attempt or None,
            restart_count=self.info.restart_count,
            world_size=self.info.world_size,
            global_offset=self.loader.offset,
            dtype=self.dtype,
            device=str(self.device),
            params=self.raw_model.num_params(exclude_embeddings=False),
            metrics_port=self.metrics.port or None,
        )
        return self.step

    def _autocast(self) -> Any:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def train_step(self, micro: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, float]:
        """One optimizer step over ``grad_accum`` micro-batches; returns (loss, grad norm before clipping)."""
        self.model.train()
        n = len(micro)
        loss_sum = torch.zeros((), device=self.device)
        for i, (x, y) in enumerate(micro):
            # Skip DDP's gradient all-reduce on all but the last micro-step
            # (https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#torch.nn.parallel.DistributedDataParallel.no_sync).
            sync = i == n - 1 or not isinstance(self.model, DDP)
            ctx = contextlib.nullcontext() if sync else self.model.no_sync()  # type: ignore[operator]
            with ctx:
                with self._autocast():
                    loss = self.model(x, y) / n
                self.scaler.scale(loss).backward()
            loss_sum += loss.detach()
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.optim.grad_clip or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.raw_model.parameters(), clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return float(loss_sum), float(grad_norm)

    def _handle_saves(self, results: list[SaveResult]) -> None:
        for r in results:
            if r.committed:
                self.committed_steps.append(r.step)
            self.metrics.observe_save(r.committed, r.blocked_s, r.duration_s, r.bytes, r.step)
            self.metrics.event(
                "checkpoint",
                step=r.step,
                committed=r.committed,
                blocked_s=round(r.blocked_s, 4),
                duration_s=round(r.duration_s, 4),
                bytes=r.bytes,
                error=r.error or None,
            )
            if not r.committed:
                log.error("checkpoint save for step %d failed: %s", r.step, r.error)
                if self.cfg.checkpoint.on_save_failure == "stop":
                    self.flags.save_failed = True
                    self.failed_save = r

    def run(self) -> int:
        """Train to ``train.steps``; returns the process exit code (``trainer/exitcodes.py``). Rank 0 queues
        the run record (``trainer/run/runrecord.py``) once training starts and again before this returns; the
        code never depends on those writes (:meth:`finish_side_writes` waits for them, boundedly)."""
        code = self._run()
        if self.record is not None:
            last = self.ckpt.last_committed_step
            self.record.finish(
                code,
                self.exit_message or exitcodes.name(code),
                steps={**self.record.doc["steps"], "last": self.step},
                final_metrics=self.last_rec,
                checkpoints={
                    **self.record.doc["checkpoints"],
                    "committed": [self.ckpt.store.uri(s) for s in self.committed_steps]
                    if self.ckpt.store
                    else [],
                    "latest": self.ckpt.store.uri(last) if self.ckpt.store and last >= 0 else None,
                },
            )
        return code

    def finish_side_writes(self) -> list[SideWrite]:
        """Wait for the queued run-record writes, each up to ``checkpoint.side_write_timeout_s`` after it
        was queued; returns the ones abandoned (one warning line each was logged). Idempotent."""
        return self.side_writes.close() if self.side_writes is not None else []

    def _start_record(self, resumed_from: int | None) -> None:
        cfg, info = self.cfg, self.info
        nodes: list[Any] = [node_name()] * info.world_size
        if info.world_size > 1:  # every rank takes part: one small all-gather of host names
            dist.all_gather_object(nodes, node_name())
        if self.side_writes is None:  # not rank 0
            return
        c = cfg.checkpoint
        self.record = RunRecord.open(
            c.uri,
            self.ckpt.attempt,
            {
                "run_id": cfg.resolved_run_id(),
                "config": cfg.to_dict(),
                "world_size": info.world_size,
                "nodes": sorted(set(nodes)),
                "resources": resources(info.world_size, self.device.type == "cuda"),
                "restart_count": info.restart_count,
                "torch": torch.__version__,
                "device": str(self.device),
                "dataset": {
                    "source": cfg.data.source,
                    "index_sha256": self.shards.index_sha256,
                    "fingerprint": self.shards.fingerprint,
                    "num_samples": self.shards.num_samples,
                    "tokenizer": tokenizer_info(self.shards.index),
                },
                "steps": {"target": cfg.train.steps, "resumed_from": resumed_from, "last": self.step},
                "final_metrics": None,
                "checkpoints": {"uri": c.uri, "committed": [], "latest": None},
                "artifacts": {"metrics_log": cfg.metrics.log_file.replace("{rank}", "0") or None},
            },
            self.side_writes,
            region=c.s3_region,
            endpoint=c.s3_endpoint,
            max_attempts=c.s3_max_attempts,
        )
        if self.record is not None:
            self.record.start()
            self.metrics.event("run_record", uri=self.record.uri("start"))

    def _run(self) -> int:
        cfg = self.cfg
        self.failed_save: SaveResult | None = None
        self.resume()
        self._start_record(self.step if self.ckpt.last_committed_step >= 0 else None)
        if self.step >= cfg.train.steps and self.step > 0:
            if self.info.is_main:
                log.info(
                    "run already complete: checkpoint at step %d >= train.steps=%d; nothing to train",
                    self.step,
                    cfg.train.steps,
                )
            self.metrics.event("done", step=self.step, already_complete=True)
            return exitcodes.OK
        while self.step < cfg.train.steps:
            t0 = time.perf_counter()
            # The one collective per step (see signals.py), before the step: a SIGTERM that arrived during
            # the last step, or while the save started after it was staging, stops the run at the step
            # that save covers, so it is not followed by a second full save of a newer step.
            stop, save_failed = self.flags.agree()
            if save_failed:
                return self._stop_on_failed_save()
            if stop:
                return self._preempt()
            batch = self.loader.next()
            loss, grad_norm = self.train_step(batch.micro)
            self.step += 1
            if cfg.train.step_delay_s:
                time.sleep(cfg.train.step_delay_s)
            self.ckpt.poll()
            self._handle_saves(self.ckpt.drain())
            step_s = time.perf_counter() - t0
            self.step_durations.append(step_s)
            rec = {
                "step": self.step,
                "loss": round(loss, 6),
                "grad_norm": round(grad_norm, 6),
                "lr": self.scheduler.get_last_lr()[0],
                "step_s": step_s,
                "tokens": batch.tokens,
                "tokens_per_s": batch.tokens / step_s,
                "data_wait_s": self.loader.data_wait_s,
                "global_offset": batch.offset_after,
                "mfu": None,
            }
            if self.peak:
                rec["mfu"] = self.flops_per_token * rec["tokens_per_s"] / self.info.world_size / self.peak
            self.last_rec = rec
            self.metrics.observe_step(rec)
            if self.step % cfg.metrics.log_interval == 0 or self.step == cfg.train.steps:
                self.metrics.event("step", **rec)
            if self.step % cfg.checkpoint.interval == 0 or self.step == cfg.train.steps:
                self.ckpt.save(self.step, blocking=self.step == cfg.train.steps, metrics=rec)
        self.ckpt.wait()
        results = self.ckpt.drain()
        self._handle_saves(results)
        if self.ckpt.enabled and self.ckpt.last_committed_step != cfg.train.steps:
            self.exit_message = (
                f"the final checkpoint (step {cfg.train.steps}) was not committed: "
                f"{results[-1].error if results else 'no save'}"
            )
            log.error("%s", self.exit_message)
            self.metrics.event("stop", reason="final_checkpoint_failed", step=self.step)
            return exitcodes.SAVE_FAILED
        self.metrics.event("done", step=self.step)
        return exitcodes.OK

    def _stop_on_failed_save(self) -> int:
        r = self.failed_save
        msg = (
            f"checkpoint save failed{f' for step {r.step}: {r.error}' if r else ' on another rank'}; "
            "stopping because checkpoint.on_save_failure=stop "
            "(fix the storage, or set checkpoint.on_save_failure=continue to keep training)"
        )
        log.error(msg)
        self.exit_message = msg
        self.metrics.event("stop", reason="checkpoint_failed", step=self.step, error=msg)
        return exitcodes.SAVE_FAILED

    def _preempt(self) -> int:
        """SIGTERM agreed by all ranks: let a save in flight finish; if it was not of this step, save this
        step synchronously unless it cannot finish within the window (``Checkpointer.window_skip``); exit
        143 only when this step's checkpoint is committed, else 5."""
        t0 = time.perf_counter()
        self.metrics.event("sigterm", step=self.step, save_in_flight=self.ckpt.pending_step)
        self.ckpt.wait()
        self._handle_saves(self.ckpt.drain())
        at = self.flags.sigterm_at
        deadline = at + self.cfg.checkpoint.shutdown_window_s if at is not None else None
        if (
            self.ckpt.enabled
            and self.ckpt.last_committed_step != self.step
            and not self.ckpt.window_skip(self.step, deadline)
        ):
            self.ckpt.save(self.step, blocking=True, metrics=self.last_rec)
            self._handle_saves(self.ckpt.drain())
        took = time.perf_counter() - t0
        if took > self.cfg.checkpoint.shutdown_window_s:
            log.warning("SIGTERM save took %.1fs > checkpoint.shutdown_window_s", took)
        last = self.ckpt.last_committed_step
        self.metrics.event(
            "preempted", step=self.step, save_s=round(took, 3), committed=last if last >= 0 else None
        )
        if self.ckpt.enabled and last == self.step:
            self.exit_message = f"preempted at step {self.step}; checkpoint committed"
            return exitcodes.PREEMPTED
        self.exit_message = (
            f"stopped by SIGTERM at step {self.step} without a committed checkpoint of it; the next start "
            f"resumes from {f'step {last}' if last >= 0 else 'the newest checkpoint (or the beginning)'}"
        )
        if self.info.is_main:
            log.error("%s", self.exit_message)
        return exitcodes.PREEMPTED_SAVE_FAILED

    def close(self) -> None:
        """Finish the side writes (bounded), stop background threads; destroy the process group if this
        trainer created it."""
        self.finish_side_writes()
        self.loader.close()
        self.ckpt.close()
        if self.info.owns_group:
            destroy_distributed()
