"""Benchmark: trainer step time vs a bare PyTorch loop on the same model and batch size.

    python bench/step_overhead.py [--layers 4 --d-model 256 --seq 256 --micro-batch 8 --steps 60]

Both loops run in this process on the same device with the same model shape, optimizer, LR schedule,
gradient clipping and batch size. The bare loop reuses one pre-built batch; the trainer runs its full loop
(loader thread, SIGTERM flag check, metrics, JSON logs; checkpoints off). The two alternate in turns of
``--chunk`` steps so that machine noise hits both alike. Prints the ratio of median step times
(target <= 1.05). Run with OMP_NUM_THREADS=1 on CPU, as torchrun does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.config import load_config  # noqa: E402
from trainer.tools.make_shards import write_shards  # noqa: E402
from trainer.training.loop import Trainer  # noqa: E402
from trainer.training.model import GPT  # noqa: E402
from trainer.training.schedule import lr_lambda  # noqa: E402


class BareLoop:
    """The reference: model, AdamW, LR schedule, clipping and one fixed batch; nothing else."""

    def __init__(self, cfg, device: torch.device) -> None:  # noqa: ANN001
        torch.manual_seed(cfg.train.seed)
        self.device = device
        self.model = GPT(cfg.model).to(device)
        o = cfg.optim
        self.opt = torch.optim.AdamW(
            self.model.parameters(),
            lr=o.lr,
            betas=(o.beta1, o.beta2),
            weight_decay=o.weight_decay,
            fused=device.type == "cuda",
        )
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(cfg))
        self.clip = o.grad_clip
        data = torch.randint(0, 257, (cfg.train.micro_batch, cfg.model.seq_len + 1), device=device)
        self.x, self.y = data[:, :-1], data[:, 1:]

    def run(self, steps: int) -> list[float]:
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            loss = self.model(self.x, self.y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            self.sched.step()
            _ = loss.item()  # the trainer also reads the loss every step
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=10, help="steps per turn")
    ap.add_argument("--rounds", type=int, default=8, help="turns each; the loops alternate to share noise")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    write_shards(rng.integers(0, 256, 4_000_000, dtype=np.uint16), tmp / "shards", shard_tokens=1_000_000)
    overrides = [
        f"data.source={tmp / 'shards'}",
        f"data.cache_dir={tmp / 'cache'}",
        "checkpoint.uri=",
        f"model.n_layer={args.layers}",
        f"model.d_model={args.d_model}",
        f"model.n_head={args.d_model // 64}",
        f"model.seq_len={args.seq}",
        "model.vocab_size=320",
        f"train.micro_batch={args.micro_batch}",
        "train.grad_accum=1",
        f"train.steps={args.chunk * (args.rounds + 1)}",
        "metrics.port_base=0",
        "metrics.log_interval=10",
        f"metrics.log_file={tmp / 'log.jsonl'}",
    ]
    cfg = load_config(Path(__file__).resolve().parents[1] / "trainer/configs/debug.toml", overrides)
    trainer = Trainer(cfg)
    device = trainer.device
    bare_loop = BareLoop(cfg, device)
    bare_loop.run(args.chunk)  # warm-up turn for both (allocator, first-step costs)
    cfg.train.steps = args.chunk
    trainer.run()
    bare_all: list[float] = []
    trainer_all: list[float] = []
    for r in range(args.rounds):
        bare_all += bare_loop.run(args.chunk)
        cfg.train.steps = args.chunk * (r + 2)  # run() continues from trainer.step
        trainer.run()
        trainer_all += list(trainer.step_durations)[-args.chunk :]
    bare, tr = statistics.median(bare_all), statistics.median(trainer_all)
    print(json.dumps({
        "benchmark": "trainer_step_vs_bare_loop",
        "device": str(device),
        "model": {"n_layer": args.layers, "d_model": args.d_model, "seq_len": args.seq,
                  "micro_batch": args.micro_batch},
        "bare_median_s": round(bare, 5),
        "trainer_median_s": round(tr, 5),
        "ratio": round(tr / bare, 4),
        "target": "<= 1.05",
    }))  # fmt: skip
    trainer.close()


if __name__ == "__main__":
    main()
