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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from infra.cli.common import EXIT_CONFIG, EXIT_OK, add_stack_selection, print_error, print_warning
from infra.core.errors import ConfigError, ConfigErrors
from infra.core.facts import InstanceFacts
from infra.core.project import CONFIG_KEY
from infra.core.trainjobs import grace_period_s, pod_name_length
from infra.io.job_files import JobFile, load_job_file
from infra.io.policypack import stack_allowlists
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import REPO, training_settings
from infra.jobs import documents as jobs_documents
from infra.jobs import rules as job_rules
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.stack.parse import parse_platform_config
from infra.stack.schema import PlatformConfig
from infra.training.documents import stack as training_stack


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="TrainJobs: render, submit, list, logs, cancel, or a bandwidth check",
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

    # submit, list, logs, cancel: through the cluster's API (a module of their own; it imports this one)
    from infra.cli import train_jobs

    train_jobs.add_parsers(cmds)

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


def _facts(cfg: PlatformConfig) -> InstanceFacts:
    """The runtime pool's instance type, from the offline AWS snapshot (the plan extra)."""
    from infra.io.snapshot import instance_facts

    assert cfg.training is not None
    itype = cfg.node_pools[cfg.training.runtime.pool].instance_type
    facts = instance_facts(itype, cfg.region)
    if facts is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.node_pools", f"{itype}: not in the AWS snapshot")])
    return facts


def _checked(stack: str, cfg: PlatformConfig, err: Console, stacks_dir: Path | None = None) -> None:
    """The same rules the program runs (those that need no AWS calls), warnings printed, errors raised."""
    ctx = RuleContext(
        cfg, stack=stack, trainer=training_settings(cfg), allowlists=stack_allowlists(stack, stacks_dir)
    )
    findings = run_rules(Phase.plan, ctx)
    for f in findings:
        if f.level is Level.warning:
            print_warning(err, stack, f.one_line())
    errors = [f.as_config_error() for f in findings if f.level is Level.error]
    if errors:
        raise ConfigErrors(errors)


def validated(doc: dict[str, Any], cfg: PlatformConfig) -> dict[str, Any]:
    """``doc`` once it validates against the Kubernetes schema and the Trainer CRD model."""
    # kubernetes-validate comes with the plan extra, like the AWS snapshot: the CLI imports without it
    from infra.io.kube_validate import validate_manifest

    problems = validate_manifest(doc, cfg.cluster.kubernetes_version)
    if problems:  # a bug of ours, not the user's: the documents are built from validated config
        raise RuntimeError("the rendered TrainJob does not validate:\n" + "\n".join(problems))
    return doc


def _emit(doc: dict[str, Any], cfg: PlatformConfig, console: Console) -> None:
    validated(doc, cfg)
    console.out(yaml.safe_dump(doc, sort_keys=False), end="", highlight=False)


def _with_run(cfg: PlatformConfig, name: str, run: dict[str, Any]) -> PlatformConfig:
    """The stack's config with ``run`` as its only declared run (validated like a stack file)."""
    raw = cfg.model_dump(mode="json", exclude_none=True)
    raw["training"]["runs"] = {name: run}
    raw["training"]["bandwidth_check"]["enabled"] = False
    return parse_platform_config(raw)


def team_choice(cfg: PlatformConfig, team: str | None, priority: str | None) -> tuple[str | None, str | None]:
    """``--team``/``--priority`` checked against the stack: a team is required when the stack declares
    teams (every run is queued) and refused when it declares none; one line naming the flag otherwise."""
    if not cfg.teams:
        if team is not None or priority is not None:
            raise ConfigErrors(
                [ConfigError("--team", "the stack declares no teams", "drop --team and --priority")]
            )
        return None, None
    if team is None:
        raise ConfigErrors(
            [
                ConfigError(
                    "--team", "the stack queues every run under a team", f"pass one of {sorted(cfg.teams)}"
                )
            ]
        )
    if team not in cfg.teams:
        raise ConfigErrors(
            [ConfigError("--team", f"{team!r} is not a team", f"use one of {sorted(cfg.teams)}")]
        )
    classes = sorted(cfg.queueing.priority_classes)
    if priority is not None and priority not in classes:
        raise ConfigErrors(
            [ConfigError("--priority", f"{priority!r} is not a priority class", f"use one of {classes}")]
        )
    return team, priority


