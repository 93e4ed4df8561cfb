"""``aiplat train run-local``: a team's job file run on this machine as the cluster would run it, before it
costs a GPU hour: the job's own command under torchrun with CPU ranks (gloo), every variable of the job
contract set as the training runtime sets it (docs/platform/job-contract.md), against a local S3 (moto's
server on 127.0.0.1) holding the stack's buckets with the team's data uploaded under its prefix.

``--drill sigterm[:STEP]`` plays a preemption: once a checkpoint at or after STEP is committed (its
manifest written, the trainer's definition: ``infra/io/checkpoints.py``), torchrun gets SIGTERM as the
kubelet sends it, SIGKILL at the end of the preemption window, and the job runs again as the next attempt,
from the same ``AIPLAT_CHECKPOINT_URI``: what it prints shows where it resumed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.core.errors import ConfigError, ConfigErrors
from infra.io.checkpoints import last_committed_step
from infra.io.environ import environment

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
KILL_MARGIN_S = 5  # torchrun's own exit after SIGTERM (its shutdown timeout is the window less 5 s)
POLL_S = 0.5


@dataclass(frozen=True)
class LocalJob:
    """What one local run of a job is: its argv, its environment (the contract and the job's own), the
    buckets the local S3 must hold and where the team's data goes."""

    name: str
    argv: list[str]
    env: dict[str, str]
    buckets: list[str]
    data_uri: str
    checkpoint_uri: str
    window_s: int
    notes: list[str] = field(default_factory=list)


def resolve_command(command: list[str], job_dir: Path) -> tuple[list[str], list[str]]:
    """The job's command with its script found on this machine: the path as given, else the file of the
    same name beside the job file (the image's ``/app/train.py`` is the repository's ``train.py``)."""
    first = command[0]
    if first == "-m" or Path(first).is_file():
        return list(command), []
    beside = job_dir / Path(first).name
    if beside.is_file():
        return [str(beside), *command[1:]], [f"running {beside} for the image's {first}"]
    raise ConfigErrors(
        [
            ConfigError(
                "command",
                f"{first!r} is a path in the image and {beside} does not exist here",
                "run from where the script is, or --set command=[./train.py, ...]",
            )
        ]
    )


def torchrun_argv(command: list[str], *, nproc: int, max_restarts: int, launcher: str) -> list[str]:
    """The pod's command line on one machine: torchrun standalone (one node, ``nproc`` ranks) for launcher
    torchrun, the command itself for launcher none."""
    if launcher != "torchrun":
        return list(command)
    return [
        *TORCHRUN,
        "--standalone",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={max_restarts}",
        *command,
    ]


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (torchrun starts each rank in a session of its own)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    for pid in _descendants(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def run_attempt(
    job: LocalJob,
    attempt: int,
    *,
    drill_step: int | None,
    timeout_s: float,
    say: Callable[[str], None],
) -> int:
    """One attempt: the command with ``AIPLAT_ATTEMPT_ID`` of its own; with ``drill_step``, SIGTERM once a
    checkpoint at or after that step is committed and SIGKILL at the end of the window. Its exit code."""
    env = {**os.environ, **job.env, "AIPLAT_ATTEMPT_ID": f"{job.name}-local-{attempt}"}
    proc = subprocess.Popen(job.argv, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while drill_step is not None and proc.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError
            step = last_committed_step(job.checkpoint_uri)
            if step is not None and step >= drill_step:
                say(f"drill: step {step} committed; SIGTERM to torchrun, SIGKILL in {job.window_s} s")
                proc.send_signal(signal.SIGTERM)
                try:
                    return proc.wait(timeout=job.window_s + KILL_MARGIN_S)
                except subprocess.TimeoutExpired:
                    say("drill: the window ran out; SIGKILL, as the kubelet does")
                    _kill_tree(proc)
                    return -signal.SIGKILL
            time.sleep(POLL_S)
        return proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except (TimeoutError, subprocess.TimeoutExpired):
        say(f"run-local: attempt {attempt} still running after {timeout_s:.0f} s; killed")
        _kill_tree(proc)
        return 124
    finally:
        if proc.poll() is None:
            _kill_tree(proc)


def run(
    job: LocalJob,
    *,
    data_dir: Path | None,
    drill_step: int | None,
    timeout_s: float,
    say: Callable[[str], None],
    s3_env: dict[str, str],
    s3: object,
) -> int:
    """Upload the team's data, run the job (twice with a drill) and say where each attempt resumed."""
    for note in job.notes:
        say(f"run-local: {note}")
    for bucket in job.buckets:
        with contextlib.suppress(Exception):  # already there (a second run in one process)
            s3.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    bucket, _, prefix = job.data_uri.removeprefix("s3://").partition("/")
    files = sorted(p for p in data_dir.rglob("*") if p.is_file()) if data_dir else []
    for p in files:
        key = prefix + p.relative_to(data_dir).as_posix()  # type: ignore[arg-type]
        s3.put_object(Bucket=bucket, Key=key, Body=p.read_bytes())  # type: ignore[attr-defined]
    say(f"run-local: local S3 at {s3_env['AWS_ENDPOINT_URL']}; {len(files)} data files under {job.data_uri}")
    say(f"run-local: {' '.join(job.argv)}")
    with environment(s3_env):  # the ranks and the committed-step probe read the same local store
        rc = run_attempt(job, 0, drill_step=drill_step, timeout_s=timeout_s, say=say)
        if drill_step is None:
            say(f"run-local: exit {rc}; last committed step {last_committed_step(job.checkpoint_uri)}")
            return rc
        committed = last_committed_step(job.checkpoint_uri)
        # torchrun exits 1 after a SIGTERM whatever its ranks return; on the cluster the pod is a
        # DisruptionTarget then, which the failure policy never counts (docs/platform/job-contract.md)
        how = "stopped" if rc in (1, 143, -signal.SIGKILL) else "ended unexpectedly"
        say(f"drill: attempt 0 {how} (exit {rc}); the next attempt resumes from committed step {committed}")
        rc = run_attempt(job, 1, drill_step=None, timeout_s=timeout_s, say=say)
        say(f"run-local: attempt 1 exit {rc}; last committed step {last_committed_step(job.checkpoint_uri)}")
    return rc
