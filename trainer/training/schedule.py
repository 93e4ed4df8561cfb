"""Learning-rate schedule: linear warmup, then cosine decay to ``optim.min_lr_ratio`` at ``train.steps``."""

from __future__ import annotations

import math
from collections.abc import Callable

from trainer.config import JobConfig


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Factor on ``optim.lr`` for the optimizer step that follows ``step`` completed steps (0-based):
    ``(step + 1) / warmup_steps`` during warmup, then ``min_lr_ratio + (1 - min_lr_ratio) * (1 + cos(pi *
    progress)) / 2`` with progress going from 0 after warmup to 1 at ``total_steps``; ``min_lr_ratio``
    beyond it."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def lr_lambda(cfg: JobConfig) -> Callable[[int], float]:
    """The schedule of a job as a ``torch.optim.lr_scheduler.LambdaLR`` function."""
    o, total = cfg.optim, cfg.train.steps

    def f(step: int) -> float:
        return lr_factor(step, warmup_steps=o.warmup_steps, total_steps=total, min_lr_ratio=o.min_lr_ratio)

    return f
