"""Benchmark: time the training loop is blocked per checkpoint, async vs synchronous save of the same state.

    python bench/checkpoint_blocking.py [--layers 8 --d-model 512] [--s3]

Builds a GPT (default ~26M parameters, ~0.3 GB of model + AdamW state), then saves it ``--saves`` times
with ``checkpoint.async_save=true`` and ``false`` to the same kind of storage (a local directory, or with
``--s3`` a moto S3 server through the S3 connector). "Blocked" is the wall time of ``Checkpointer.save``
as the loop sees it; for async saves the write and the manifest commit finish in the background (a few
training steps run in between, as in real training). Prints the ratio of medians; targets:
<= 0.1 on a local directory, <= 0.055 on S3. Async saves stage into host buffers reused from save to save;
the first one allocates them and is slower (it is in the median like every other save).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.checkpoint.checkpointer import Checkpointer  # noqa: E402
from trainer.config import CheckpointConfig, ModelConfig  # noqa: E402
from trainer.tools.moto_server import MotoServer  # noqa: E402
from trainer.training.distributed import init_distributed  # noqa: E402
from trainer.training.model import GPT  # noqa: E402


class Pos:
    def __init__(self) -> None:
        self.offset = 0

    def state_dict(self) -> dict[str, int]:
        return {"global_offset": self.offset}

    def load_state_dict(self, s: dict[str, int]) -> None:
        self.offset = s["global_offset"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--saves", type=int, default=4)
    ap.add_argument("--s3", action="store_true", help="save to a local moto S3 server instead of a directory")
    args = ap.parse_args()
    info = init_distributed(600)
    torch.manual_seed(0)
    cfg = ModelConfig(
        size="debug",
        n_layer=args.layers,
        d_model=args.d_model,
        n_head=args.d_model // 64,
        seq_len=256,
        vocab_size=50304,
    )
    model = GPT(cfg).to(info.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    x = torch.randint(0, 50304, (2, 257), device=info.device)

    def train_step() -> None:
        model(x[:, :-1], x[:, 1:]).backward()
        opt.step()
        opt.zero_grad()
        sched.step()

    train_step()
    server = None
    if args.s3:
        server = MotoServer().start()
        os.environ.update(server.env())
        server.client().create_bucket(Bucket="bench-ckpt")
    root = "s3://bench-ckpt/run" if args.s3 else tempfile.mkdtemp(prefix="ckpt-bench-")
    blocked: dict[str, list[float]] = {}
    total: dict[str, list[float]] = {}
    nbytes = 0
    step = 0
    for mode in ("sync", "async"):
        ck = Checkpointer(
            CheckpointConfig(uri=f"{root}/{mode}", keep=2, async_save=mode == "async"),
            info,
            model,
            opt,
            {"sched": sched, "data": Pos()},
        )
        for _ in range(args.saves):
            train_step()
            step += 1
            t0 = time.perf_counter()
            ck.save(step)
            blocked.setdefault(mode, []).append(time.perf_counter() - t0)
            while ck._pending is not None and not ck._pending.done():
                train_step()  # the loop keeps training while the save finishes
            ck.wait()
            [res] = ck.drain()
            assert res.committed, res.error
            total.setdefault(mode, []).append(res.duration_s)
            nbytes = res.bytes
        ck.close()
    if server is not None:
        server.stop()
    b_sync, b_async = statistics.median(blocked["sync"]), statistics.median(blocked["async"])
    print(json.dumps({
        "benchmark": "checkpoint_blocked_time_async_vs_sync",
        "storage": "s3 (moto, s3torchconnector)" if args.s3 else "local directory (fsync)",
        "params": sum(p.numel() for p in model.parameters()),
        "checkpoint_bytes": nbytes,
        "sync_blocked_median_s": round(b_sync, 4),
        "async_blocked_median_s": round(b_async, 4),
        "async_save_to_commit_median_s": round(statistics.median(total["async"]), 4),
        "ratio": round(b_async / b_sync, 4),
        "target": "<= 0.055" if args.s3 else "<= 0.1",
    }))  # fmt: skip


if __name__ == "__main__":
    main()
