"""Process-group setup: NCCL (+ gloo for CPU tensors) on CUDA, gloo on CPU.

``torchrun`` exports RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT; a plain ``python -m trainer.train``
runs as a world of one on a free local port so that the same code path is used everywhere.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from trainer.errors import BadInput, StoreUnavailable, TrainerError
from trainer.run.ports import free_port

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    restart_count: int  # torchrun elastic restarts so far (TORCHELASTIC_RESTART_COUNT)
    owns_group: bool = True  # this call created the default process group (and its owner destroys it)

    @property
    def is_main(self) -> bool:
        """True on global rank 0, which writes manifests and prunes old checkpoints."""
        return self.rank == 0


def init_distributed(timeout_s: float) -> DistInfo:
    """Initialise the default process group and pick this rank's device.

    On CUDA the group gets two backends, ``cuda:nccl,cpu:gloo``: NCCL carries the DDP gradient all-reduce
    (over EFA through the aws-ofi-nccl plugin), gloo carries CPU tensors, which
    ``torch.distributed.checkpoint.async_save`` requires
    (https://pytorch.org/docs/stable/distributed.checkpoint.html#torch.distributed.checkpoint.state_dict_saver.async_save).
    """
    if "RANK" not in os.environ:
        os.environ.update(
            RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())
        )
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ["WORLD_SIZE"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "cuda:nccl,cpu:gloo"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group(
            backend=backend,
            timeout=datetime.timedelta(seconds=timeout_s),
            **({"device_id": device} if device.type == "cuda" else {}),
        )
    return DistInfo(
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
        device=device,
        restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        owns_group=owns,
    )


def destroy_distributed() -> None:
    """Tear the process group down (idempotent)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def run_agreed(fn: Callable[[], T] | None, world_size: int) -> T | None:
    """Run ``fn`` on the ranks that pass one (``None`` elsewhere), then agree on the outcome: if any rank
    failed, every rank raises that rank's error (the lowest failing rank's), so no rank is left waiting in a
    collective for a peer that already gave up. A :class:`TrainerError` keeps its exit code and one-line
    message; anything else becomes a ``RuntimeError`` naming the rank."""
    result: T | None = None
    failure: tuple[int | None, str] | None = None
    try:
        if fn is not None:
            result = fn()
    except TrainerError as exc:
        failure = (exc.code, str(exc))
    except Exception as exc:
        rank = dist.get_rank() if dist.is_initialized() else 0
        failure = (None, f"rank {rank}: {type(exc).__name__}: {exc}")
    if world_size > 1:
        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, failure)
        failure = next((f for f in gathered if f is not None), None)
    if failure is not None:
        code, message = failure
        if code is None:
            raise RuntimeError(message)
        raise error_for_code(code, message)
    return result


def error_for_code(code: int, message: str) -> TrainerError:
    """A :class:`TrainerError` carrying ``code`` (the matching subclass where there is one)."""
    for cls in (BadInput, StoreUnavailable):
        if cls.code == code:
            return cls(message)
    err = TrainerError(message)
    err.code = code
    return err