def _config_path(path: str) -> str:
    p = Path(path)
    resolved = (p if p.is_absolute() else Path.cwd() / p).resolve()
    try:
        rel = resolved.relative_to(REPO / "trainer")
    except ValueError:
        raise ConfigErrors(
            [ConfigError("--config", f"{path}: not under trainer/ (only trainer/ is copied into the image)")]
        ) from None
    return f"trainer/{rel.as_posix()}"


def add_run_arguments(r: argparse.ArgumentParser) -> None:
    """The arguments that describe a run: ``render`` and ``submit`` take the same."""
    add_stack_selection(r, many=False)
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "-f",
        "--file",
        type=Path,
        metavar="JOB_FILE",
        help="job file (YAML): the team, image by digest, command, nodes... (docs/reference/job-file.md); "
        "the run flags below are the file's fields then",
    )
    what.add_argument(
        "--config",
        help="the bundled trainer: a trainer config in this repository, e.g. trainer/configs/gpt2_124m.toml",
    )
    r.add_argument("--nodes", type=int, help="nodes (pods) of the run (with --config: required)")
    r.add_argument("--name", help="TrainJob name (default: the config file's name)")
    r.add_argument(
        "--dataset",
        help="shards prefix in the datasets bucket (default: that of the stack's run with the same config)",
    )
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")


@dataclass(frozen=True)
class BuiltRun:
    """A run validated as the stack's own runs are, and its TrainJob."""

    cfg: PlatformConfig  # the stack's config with this run as its only one
    name: str
    config: str  # trainer/... path of the trainer config
    doc: dict[str, Any]
    facts: InstanceFacts


def build_run(
    args: argparse.Namespace, err: Console, *, team: str | None = None, priority: str | None = None
) -> BuiltRun:
    """The run the arguments describe, checked by the same rules as the stack's runs; raises
    ``ConfigErrors``."""
    cfg = load_stack_config(args.stack, args.stacks_dir)
    if cfg.training is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.training", "the stack has no training section")])
    if args.nodes is None:
        raise ConfigErrors([ConfigError("--nodes", "required with --config", "pass --nodes N")])
    config = _config_path(args.config)
    name = args.name or Path(config).stem.replace("_", "-").lower()
    dataset = args.dataset
    if dataset is None:
        same = {r.dataset for r in cfg.training.runs.values() if r.config == config}
        if len(same) != 1:
            raise ConfigErrors(
                [ConfigError("--dataset", f"no single declared run uses {config}; pass --dataset")]
            )
        dataset = same.pop()
    overrides: dict[str, str] = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigErrors([ConfigError("--set", item, "use --set section.key=value")])
        overrides[key.strip()] = value
    run: dict[str, Any] = {"config": config, "nodes": args.nodes, "dataset": dataset, "overrides": overrides}
    run["suspend"] = bool(getattr(args, "suspend", False))
    team, priority = team_choice(cfg, team, priority)
    if team is not None:
        run["team"] = team
        if priority is not None:
            run["priority"] = priority
    one = _with_run(cfg, name, run)
    _checked(args.stack, one, err, args.stacks_dir)
    assert one.training is not None
    facts = _facts(one)
    doc = training_stack.run_trainjob(one, name, one.training.runs[name], facts)
    return BuiltRun(cfg=one, name=name, config=config, doc=doc, facts=facts)


# What a job file holds: with -f these flags are refused, the file's fields are the one source.
JOB_FILE_FIELDS = {
    "nodes": "nodes",
    "name": "name",
    "dataset": "data",
    "overrides": "env or command",
    "team": "team",
    "priority": "priority",
    "suspend": "(jobs are queued: Kueue starts them)",
}


def _no_run_flags(args: argparse.Namespace) -> None:
    problems = []
    for flag, field in JOB_FILE_FIELDS.items():
        value = getattr(args, flag, None)
        if value not in (None, False, []):
            problems.append(
                ConfigError(
                    f"--{flag}",
                    f"the job file {args.file} is the job's one description",
                    f"drop --{flag} and set {field} in the file",
                )
            )
    if problems:
        raise ConfigErrors(problems)


