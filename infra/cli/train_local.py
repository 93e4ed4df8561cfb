"""``aiplat train run-local -s STACK -f job.yaml [--drill sigterm[:STEP]] [SCRIPT ARGS...]``: the job file's
job on this machine, checked as ``render``/``submit`` check it, then run as the cluster would run it with CPU
ranks against a local S3 (``infra/ops/run_local.py``). Arguments it does not know go to the job's command,
so ``--steps 6`` reaches the script."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from infra.cli.common import EXIT_CONFIG, add_stack_selection, print_error
from infra.cli.train_build import check_job, runtime_grace_s
from infra.core.errors import ConfigError, ConfigErrors
from infra.io.job_files import load_job_file
from infra.ops import run_local
from infra.storage.config.storage import BucketPurpose

DRILL_HELP = (
    "sigterm[:STEP]: SIGTERM once a checkpoint at or after STEP (default: any) is committed, then rerun"
)


def add_parser(cmds: argparse._SubParsersAction) -> None:
    r = cmds.add_parser(
        "run-local",
        help="run a job file on this machine: CPU ranks under torchrun, the job contract, a local S3",
        description="Check the job file as render and submit do, then run its command here under torchrun "
        "with --nproc CPU ranks (gloo), with every variable of the job contract set as the stack's training "
        "runtime sets it, against a local S3 (moto) holding the stack's buckets, the team's data uploaded "
        "from --data. Unknown arguments are appended to the job's command (e.g. --steps 6). With --drill, a "
        "preemption: SIGTERM after a committed checkpoint, SIGKILL at the end of the window, and the next "
        "attempt, which should resume from it. Exit: the last attempt's exit code; 2 refused job file.",
    )
    add_stack_selection(r, many=False)
    r.add_argument("-f", "--file", type=Path, required=True, metavar="JOB_FILE", help="the job file (YAML)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE")
    r.add_argument("--nproc", type=int, default=2, help="CPU ranks (default 2)")
    r.add_argument(
        "--data",
        type=Path,
        help="local folder uploaded under AIPLAT_DATA_URI (default: corpus/ beside the file)",
    )
    r.add_argument("--drill", metavar="sigterm[:STEP]", help=DRILL_HELP)
    r.add_argument("--timeout", type=float, default=1800, help="seconds an attempt may run (default 1800)")
    r.add_argument("--verbose", "-v", action="store_true", help="also print the stack's own warnings")
    r.set_defaults(run=run_run_local, passthrough=True)


def _drill(value: str | None) -> int | None:
    if value is None:
        return None
    kind, _, step = value.partition(":")
    if kind != "sigterm" or (step and not step.isdigit()):
        raise ConfigErrors([ConfigError("--drill", value, "use --drill sigterm or --drill sigterm:STEP")])
    return int(step) if step else 0


def build(args: argparse.Namespace, err: Console) -> run_local.LocalJob:
    """The job checked against the stack and laid out for this machine."""
    overrides = []
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigErrors([ConfigError("--set", item, "use --set field=value")])
        overrides.append((key.strip(), value))
    job = load_job_file(args.file, overrides)
    built = check_job(args.stack, job, err, stacks_dir=args.stacks_dir, verbose=args.verbose)
    spec, cfg = job.spec, built.cfg
    assert cfg.training is not None
    command, notes = run_local.resolve_command([*spec.command, *args.extra], args.file.resolve().parent)
    restarts = cfg.training.runtime.worker_restarts if spec.max_restarts is None else spec.max_restarts
    window = spec.timeouts.preemption_window_s or runtime_grace_s(cfg)
    trainer = built.doc["spec"]["trainer"]
    env = {e["name"]: e["value"] for e in trainer.get("env", []) if "value" in e}
    env.update(AIPLAT_TRAINJOB=spec.name, AIPLAT_PREEMPTION_WINDOW_S=str(window))
    return run_local.LocalJob(
        name=spec.name,
        argv=run_local.torchrun_argv(
            command, nproc=args.nproc, max_restarts=restarts, launcher=spec.launcher.value
        ),
        env=env,
        buckets=[cfg.bucket_name(BucketPurpose.datasets), cfg.bucket_name(BucketPurpose.checkpoints)],
        data_uri=env["AIPLAT_DATA_URI"],
        checkpoint_uri=env["AIPLAT_CHECKPOINT_URI"],
        window_s=window,
        notes=notes,
    )


def run_run_local(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        drill = _drill(args.drill)
        job = build(args, err)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    data = args.data
    if data is None and (args.file.resolve().parent / "corpus").is_dir():
        data = args.file.resolve().parent / "corpus"
    import logging

    from trainer.tools.moto_server import MotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the local S3's request log is not the job's
    server = MotoServer()
    server.start()
    try:
        return run_local.run(
            job,
            data_dir=data,
            drill_step=drill,
            timeout_s=args.timeout,
            say=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True),
            s3_env=server.env(),
            s3=server.client(),
        )
    finally:
        server.stop()
