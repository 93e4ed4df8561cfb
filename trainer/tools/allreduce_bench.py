"""All-reduce bus bandwidth, measured and reported the way nccl-tests' ``all_reduce_perf`` does.

One process per GPU. On the cluster (the bandwidth-check TrainJob) the launch mode starts the ranks through
torch's elastic launcher and exits with their code (torchrun would turn every failure into 1)::

    python -m trainer.tools.allreduce_bench --launch --nnodes 2 --nproc-per-node 8 \\
        --rdzv-endpoint HOST:29500 --max-bytes 8589934592 --min-busbw 383.2

or under torchrun (``torchrun ... -m trainer.tools.allreduce_bench --max-bytes ...``).

``algbw = S / t`` (GB/s = 10^9 bytes/s) and ``busbw = algbw * 2 * (n - 1) / n`` (NVIDIA/nccl-tests
``doc/PERFORMANCE.md``), time averaged over ranks as ``-a 1``; each size is checked for correct results.
The check compares busbw at ``--max-bytes`` with ``--min-busbw``. NCCL on CUDA, gloo on CPU.
Exit codes: 0 passed (or no threshold), 2 (``BAD_INPUT``) below the threshold, wrong results or bad
arguments: a rerun on the same nodes would give the same answer, so the job fails at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

from trainer import exitcodes

BELOW_THRESHOLD = exitcodes.BAD_INPUT
ELEMENT_BYTES = 4  # float32, as all_reduce_perf's default -d float


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: ``algbw * 2 * (n - 1) / n`` (0 on one rank)."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    return algbw * 2.0 * (ranks - 1) / ranks


def sizes(min_bytes: int, max_bytes: int, factor: int) -> Iterator[int]:
    """Message sizes from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` (max always included),
    rounded down to whole float32 elements."""
    if min_bytes < ELEMENT_BYTES or max_bytes < min_bytes or factor < 2:
        raise ValueError("need 4 <= min_bytes <= max_bytes and factor >= 2")
    size = min_bytes
    while size < max_bytes:
        yield size - size % ELEMENT_BYTES
        size *= factor
    yield max_bytes - max_bytes % ELEMENT_BYTES


@dataclass(frozen=True)
class Result:
    """One row: like all_reduce_perf's size, count, time (us), algbw and busbw (GB/s)."""

    bytes: int
    count: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    correct: bool


def header() -> str:
    cols = (("size (B)", 14), ("count", 12), ("type", 6), ("redop", 5), ("time (us)", 12))
    cols += (("algbw", 8), ("busbw", 8), ("#wrong", 6))
    return " ".join(f"{name:>{width}}" for name, width in cols)


def row(r: Result) -> str:
    return (
        f"{r.bytes:>14} {r.count:>12} {'float':>6} {'sum':>5} {r.time_us:>12.1f} "
        f"{r.algbw_gbps:>8.2f} {r.busbw_gbps:>8.2f} {0 if r.correct else 1:>6}"
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m trainer.tools.allreduce_bench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--min-bytes", type=int, default=1 << 20, help="smallest message (default 1 MiB)")
    p.add_argument("--max-bytes", type=int, default=1 << 30, help="largest message (default 1 GiB)")
    p.add_argument("--factor", type=int, default=2, help="size multiplier between steps (default 2)")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size (default 5)")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size (default 20)")
    p.add_argument(
        "--min-busbw", type=float, default=None, help="fail below this bus bandwidth (GB/s) at --max-bytes"
    )
    p.add_argument("--json", default="", help="also write the results to this file (rank 0)")
    launch = p.add_argument_group("launch mode (one process per node starts the ranks)")
    launch.add_argument("--launch", action="store_true", help="start --nproc-per-node ranks on this node")
    launch.add_argument("--nnodes", type=int, default=1)
    launch.add_argument("--nproc-per-node", type=int, default=1)
    launch.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of the c10d rendezvous (first node)")
    launch.add_argument("--rdzv-timeout", type=int, default=900, help="seconds to wait for all nodes")
    args = p.parse_args(argv)
    if args.warmup < 0 or args.iters < 1:
        p.error("--warmup must be >= 0 and --iters >= 1")
    return args


def _measure(size: int, *, warmup: int, iters: int, device, world: int) -> Result:  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist

    count = size // ELEMENT_BYTES
    buf = torch.ones(count, dtype=torch.float32, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        dist.all_reduce(buf)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    sync()
    elapsed = (time.perf_counter() - t0) / iters
    # average over ranks, like all_reduce_perf -a 1
    t = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    seconds = float(t.item()) / world
    # correctness: every rank contributes rank + 1, the sum is n (n + 1) / 2 everywhere
    buf.fill_(float(dist.get_rank() + 1))
    dist.all_reduce(buf)
    want = world * (world + 1) / 2
    ok = torch.tensor([1 if bool(torch.all(buf == want)) else 0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return Result(
        bytes=size,
        count=count,
        time_us=seconds * 1e6,
        algbw_gbps=algbw,
        busbw_gbps=bus_bandwidth(algbw, world),
        correct=bool(ok.item()),
    )


LAUNCH_ONLY = ("--launch", "--nnodes", "--nproc-per-node", "--rdzv-endpoint", "--rdzv-timeout")


def _rank_argv(argv: Sequence[str]) -> list[str]:
    """The benchmark's own arguments, without the launch-mode ones (``--opt=value`` or ``--opt value``)."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in LAUNCH_ONLY:
            skip = "=" not in a and name != "--launch"
            continue
        out.append(a)
    return out


def launch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Start the ranks of this node with torch's elastic launcher and return their exit code: 0, or the
    failed rank's own code (2 below the threshold), where torchrun would exit 1 for any failure."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if args.nnodes < 1 or args.nproc_per_node < 1:
        print("error: --nnodes and --nproc-per-node must be >= 1", file=sys.stderr)
        return BELOW_THRESHOLD
    config = LaunchConfig(
        min_nodes=args.nnodes,
        max_nodes=args.nnodes,
        nproc_per_node=args.nproc_per_node,
        run_id="allreduce-bench",
        rdzv_backend="c10d",
        rdzv_endpoint=args.rdzv_endpoint or "localhost:0",
        rdzv_configs={"timeout": args.rdzv_timeout},
        max_restarts=0,
    )
    try:
        elastic_launch(config, sys.executable)("-m", "trainer.tools.allreduce_bench", *_rank_argv(argv))
    except ChildFailedError as exc:
        codes = sorted({f.exitcode for f in exc.failures.values()})
        code = BELOW_THRESHOLD if BELOW_THRESHOLD in codes else exitcodes.CRASH
        print(f"error: benchmark ranks failed with exit codes {codes}", file=sys.stderr)
        return code
    return exitcodes.OK


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table and a JSON summary on rank 0, return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parse(argv)
        steps = list(sizes(args.min_bytes, args.max_bytes, args.factor))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BELOW_THRESHOLD
    if args.launch:
        return launch(args, argv)
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    try:
        world, rank = dist.get_world_size(), dist.get_rank()
        results = [
            _measure(s, warmup=args.warmup, iters=args.iters, device=device, world=world) for s in steps
        ]
        if rank == 0:
            print(f"# all-reduce, {world} ranks, backend {dist.get_backend()}, in-place float32 sum")
            print(header())
            for r in results:
                print(row(r))
    finally:
        dist.destroy_process_group()
    last = results[-1]
    wrong = [r.bytes for r in results if not r.correct]
    passed = not wrong and (args.min_busbw is None or last.busbw_gbps >= args.min_busbw)
    summary = {
        "metric": "allreduce_busbw",
        "ranks": world,
        "bytes": last.bytes,
        "busbw_gbps": round(last.busbw_gbps, 3),
        "algbw_gbps": round(last.algbw_gbps, 3),
        "min_busbw_gbps": args.min_busbw,
        "wrong_sizes": wrong,
        "passed": passed,
    }
    if rank == 0:
        print(json.dumps(summary), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"summary": summary, "results": [asdict(r) for r in results]}, f, indent=1)
        if wrong:
            print(f"error: wrong all-reduce results at sizes {wrong}", file=sys.stderr)
        elif not passed:
            print(
                f"error: bus bandwidth {last.busbw_gbps:.2f} GB/s at {last.bytes} bytes is below "
                f"{args.min_busbw} GB/s (docs/platform/training.md, 'Bandwidth check': what to check "
                "when it is low)",
                file=sys.stderr,
            )
    return exitcodes.OK if passed else BELOW_THRESHOLD


if __name__ == "__main__":
    sys.exit(main())
