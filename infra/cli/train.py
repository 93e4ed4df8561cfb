"""``aiplat train``: TrainJobs for ``kubectl``, so a run needs no ``pulumi up``; ``submit/list/logs/cancel``
reach the cluster themselves (``infra/cli/train_jobs.py``).

``aiplat train render --stack S --config FILE --nodes N`` prints the TrainJob of a run of the bundled
trainer on the stack's runtime; ``aiplat train render --stack S -f job.yaml`` the TrainJob of a job file
(any image of the team's, any command: ``infra/jobs/config.py``); ``aiplat train bandwidth-check --stack S``
prints a fresh bandwidth check. Both are built by the
same code as the stack's own TrainJobs (``infra/training/documents/stack.py``), pass the same rules and are
validated against the Trainer v2.3.0 CRD model and the Kubernetes schema before they are printed.
Warnings go to stderr, the YAML to stdout: ``aiplat train render ... | kubectl apply -f -``.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console

from infra.cli import train_jobs, train_local, train_why
from infra.cli.common import EXIT_CONFIG, EXIT_OK, add_stack_selection, print_error
from infra.cli.train_build import (
    add_run_arguments,
    build_job,
    build_run,
    check_stack,
    runtime_facts,
    validated,
)
from infra.core.errors import ConfigError, ConfigErrors
from infra.core.project import CONFIG_KEY
from infra.core.trainjobs import pod_name_length
from infra.io.stackfiles import load_stack_config
from infra.schema.parse import parse_platform_config
from infra.schema.platform import PlatformConfig
from infra.training.documents import stack as training_stack


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="TrainJobs: render, run-local, submit, list, why, logs, cancel, or a bandwidth check",
        description="TrainJobs on the stack's training runtime: `render` a run (YAML for `kubectl apply`) or "
        "a `bandwidth-check`; `submit` one to a team's queue, `list` the queues, read a rank's `logs`, "
        "`cancel` a job (through the cluster's Kubernetes API). Exit codes: each subcommand's help.",
    )
    cmds = p.add_subparsers(dest="train_command", required=True)

    r = cmds.add_parser(
        "render",
        help="print the TrainJob of a job file or of a bundled-trainer run on the stack's runtime",
        description="Print a TrainJob (YAML) for `kubectl apply -f -`: of a job file (-f: your image and "
        "command, docs/reference/job-file.md) or of a run of the bundled trainer (--config). Exit 0, or 2 "
        "when the stack, the job file, the trainer config or the run is refused (one line each).",
    )
    add_run_arguments(r)
    r.add_argument(
        "--team",
        help="team (stack config teams) whose queue, namespace and data the run uses; required when the "
        "stack declares teams",
    )
    r.add_argument(
        "--priority",
        help="WorkloadPriorityClass (queueing.priority_classes; default: the team's default_priority)",
    )
    r.add_argument(
        "--suspend",
        action="store_true",
        help="create it suspended (with a team: unqueued until labelled kueue.x-k8s.io/queue-name=<team>)",
    )
    r.set_defaults(run=run_render)

    # submit, list, logs, cancel: through the cluster's API (a module of their own)
    train_jobs.add_parsers(cmds)
    train_why.add_parser(cmds)
    train_local.add_parser(cmds)

    b = cmds.add_parser(
        "bandwidth-check",
        help="print a bandwidth-check TrainJob (all-reduce bus bandwidth over the runtime's pool)",
        description="Print the all-reduce bandwidth check as a TrainJob (YAML) for `kubectl create -f -`; it "
        "fails below the instance type's threshold (infra/pools/busbw.py).",
    )
    add_stack_selection(b, many=False)
    b.add_argument("--nodes", type=int, help="nodes to span (default: training.bandwidth_check.nodes)")
    b.add_argument("--name", help="TrainJob name (default: bandwidth-check-<UTC time>)")
    b.set_defaults(run=run_bandwidth)


def _emit(doc: dict[str, Any], cfg: PlatformConfig, console: Console) -> None:
    validated(doc, cfg)
    console.out(yaml.safe_dump(doc, sort_keys=False), end="", highlight=False)


def run_render(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.file is not None:
        try:
            job = build_job(args, err)
        except ConfigErrors as exc:
            print_error(err, args.stack, exc, debug=args.debug)
            return EXIT_CONFIG
        _emit(job.doc, job.cfg, console)
        return EXIT_OK
    try:
        built = build_run(args, err, team=args.team, priority=args.priority)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    _emit(built.doc, built.cfg, console)
    return EXIT_OK


def run_bandwidth(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        cfg = load_stack_config(args.stack, args.stacks_dir)
        if cfg.training is None:
            raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.training", "the stack has no training section")])
        name = args.name or f"bandwidth-check-{datetime.now(UTC):%Y%m%d-%H%M%S}"
        raw = cfg.model_dump(mode="json", exclude_none=True)
        raw["training"]["runs"] = {}
        raw["training"]["bandwidth_check"]["enabled"] = True
        if args.nodes is not None:
            raw["training"]["bandwidth_check"]["nodes"] = args.nodes
        one = parse_platform_config(raw)
        check_stack(args.stack, one, err, args.stacks_dir)
        nodes = one.training.bandwidth_check.nodes if one.training else 1
        if pod_name_length(name, nodes) > 63:
            raise ConfigErrors(
                [ConfigError("--name", f"{name!r} gives pod names over 63 characters", "use a shorter name")]
            )
        doc, basis = training_stack.bandwidth_trainjob(one, runtime_facts(one), name=name, suspend=False)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    err.print(f"threshold: {basis}", markup=False, highlight=False, soft_wrap=True)
    _emit(doc, cfg, console)
    return EXIT_OK
