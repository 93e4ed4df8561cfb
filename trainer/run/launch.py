"""Launch the trainer's ranks on this node; the process a training pod runs (its PID 1).

    python -m trainer.run.launch [torchrun options] --config FILE [--set section.key=value ...] [--debug]

Runs torch's elastic agent (every torchrun option accepted) with ``-m trainer.train`` as the worker, and
adds what Kubernetes needs (docs/trainer.md): one-time checks before any worker starts
(``trainer/run/preflight.py``); its exit code is the contract in ``trainer/exitcodes.py``, passed on from the
workers (``trainer/run/outcome.py``), where torchrun exits 1 for every failure; SIGTERM is forwarded and the
workers are given ``--shutdown-timeout`` (default ``checkpoint.shutdown_window_s``) to checkpoint; a worker
exiting with a contract code is not restarted, crashes are (up to ``--max-restarts``), and ranks blocked
on a dead one get a few seconds, not 30.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator
from types import FrameType
from typing import Any

from trainer import exitcodes
from trainer.config import load_config
from trainer.errors import BadInput, TrainerError
from trainer.run.outcome import ENV as OUTCOME_ENV
from trainer.run.outcome import read_outcomes

log = logging.getLogger("trainer.run.launch")

PEER_STOP_TIMEOUT_S = 5  # after a worker failed: how long its (blocked) peers get before SIGKILL
_ORDER = (
    exitcodes.BAD_INPUT,
    exitcodes.SAVE_FAILED,
    exitcodes.STORE_UNAVAILABLE,
    exitcodes.PREEMPTED_SAVE_FAILED,
    exitcodes.PREEMPTED,
)


class _Terminated(Exception):
    """SIGTERM before the agent installed its own handler (during the checks)."""


def combine_outcomes(codes: list[int | None], *, sigterm: bool) -> int:
    """The launcher's exit code from the codes its workers reported (``None``: killed, or crashed before
    reporting). Ranks agree on stops and failures, so they normally report the same code; when they do not,
    the most specific one wins, and after SIGTERM anything but "every rank committed" is 5."""
    if codes and all(c == exitcodes.OK for c in codes):
        return exitcodes.OK
    if sigterm:
        if codes and all(c == exitcodes.PREEMPTED for c in codes):
            return exitcodes.PREEMPTED
        return exitcodes.PREEMPTED_SAVE_FAILED
    reported = {c for c in codes if c is not None}
    return next((c for c in _ORDER if c in reported), exitcodes.CRASH)


def _contract_agent_class() -> type:
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    class ContractAgent(LocalElasticAgent):
        """torch's local elastic agent that does not restart workers after a contract exit code and does
        not wait 30 s for peers of a failed worker."""

        def _monitor_workers(self, worker_group: Any) -> Any:
            result = super()._monitor_workers(worker_group)
            if result.is_failed():
                final = sorted({f.exitcode for f in result.failures.values()} & exitcodes.FINAL)
                if final and self._remaining_restarts > 0:
                    log.warning(
                        "worker exit code %s (%s) is final: not restarting",
                        final[0],
                        exitcodes.name(final[0]),
                    )
                    self._remaining_restarts = 0
            return result

        def _stop_workers(self, worker_group: Any, *args: Any, **kwargs: Any) -> None:
            self._shutdown(timeout=PEER_STOP_TIMEOUT_S)

        def _start_workers(self, worker_group: Any) -> Any:
            result = super()._start_workers(worker_group)
            # When one worker fails, the process context closes the others itself (close() with its 30 s
            # default) before the agent sees the failure; they are blocked in a collective with the dead
            # rank and cannot save anything, so a few seconds is enough. Explicit timeouts (the SIGTERM
            # shutdown uses --shutdown-timeout) are kept.
            pcontext = self._pcontext
            close = pcontext.close

            def close_quickly(death_sig: Any = None, timeout: int = PEER_STOP_TIMEOUT_S) -> None:
                close(death_sig, timeout)

            pcontext.close = close_quickly
            return result

    return ContractAgent


@contextlib.contextmanager
def _use_contract_agent() -> Iterator[None]:
    """``torch.distributed.launcher.api.launch_agent`` builds a ``LocalElasticAgent`` by name; swap in ours
    for the duration (the rest of launch_agent: rendezvous, metrics, events, stays torch's own)."""
    from torch.distributed.launcher import api

    original = api.LocalElasticAgent
    api.LocalElasticAgent = _contract_agent_class()  # type: ignore[misc]
    try:
        yield
    finally:
        api.LocalElasticAgent = original  # type: ignore[misc]


def _torchrun_args(rest: list[str], config: str, overrides: list[str]) -> Any:
    """torchrun's own parser over the options we were given, with ``-m trainer.train`` as the script."""
    from torch.distributed import run as torchrun

    worker = ["--config", config]
    for o in overrides:
        worker += ["--set", o]
    targs = torchrun.parse_args([*rest, "--module", "trainer.train", *worker])
    # What torchrun's run() does before config_from_args:
    single_node_static = (
        targs.rdzv_backend == "static"
        and not targs.rdzv_endpoint
        and targs.master_port is None
        and torchrun.parse_min_max_nnodes(targs.nnodes)[1] == 1
    )
    if targs.standalone or single_node_static:
        targs.rdzv_backend, targs.rdzv_endpoint, targs.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    if targs.master_port is None:
        targs.master_port = 29500
    return targs


def _fixed_world_size(targs: Any) -> int | None:
    """nodes x ranks per node when the node count is fixed (``--nnodes N`` or ``N:N``), else None."""
    from torch.distributed import run as torchrun

    lo, hi = torchrun.parse_min_max_nnodes(targs.nnodes)
    try:
        nproc = torchrun.determine_local_world_size(targs.nproc_per_node)
    except ValueError as exc:  # e.g. "gpu" on a machine without one
        raise BadInput(f"--nproc-per-node={targs.nproc_per_node}: {exc}") from None
    return lo * nproc if lo == hi else None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code (``trainer/exitcodes.py``)."""
    ap = argparse.ArgumentParser(prog="trainer.run.launch", allow_abbrev=False, add_help=False)
    ap.add_argument("--config")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--debug", action="store_true")
    ap.add_argument("-h", "--help", action="store_true")
    args, rest = ap.parse_known_args(argv)
    if args.help:
        print(__doc__)
        return exitcodes.OK
    logging.basicConfig(
        level=logging.INFO,
        format="[launcher] %(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(args, rest)
    except _Terminated:
        # Before any worker started: nothing was trained since the newest committed checkpoint.
        print("trainer.run.launch: SIGTERM before the workers started; nothing to save", file=sys.stderr)
        return exitcodes.PREEMPTED
    except TrainerError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def _main(args: argparse.Namespace, rest: list[str]) -> int:
    from trainer.run.preflight import preflight

    if not args.config:
        raise BadInput("--config is required (a TOML file such as trainer/configs/debug.toml)")
    cfg = load_config(args.config, args.overrides)
    try:
        targs = _torchrun_args(rest, args.config, args.overrides)
    except SystemExit as exc:  # argparse already printed the usage error
        return exitcodes.BAD_INPUT if exc.code else exitcodes.OK
    world = _fixed_world_size(targs)
    pf = preflight(cfg, world)
    if pf.complete and pf.checkpoint is not None:
        print(
            f"trainer.run.launch: already complete: checkpoint at step {pf.checkpoint.step} >= "
            f"train.steps={cfg.train.steps}; no worker started",
            file=sys.stderr,
        )
        return exitcodes.OK
    for note in pf.notes:
        log.warning("%s", note)
    log.info(
        "checks passed: %d samples per epoch; %s",
        pf.num_samples,
        f"resuming from step {pf.checkpoint.step}" if pf.checkpoint else "no checkpoint yet: a fresh start",
    )
    if targs.shutdown_timeout is None and "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in os.environ:
        targs.shutdown_timeout = math.ceil(cfg.checkpoint.shutdown_window_s)
    return _run_agent(targs)


def _run_agent(targs: Any) -> int:
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher import api

    config, cmd, cmd_args = torchrun.config_from_args(targs)
    nproc = config.nproc_per_node
    outcome_dir = tempfile.mkdtemp(prefix="trainer-launch-")
    os.environ[OUTCOME_ENV] = outcome_dir
    sigterm = False
    failed: dict[int, int] = {}
    try:
        with _use_contract_agent():
            api.launch_agent(config, cmd, list(cmd_args))
        return exitcodes.OK
    except SignalException as exc:
        sigterm = exc.sigval == signal.SIGTERM
        if not sigterm:
            log.warning("stopped by %s", exc.sigval.name)
    except ChildFailedError as exc:
        failed = {rank: f.exitcode for rank, f in exc.failures.items()}
    finally:
        # The workers are gone; a late SIGTERM must not turn the bookkeeping below into a traceback.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        outcomes = read_outcomes(outcome_dir)
        shutil.rmtree(outcome_dir, ignore_errors=True)
    codes: list[int | None] = [o.code for o in outcomes.values()]
    for rank, code in failed.items():  # a contract code that left no file (should not happen)
        if rank not in outcomes and code in exitcodes.NAMES and len(codes) < nproc:
            codes.append(code)
    codes += [None] * max(0, nproc - len(codes))
    code = combine_outcomes(codes, sigterm=sigterm)
    messages = [o.message for o in sorted(outcomes.values(), key=lambda o: o.rank) if o.code == code]
    detail = messages[0] if messages else ""
    if code == exitcodes.PREEMPTED:
        print(
            f"trainer.run.launch: preempted; every rank reported a committed checkpoint (exit {code})",
            file=sys.stderr,
        )
    elif code == exitcodes.PREEMPTED_SAVE_FAILED:
        print(
            "error: preempted by SIGTERM, but no rank reported a committed checkpoint of its last step "
            f"(exit {code}); the next start resumes from the newest committed one",
            file=sys.stderr,
        )
    elif code == exitcodes.CRASH:
        print(
            f"error: a worker crashed (see its traceback above) and --max-restarts={config.max_restarts} "
            f"is used up (exit {code})",
            file=sys.stderr,
        )
    else:
        print(f"error: {detail or exitcodes.name(code)} (exit {code})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
