"""Helpers for the trainer tests: torchrun launchers, log and checkpoint readers, an in-process job."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoint.checkpointer import Checkpointer, validate_checkpoint
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.config import CheckpointConfig, ModelConfig
from trainer.storage.hashing import MANIFEST
from trainer.tools.commands import DEBUG_CONFIG, REPO, trainer_command
from trainer.training.distributed import DistInfo
from trainer.training.model import GPT

PY = sys.executable
WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog",
    "while", "data", "shards", "train", "small", "models", "on", "spot", "nodes",
)  # fmt: skip


def make_corpus(n_docs: int = 300, seed: int = 0) -> str:
    """Deterministic pseudo-text."""
    rnd = random.Random(seed)
    return "\n\n".join(
        " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 150))) for _ in range(n_docs)
    )


# ----------------------------------------------------------------------------------------------- torchrun
def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Child environment: repo on PYTHONPATH, one thread per rank (2-core CI), no interactive CUDA."""
    # Not the pytest process's own world of one (the ``info`` fixture): a child starts its own.
    dist_vars = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in dist_vars and not k.startswith("TORCHELASTIC_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    # torchrun shares its rendezvous TCPStore with the workers by default; after an elastic restart the
    # workers can then read the previous attempt's gloo addresses and fail to connect
    # (https://github.com/pytorch/pytorch/issues/135712). The image sets the same opt-out.
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env.update(extra or {})
    return env


def run_overrides(run_dir: Path, shards: Path | str, **kv: Any) -> list[str]:
    """Common overrides for a test run writing to ``run_dir``."""
    base = {
        "data.source": str(shards),
        "data.cache_dir": str(run_dir / "cache"),
        "checkpoint.uri": str(run_dir / "ckpt"),
        "metrics.port_base": "0",
        "metrics.log_interval": "1",
        "metrics.log_file": str(run_dir / "log_rank{rank}.jsonl"),
    }
    base.update({k.replace("__", "."): str(v) for k, v in kv.items()})
    return [f"{k}={v}" for k, v in base.items()]


def run_job(
    nproc: int,
    overrides: list[str],
    timeout: float = 120,
    extra: list[str] | None = None,
    env: dict | None = None,
    launcher: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``nproc`` ranks (``trainer.run.launch``, or plain torchrun) to completion and return the
    process."""
    return subprocess.run(
        trainer_command(nproc, DEBUG_CONFIG, overrides, extra=extra or (), launcher=launcher),
        cwd=REPO,
        env=base_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_job(
    nproc: int,
    overrides: list[str],
    extra: list[str] | None = None,
    env: dict | None = None,
    log: Path | None = None,
    launcher: bool = True,
) -> subprocess.Popen[str]:
    """Start in the background; output goes to ``log`` (a file, so pipes never fill up)."""
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed by the child's exit
    return subprocess.Popen(
        trainer_command(nproc, DEBUG_CONFIG, overrides, extra=extra or (), launcher=launcher),
        cwd=REPO,
        env=base_env(env),
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def stop_process_group(proc: subprocess.Popen[str]) -> None:
    """Teardown: kill a launcher we started and its workers (its own session), if still running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def read_events(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """JSON log lines written by a rank (``metrics.log_file``)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if kind is None or rec["event"] == kind:
            out.append(rec)
    return out


def wait_for(pred: Any, timeout: float, what: str) -> Any:
    """Poll ``pred`` until truthy or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        val = pred()
        if val:
            return val
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def ok(r: subprocess.CompletedProcess[str]) -> None:
    """Assert a job exited 0, showing the ends of its output if not."""
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"


def logged_steps(run_dir: Path, rank: int = 0) -> list[int]:
    """Steps a rank logged (``step`` events), in order."""
    return [e["step"] for e in read_events(run_dir / f"log_rank{rank}.jsonl", "step")]


# The ``reference`` fixture's run (tests/trainer/conftest.py): 2 ranks, REF_STEPS steps, a checkpoint
# every REF_INTERVAL; an interrupted run of the same config must end with the same tensors, bit for bit.
REF_STEPS = 12
REF_INTERVAL = 3


def final_tensors(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    """Tensors of the verified local checkpoint ``run_dir/ckpt`` at ``step``."""
    d = run_dir / "ckpt" / step_dir_name(step)
    assert not validate_checkpoint(LocalStore(str(run_dir / "ckpt")), step, True)
    return load_checkpoint_tensors(d)


def load_checkpoint_tensors(ckpt_dir: Path) -> dict[str, torch.Tensor]:
    """All tensors of a local DCP checkpoint (model and optimizer), read offline without a process group;
    ``ckpt_dir`` is a step folder (its manifest names the attempt folder with DCP's files)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    attempt = json.loads((ckpt_dir / MANIFEST).read_text()).get("attempt", "")
    out = ckpt_dir.parent / f"{ckpt_dir.name}.pt"
    ckpt_dir = ckpt_dir / attempt if attempt else ckpt_dir
    dcp_to_torch_save(ckpt_dir, out)
    sd = torch.load(out, weights_only=False)
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            flat[prefix] = obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)

    walk("", {"model": sd["model"], "optim": sd["optim"]})
    return flat


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """Same keys, and every tensor equal bit for bit."""
    assert a.keys() == b.keys()
    diff = [k for k in a if not torch.equal(a[k], b[k])]
    assert not diff, f"{len(diff)} tensors differ, e.g. {diff[:3]}"


# ------------------------------------------------------------------------------ in-process checkpoints
class Pos:
    """Stand-in for the loader's position."""

    def __init__(self) -> None:
        self.offset = 0

    def state_dict(self) -> dict[str, int]:
        return {"global_offset": self.offset}

    def load_state_dict(self, s: dict[str, int]) -> None:
        self.offset = s["global_offset"]


class Job:
    """Model + optimizer + scheduler + position, stepped on a fixed batch."""

    def __init__(self, seed: int) -> None:
        torch.manual_seed(seed)
        self.model = GPT(ModelConfig())
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: 1.0 / (1 + s))
        self.pos = Pos()
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 257, (2, 33), generator=g)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.model(self.x[:, :-1], self.x[:, 1:]).backward()
            self.opt.step()
            self.opt.zero_grad()
            self.sched.step()
            self.pos.offset += 2

    def ckpt(self, uri: str, info: DistInfo, **kw: Any) -> Checkpointer:
        cfg = CheckpointConfig(uri=uri, **kw)
        return Checkpointer(
            cfg,
            info,
            self.model,
            self.opt,
            {"sched": self.sched, "data": self.pos},
            job_config={"model": dataclasses.asdict(self.model.cfg)},
            manifest_info={
                "run_id": "job-test",
                "data": {"tokenizer": {"tokenizer": "bytes", "vocab_size": 257, "eot_token": 256}},
            },
        )

    def params(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}
