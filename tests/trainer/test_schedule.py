"""The LR schedule (linear warmup, cosine decay to min_lr_ratio) and its use through LambdaLR."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config import load_config
from trainer.tools.commands import DEBUG_CONFIG
from trainer.training.schedule import lr_factor, lr_lambda


@pytest.mark.parametrize(
    ("step", "warmup", "total", "min_ratio", "want"),
    [
        (0, 10, 100, 0.1, 0.1),  # first step of warmup: 1/10
        (4, 10, 100, 0.1, 0.5),
        (9, 10, 100, 0.1, 1.0),  # last warmup step reaches the peak
        (10, 10, 100, 0.1, 1.0),  # decay starts at the peak
        (55, 10, 100, 0.1, 0.55),  # half way through the decay: (1 + min) / 2
        (100, 10, 100, 0.1, 0.1),  # end of the run: min_lr_ratio
        (250, 10, 100, 0.1, 0.1),  # beyond the run (a longer resumed run): stays at the floor
        (0, 0, 100, 0.0, 1.0),  # no warmup: starts at the peak
        (50, 0, 100, 0.0, 0.5),
        (3, 5, 5, 0.2, 0.8),  # warmup as long as the run: no decay phase
        (5, 5, 5, 0.2, 1.0),
    ],
)
def test_lr_factor_table(step: int, warmup: int, total: int, min_ratio: float, want: float) -> None:
    got = lr_factor(step, warmup_steps=warmup, total_steps=total, min_lr_ratio=min_ratio)
    assert got == pytest.approx(want, abs=1e-12)


def test_cosine_is_monotonic_after_warmup() -> None:
    f = [lr_factor(s, warmup_steps=3, total_steps=40, min_lr_ratio=0.1) for s in range(3, 41)]
    assert all(a >= b for a, b in zip(f, f[1:], strict=False)) and f[0] > f[-1]
    mid = lr_factor(3 + 37 // 2, warmup_steps=3, total_steps=40, min_lr_ratio=0.1)
    assert mid == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (37 // 2) / 37)))


def test_lambda_lr_follows_the_config() -> None:
    cfg = load_config(DEBUG_CONFIG, ["optim.lr=0.01", "optim.warmup_steps=4", "train.steps=20"])
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.optim.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
    lrs = []
    for _ in range(21):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.01 / 4) and lrs[3] == pytest.approx(0.01)
    assert lrs[20] == pytest.approx(0.01 * cfg.optim.min_lr_ratio)
