"""Part 1 of the GPU check: the trainer's tokens/s and MFU for gpt2-124m (bf16, torch.compile), with the torch
already on the machine and this repository alone (no installs, no network, no S3).

    python3 bench/gpu/train_bench.py              # one NVIDIA GPU: trainer/configs/gpt2_124m.toml, one GPU
    python3 bench/gpu/train_bench.py --dry-run    # anywhere: the debug model on CPU, a few steps, no compile

It runs the trainer itself (``python -m trainer.train``) on token shards made from this repository's docs,
with checkpoints off (unless ``--checkpoint``), reads the step lines the trainer prints
(trainer/training/metrics.py)
and prints one JSON object: median tokens/s and step time past the warm-up steps (torch.compile), and MFU.
MFU is
``flops_per_token * tokens_per_s / peak_flops`` with the trainer's own ``GPT.flops_per_token`` (6N plus the
attention term 12*L*d*T: PaLM, appendix B, https://arxiv.org/abs/2204.02311; nanoGPT's ``estimate_mfu``,
https://github.com/karpathy/nanoGPT/blob/master/model.py) and the dense bf16 peak of
trainer/training/metrics.py.

Checked first, each with one line on stderr and its own exit code: 2 Python older than 3.11 (the trainer reads
its config with tomllib); 3 CUDA not available to torch (or torch missing); 4 the NVIDIA driver is older than
the CUDA that torch was built with needs (infra/pools/ami_drivers.py CUDA_MIN_DRIVER). Then 5 the trainer
failed, 6 it did not finish within ``--budget-s`` (default 300 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

EXIT_PYTHON, EXIT_NO_CUDA, EXIT_DRIVER, EXIT_TRAINER, EXIT_BUDGET = 2, 3, 4, 5, 6
MIN_PYTHON = (3, 11)
MFU_FORMULA = (
    "flops_per_token * tokens_per_s / peak_flops; flops_per_token = 6*N + 12*n_layer*d_model*seq_len "
    "(trainer/training/model.py GPT.flops_per_token: PaLM appendix B, nanoGPT estimate_mfu)"
)


class CheckFailed(Exception):
    """A precondition that is not met: one line for the user, and the exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_python(version: tuple[int, ...]) -> None:
    """Python >= 3.11 (the trainer's config loader is tomllib, new in 3.11)."""
    if tuple(version[:2]) < MIN_PYTHON:
        have = ".".join(map(str, version[:3]))
        raise CheckFailed(
            EXIT_PYTHON,
            f"Python {have}: the GPU check needs Python >= 3.11 (the trainer reads its config with tomllib); "
            "run it with python3.11 or newer",
        )


def min_driver(cuda: str) -> str:
    """The oldest NVIDIA driver that runs code built with CUDA ``cuda`` ("13.0"): that version's minimum in
    infra/pools/ami_drivers.py, else (minor-version compatibility) the lowest minimum recorded for its
    major."""
    from infra.pools.ami_drivers import CUDA_MIN_DRIVER, version_key

    mm = ".".join(cuda.split(".")[:2])
    if mm in CUDA_MIN_DRIVER:
        return CUDA_MIN_DRIVER[mm]
    same_major = [d for v, d in CUDA_MIN_DRIVER.items() if v.split(".")[0] == mm.split(".")[0]]
    if not same_major:
        raise CheckFailed(
            EXIT_DRIVER,
            f"CUDA {cuda}: its minimum driver is not recorded; add it to infra/pools/ami_drivers.py "
            "CUDA_MIN_DRIVER from https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver",
        )
    return min(same_major, key=version_key)


def check_driver(driver: str, cuda: str, torch_version: str) -> None:
    """The driver is at least what torch's CUDA needs."""
    from infra.pools.ami_drivers import version_key

    need = min_driver(cuda)
    if version_key(driver) < version_key(need):
        raise CheckFailed(
            EXIT_DRIVER,
            f"NVIDIA driver {driver} is older than {need}, the minimum for CUDA {cuda} "
            f"(torch {torch_version}); install a driver >= {need}, or use a torch built for an older CUDA",
        )


