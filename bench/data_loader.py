"""Benchmark: data loader tokens/s vs the tokens/s the training step consumes (target >= 20x).

    python bench/data_loader.py [--seq 1024 --micro-batch 16 --grad-accum 4]

Measures one rank's ``TokenLoader`` (memmap shards -> int64 tensors, the work its prefetch thread does)
at the GPT-2 124M shape, and compares it with:

* the consumption of a training step measured here, on this machine's device, for the same batch
  (``--measure-model``, default the debug-sized model on CPU so the run stays short), and
* the consumption of GPT-2 124M on one H100/H200 at 50% MFU (bf16), computed from the model's FLOPs per
  token and the GPU's peak (989 TFLOP/s dense bf16) - the rate one rank's loader must sustain there.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.config import ModelConfig  # noqa: E402
from trainer.tools.make_shards import write_shards  # noqa: E402
from trainer.training.data import GlobalSampler, TokenLoader, TokenShards  # noqa: E402
from trainer.training.metrics import PEAK_BF16_FLOPS  # noqa: E402
from trainer.training.model import GPT  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--grad-accum", type=int, default=4)
    ap.add_argument(
        "--world", type=int, default=8, help="ranks sharing the global batch (this is one of them)"
    )
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=50_000_000, help="size of the synthetic shard set")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="loader-bench-"))
    rng = np.random.default_rng(0)
    write_shards(rng.integers(0, 50257, args.tokens, dtype=np.uint16), tmp, shard_tokens=10_000_000)
    shards = TokenShards(tmp, args.seq)
    loader = TokenLoader(
        shards,
        GlobalSampler(shards.num_samples, 0),
        micro_batch=args.micro_batch,
        grad_accum=args.grad_accum,
        rank=3,
        world=args.world,
        device=torch.device("cpu"),
    )
    per_rank_tokens = args.micro_batch * args.grad_accum * args.seq
    loader.make_batch(0)  # warm the page cache for a fair steady state
    t0 = time.perf_counter()
    offset = 0
    for _ in range(args.batches):
        b = loader.make_batch(offset)
        offset = b.offset_after
    loader_tps = args.batches * per_rank_tokens / (time.perf_counter() - t0)

    # Consumption measured here: the debug model's step on this machine, same per-rank batch shape.
    torch.manual_seed(0)
    small = ModelConfig(size="debug", seq_len=args.seq, vocab_size=50304)
    model = GPT(small)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    b = loader.make_batch(0)
    x, y = b.micro[0]
    for _ in range(2):
        model(x, y).backward()
        opt.step()
        opt.zero_grad()
    n = 3
    t0 = time.perf_counter()
    for _ in range(n):
        model(x, y).backward()
        opt.step()
        opt.zero_grad()
    step_tps = n * args.micro_batch * args.seq / (time.perf_counter() - t0)

    with torch.device("meta"):
        gpt2 = GPT(ModelConfig(size="gpt2-124m", seq_len=args.seq))
    h100_tps = 0.5 * PEAK_BF16_FLOPS["H100"] / gpt2.flops_per_token()
    print(json.dumps({
        "benchmark": "loader_tokens_per_s_vs_step_consumption",
        "loader_tokens_per_s_one_rank": round(loader_tps),
        "cpu_debug_step_tokens_per_s": round(step_tps),
        "ratio_vs_cpu_step": round(loader_tps / step_tps, 1),
        "gpt2_124m_h100_50pct_mfu_tokens_per_s": round(h100_tps),
        "ratio_vs_h100_gpt2": round(loader_tps / h100_tps, 1),
        "target": ">= 20",
    }))  # fmt: skip
    loader.close()


if __name__ == "__main__":
    main()
