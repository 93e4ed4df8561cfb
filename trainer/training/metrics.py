"""Prometheus metrics (one HTTP port per local rank) and one JSON log line per step interval.

Each rank serves its own registry on ``port_base + LOCAL_RANK`` so that a PodMonitor can scrape every
rank without prometheus_client's multiprocess mode (which needs a shared directory and forbids
``start_http_server`` per process: https://prometheus.github.io/client_python/multiprocess/).
GPU utilisation and temperature come from dcgm-exporter, not from here.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from trainer.config import ConfigError, MetricsConfig

log = logging.getLogger(__name__)

# Dense bf16 peak FLOP/s per GPU, from the vendor data sheets (no sparsity). Used only for MFU. The Hopper
# data sheets print "BF16 Tensor Core 1,979 TFLOPS" with the footnote "with sparsity": dense is half.
PEAK_BF16_FLOPS = {
    "H200": 989e12,  # SXM; the H200 NVL is lower
    "H100": 989e12,  # SXM; PCIe is lower
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
}
# Where a figure above comes from (reported beside MFU by bench/gpu/train_bench.py); a GPU without a row
# here is reported as "vendor data sheet" alone.
PEAK_BF16_SOURCES = {
    "H200": "NVIDIA H200 data sheet (https://www.nvidia.com/en-us/data-center/h200/), H200 SXM: BF16 Tensor "
    "Core 1,979 TFLOPS with sparsity, so 989 dense (as stas00/ml-engineering's accelerator table lists it)",
    "H100": "NVIDIA H100 data sheet (https://www.nvidia.com/en-us/data-center/h100/), H100 SXM: BF16 Tensor "
    "Core 1,979 TFLOPS with sparsity, so 989 dense",
}


def peak_entry(gpu_name: str) -> tuple[str, float] | None:
    """The row of :data:`PEAK_BF16_FLOPS` whose key is in ``gpu_name`` (``"NVIDIA H200"`` -> ``("H200",
    989e12)``), or ``None`` for a GPU not in the table."""
    for key, val in PEAK_BF16_FLOPS.items():
        if key in gpu_name:
            return key, val
    return None


def peak_flops(device: torch.device) -> float | None:
    """Peak bf16 FLOP/s of the local GPU, or ``None`` on CPU / unknown GPUs (then no MFU is reported)."""
    if device.type != "cuda":
        return None
    entry = peak_entry(torch.cuda.get_device_name(device))
    return entry[1] if entry else None


class Metrics:
    """All trainer metrics for one rank."""

    def __init__(self, cfg: MetricsConfig, rank: int, local_rank: int, device: torch.device) -> None:
        self.cfg = cfg
        self.rank = rank
        self.device = device
        self.registry = CollectorRegistry()
        labels = {"rank": str(rank)}
        r = self.registry

        def g(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labelnames=list(labels), registry=r).labels(**labels)

        self.step = g("trainer_step", "Optimizer steps completed")
        self.step_time = g("trainer_step_seconds", "Wall time of the last optimizer step")
        self.step_hist = Histogram(
            "trainer_step_duration_seconds",
            "Optimizer step wall time",
            labelnames=list(labels),
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        ).labels(**labels)
        self.tokens_per_s = g("trainer_tokens_per_second", "Global tokens per second (all ranks), last step")
        self.tokens_total = Counter(
            "trainer_tokens", "Global tokens processed", labelnames=list(labels), registry=r
        ).labels(**labels)
        self.mfu = g("trainer_mfu_ratio", "Model FLOPs utilisation (0-1), GPU only")
        self.loss = g("trainer_loss", "Training loss of the last step (this rank's micro-batches)")
        self.grad_norm = g("trainer_grad_norm", "Global gradient norm before clipping")
        self.lr = g("trainer_learning_rate", "Learning rate")
        self.data_wait = g("trainer_data_wait_seconds", "Time the last step waited for its batch")
        self.ckpt_blocked = g(
            "trainer_checkpoint_blocked_seconds", "Time the loop was blocked by the last save"
        )
        self.ckpt_duration = g("trainer_checkpoint_save_seconds", "Duration of the last save until committed")
        self.ckpt_bytes = g("trainer_checkpoint_bytes", "Bytes of the last committed checkpoint")
        self.ckpt_failures = Counter(
            "trainer_checkpoint_failures", "Checkpoint saves that failed", labelnames=list(labels), registry=r
        ).labels(**labels)
        self.last_committed = g(
            "trainer_checkpoint_last_committed_step", "Step of the newest committed checkpoint"
        )
        self.restarts = g("trainer_restart_count", "torchrun elastic restarts of this job")
        self.gpu_mem = g("trainer_gpu_memory_allocated_bytes", "Peak GPU memory allocated by PyTorch")
        self.gpu_mem_reserved = g(
            "trainer_gpu_memory_reserved_bytes", "GPU memory reserved by the caching allocator"
        )
        self.port = 0
        if cfg.port_base:
            self.port = cfg.port_base + local_rank
            # start_http_server serves from a daemon thread; it dies with the process.
            try:
                start_http_server(self.port, addr="0.0.0.0", registry=self.registry)
            except OSError as exc:
                raise ConfigError(
                    "metrics.port_base",
                    cfg.port_base,
                    f"port {self.port} (port_base + LOCAL_RANK {local_rank}) cannot be served: "
                    f"{exc.strerror}; pick another port_base, or 0 to turn the endpoint off",
                ) from None
        self._log_path: Path | None = None
        if cfg.log_file:
            self._log_path = Path(cfg.log_file.replace("{rank}", str(rank)))
            self._log_path.parent.mkdir(parents=True, exist_ok=True)

    def observe_step(self, rec: dict[str, Any]) -> None:
        """Update gauges from the record ``Trainer.run`` builds per step (``step``, ``step_s``, ...)."""
        self.step.set(rec["step"])
        self.step_time.set(rec["step_s"])
        self.step_hist.observe(rec["step_s"])
        self.tokens_per_s.set(rec["tokens_per_s"])
        self.tokens_total.inc(rec["tokens"])
        self.loss.set(rec["loss"])
        self.grad_norm.set(rec["grad_norm"])
        self.lr.set(rec["lr"])
        self.data_wait.set(rec["data_wait_s"])
        if rec.get("mfu") is not None:
            self.mfu.set(rec["mfu"])
        if self.device.type == "cuda":
            self.gpu_mem.set(torch.cuda.max_memory_allocated(self.device))
            self.gpu_mem_reserved.set(torch.cuda.memory_reserved(self.device))

    def observe_save(
        self, committed: bool, blocked_s: float, duration_s: float, nbytes: int, step: int
    ) -> None:
        """Record one finished checkpoint save."""
        self.ckpt_blocked.set(blocked_s)
        self.ckpt_duration.set(duration_s)
        if committed:
            self.ckpt_bytes.set(nbytes)
            self.last_committed.set(step)
        else:
            self.ckpt_failures.inc()

    def event(self, kind: str, **fields: Any) -> None:
        """Write one JSON line (rank 0 to stdout; every rank to ``log_file`` when set)."""
        rec = {"event": kind, "rank": self.rank, "time": round(time.time(), 3), **fields}
        line = json.dumps(rec, default=str)
        if self.rank == 0:
            print(line, file=sys.stdout, flush=True)
        if self._log_path is not None:
            with open(self._log_path, "a") as f:
                f.write(line + "\n")