def runtime_grace_s(cfg: PlatformConfig) -> int:
    """The runtime's pods' grace period: the runtime's trainer config's shutdown window plus the margin."""
    settings = training_settings(cfg)
    assert settings is not None and cfg.training is not None
    return grace_period_s(settings["runtime"].shutdown_window_s, cfg.training.runtime.grace_margin_s)


def team_job(
    stack: str,
    *,
    team: str,
    name: str,
    image: str | None = None,
    data: str | None = None,
    checkpoints: str | None = None,
    priority: str | None = None,
    stacks_dir: Path | None = None,
) -> jobs_documents.TeamJobSettings:
    """What a TrainJob of ``team`` on ``stack`` carries when something other than a job file builds it (the
    Kubeflow SDK in a notebook, docs/how-to/kubeflow-sdk.md): its namespace, the runtime, the queue and
    priority labels, the env contract and torchrun's options. ``image`` (the team's, by digest) is checked
    as a job file's is; ``ConfigErrors`` otherwise."""
    cfg = load_stack_config(stack, stacks_dir)
    if cfg.training is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.training", "the stack has no training section")])
    if team not in cfg.teams:
        raise ConfigErrors(
            [ConfigError("team", f"{team!r} is not a team", f"use one of {sorted(cfg.teams)}")]
        )
    if image is not None:
        problems = job_rules.image_problems(cfg, team, image, cfg.security.account.id)
        if problems:
            raise ConfigErrors(problems)
    return jobs_documents.team_job_settings(
        cfg,
        team=team,
        name=name,
        image=image,
        data=data,
        checkpoints=checkpoints,
        priority=priority,
        runtime_grace_s=runtime_grace_s(cfg),
    )


@dataclass(frozen=True)
class BuiltJob:
    """A job file's job, checked against the stack, and its TrainJob."""

    cfg: PlatformConfig  # the stack's config (its own runs and bandwidth check dropped)
    job: JobFile
    doc: dict[str, Any]
    facts: InstanceFacts


def build_job(args: argparse.Namespace, err: Console, *, account_id: str | None = None) -> BuiltJob:
    """The job of ``args.file`` on ``args.stack``: the file validated, the stack's rules run, the job
    checked against the stack (``infra/jobs/rules.py``); raises ``ConfigErrors`` (each line naming the
    file). ``account_id``: the stack's account when the caller knows it (submit: STS)."""
    _no_run_flags(args)
    job = load_job_file(args.file)
    cfg = load_stack_config(args.stack, args.stacks_dir)
    if cfg.training is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.training", "the stack has no training section")])
    raw = cfg.model_dump(mode="json", exclude_none=True)
    raw["training"]["runs"] = {}
    raw["training"]["bandwidth_check"]["enabled"] = False
    one = parse_platform_config(raw)
    _checked(args.stack, one, err, args.stacks_dir)
    facts = _facts(one)
    gpus = one.node_pools[one.training.runtime.pool].gpus_per_node or facts.gpu_count  # type: ignore[union-attr]
    findings = job_rules.job_problems(one, job.spec, gpus_per_node=gpus)
    for f in findings:
        if f.level is Level.warning:
            print_warning(err, args.stack, f"{job.source}: {f.one_line()}")
    errors = [f.as_config_error() for f in findings if f.level is Level.error]
    known = account_id or one.security.account.id
    errors += job_rules.image_problems(one, job.spec.team, job.spec.image, known)
    if errors:
        raise ConfigErrors(errors).with_source(job.source)
    doc = jobs_documents.job_trainjob(
        one, job.spec, facts, runtime_grace_s=runtime_grace_s(one), gpus_per_node=gpus
    )
    return BuiltJob(cfg=one, job=job, doc=doc, facts=facts)


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
        _checked(args.stack, one, err, args.stacks_dir)
        nodes = one.training.bandwidth_check.nodes if one.training else 1
        if pod_name_length(name, nodes) > 63:
            raise ConfigErrors(
                [ConfigError("--name", f"{name!r} gives pod names over 63 characters", "use a shorter name")]
            )
        doc, basis = training_stack.bandwidth_trainjob(one, _facts(one), name=name, suspend=False)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    err.print(f"threshold: {basis}", markup=False, highlight=False, soft_wrap=True)
    _emit(doc, cfg, console)
    return EXIT_OK