def read_driver() -> str | None:
    """The NVIDIA kernel driver's version ("580.159.03"), from nvidia-smi or /proc; ``None`` when neither
    answers (no NVIDIA driver)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run(
                [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip().splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def gpu_checks() -> dict[str, Any]:
    """The driver against torch's CUDA, then CUDA itself; the facts found, for the report."""
    try:
        import torch
    except ImportError as exc:
        raise CheckFailed(
            EXIT_NO_CUDA, f"torch is not importable ({exc}); use the Python that holds torch"
        ) from None
    cuda = torch.version.cuda
    if not cuda:
        raise CheckFailed(
            EXIT_NO_CUDA, f"torch {torch.__version__} is a CPU build: no CUDA; use a CUDA build of torch"
        )
    driver = read_driver()
    if driver is not None:
        check_driver(driver, cuda, torch.__version__)
    if not torch.cuda.is_available():
        found = f"driver {driver}" if driver else "no NVIDIA driver found (nvidia-smi, /proc/driver/nvidia)"
        raise CheckFailed(
            EXIT_NO_CUDA,
            f"CUDA is not available to torch {torch.__version__} (CUDA {cuda}; {found}); run this on a "
            "machine with an NVIDIA GPU, or pass --dry-run for the CPU check",
        )
    if driver is None:
        print("warning: the NVIDIA driver version could not be read; its check was skipped", file=sys.stderr)
    return {"cuda": cuda, "driver": driver, "gpu": torch.cuda.get_device_name(0)}


def make_shards(out: Path, tokens: int) -> None:
    """Byte-level token shards of this repository's docs, repeated to ``tokens`` tokens (no download)."""
    import numpy as np

    from trainer.tools.make_shards import encode, write_shards

    text = "\n\n".join(p.read_text() for p in sorted((REPO / "docs").rglob("*.md")))
    base = encode(text)
    reps = tokens // len(base) + 1
    write_shards(np.tile(base, reps)[:tokens], out, shard_tokens=8 << 20)


def step_figures(stdout: str, warmup: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trainer's ``start`` event and its step records past ``warmup``."""
    from bench.gpu.stats import trainer_events

    starts = trainer_events(stdout, "start")
    steps = [s for s in trainer_events(stdout, "step") if s["step"] > warmup]
    if not starts or not steps:
        raise CheckFailed(EXIT_TRAINER, f"the trainer printed no start event or no step after step {warmup}")
    return starts[-1], steps


def peak_for(gpu: str | None, override: float | None) -> tuple[float | None, str]:
    """The peak FLOP/s MFU is measured against, and where it comes from."""
    if override:
        return override, "--peak-flops (given on the command line)"
    if gpu is None:
        return None, "none: no GPU (pass --peak-flops for an MFU against a peak of your choice)"
    from trainer.training.metrics import PEAK_BF16_SOURCES, peak_entry

    entry = peak_entry(gpu)
    if entry is None:
        return None, f"none: {gpu} is not in trainer/training/metrics.py PEAK_BF16_FLOPS (pass --peak-flops)"
    key, flops = entry
    return flops, PEAK_BF16_SOURCES.get(
        key, f"vendor data sheet ({key}, trainer/training/metrics.py PEAK_BF16_FLOPS)"
    )


def run(args: argparse.Namespace, facts: dict[str, Any], t0: float) -> dict[str, Any]:
    """Make the shards, run the trainer, and build the report."""
    import torch

    from bench.gpu.stats import median
    from trainer.config import load_config
    from trainer.training.model import GPT

    config = REPO / "trainer" / "configs" / ("debug.toml" if args.dry_run else "gpt2_124m.toml")
    steps = args.steps or (6 if args.dry_run else 40)
    warmup = args.warmup if args.warmup is not None else (2 if args.dry_run else 10)
    if steps <= warmup:
        raise SystemExit(f"--steps={steps} must be above --warmup={warmup}")
    if args.checkpoint and Path(args.checkpoint).exists() and any(Path(args.checkpoint).iterdir()):
        # the trainer would resume from what is there instead of training
        raise SystemExit(f"--checkpoint={args.checkpoint} is not empty: pass a new folder")
    work = Path(tempfile.mkdtemp(prefix="aiplat-train-bench-", dir=args.work))
    try:
        sets = [
            f"data.source={work / 'shards'}",
            f"data.cache_dir={work / 'cache'}",
            # Checkpoints only where part 2 serves them (the loop times a step before it saves).
            *(
                [
                    f"checkpoint.uri={args.checkpoint}",
                    f"checkpoint.interval={steps}",
                    "checkpoint.async_save=false",
                ]
                if args.checkpoint
                else ["checkpoint.uri="]
            ),
            f"train.steps={steps}",
            "metrics.port_base=0",
            "metrics.log_interval=1",
            *(["train.compile=false"] if args.dry_run else []),
        ]
        cfg = load_config(config, sets)
        tokens_per_step = cfg.train.micro_batch * cfg.train.grad_accum * cfg.model.seq_len
        make_shards(work / "shards", (steps + 2) * tokens_per_step + cfg.model.seq_len + 1)
        cmd = [sys.executable, "-m", "trainer.train", "--config", str(config)]
        for kv in sets:
            cmd += ["--set", kv]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        left = args.budget_s - (time.monotonic() - t0)
        try:
            r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=max(left, 1))
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-2000:]
            tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
            raise CheckFailed(
                EXIT_BUDGET,
                f"the trainer did not finish {steps} steps within the {args.budget_s:g} s budget "
                f"(--budget-s); its last output:\n{tail}",
            ) from None
        if r.returncode != 0:
            raise CheckFailed(EXIT_TRAINER, f"the trainer exited {r.returncode}:\n{r.stderr[-3000:]}")
        start, measured = step_figures(r.stdout, warmup)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    with torch.device("meta"):  # the trainer's own model code, without allocating its weights
        model = GPT(cfg.model)
    flops_per_token = model.flops_per_token()
    tokens_per_s = median(s["tokens_per_s"] for s in measured)
    peak, source = peak_for(facts.get("gpu"), args.peak_flops)
    return {
        "check": "trainer",
        "mode": "dry-run" if args.dry_run else "gpu",
        "model": cfg.model.size,
        "params": start["params"],
        "params_non_embedding": model.num_params(),
        "config": str(config.relative_to(REPO)),
        "dtype": start["dtype"],
        "compile": cfg.train.compile,
        "checkpoint": args.checkpoint,
        "device": start["device"],
        "seq_len": cfg.model.seq_len,
        "tokens_per_step": tokens_per_step,
        "steps": steps,
        "warmup_steps": warmup,
        "steps_measured": len(measured),
        "step_s": median(s["step_s"] for s in measured),
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops_per_token,
        "mfu": flops_per_token * tokens_per_s / peak if peak else None,
        "mfu_formula": MFU_FORMULA,
        "peak_flops": peak,
        "peak_flops_source": source,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": facts.get("gpu"),
        "driver": facts.get("driver"),
        "wall_s": time.monotonic() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="bench/gpu/train_bench.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--dry-run", action="store_true", help="the debug model on CPU, no compile, a few steps")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (default 40; 6 with --dry-run)")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out (default 10; 2 with --dry-run)")
    ap.add_argument("--budget-s", type=float, default=300.0, help="the whole check's time limit (seconds)")
    ap.add_argument("--peak-flops", type=float, default=None, help="peak FLOP/s for MFU instead of the table")
    ap.add_argument("--work", default=None, help="where the temporary shards go (default: the temp dir)")
    ap.add_argument(
        "--checkpoint", default=None, help="keep the final checkpoint in this folder (for part 2)"
    )
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    sys.path.insert(0, str(REPO))
    try:
        check_python(sys.version_info)
        facts = {"driver": read_driver()} if args.dry_run else gpu_checks()
        report = run(args, facts, t0)
    except CheckFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
