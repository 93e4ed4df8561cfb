"""Building a run or a job from ``aiplat train`` arguments, as the stack's own TrainJobs are built and
checked:
``render`` (``infra/cli/train.py``) prints what these build, ``submit`` (``infra/cli/train_jobs.py``) creates
it; the Kubeflow SDK path (``team_job``) gets the same settings.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from infra.cli.common import add_stack_selection, print_warning
from infra.core.errors import ConfigError, ConfigErrors
from infra.core.facts import InstanceFacts
from infra.core.project import CONFIG_KEY
from infra.core.trainjobs import grace_period_s
from infra.io.job_files import JobFile, load_job_file
from infra.io.policypack import stack_allowlists
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import REPO, training_settings
from infra.jobs import documents as jobs_documents
from infra.jobs import rules as job_rules
from infra.jobs.config import JobSpec
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.parse import parse_model, parse_platform_config
from infra.schema.platform import PlatformConfig
from infra.training.documents import stack as training_stack


def runtime_facts(cfg: PlatformConfig) -> InstanceFacts:
    """The runtime pool's instance type, from the offline AWS snapshot (the plan extra)."""
    from infra.io.snapshot import instance_facts

    assert cfg.training is not None
    itype = cfg.node_pools[cfg.training.runtime.pool].instance_type
    facts = instance_facts(itype, cfg.region)
    if facts is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.node_pools", f"{itype}: not in the AWS snapshot")])
    return facts


def check_stack(
    stack: str, cfg: PlatformConfig, err: Console, stacks_dir: Path | None = None, *, verbose: bool = True
) -> None:
    """The same rules the program runs (those that need no AWS calls), errors raised; warnings printed when
    ``verbose`` (a job's author cannot act on the stack's own: job commands show them with --verbose)."""
    ctx = RuleContext(
        cfg, stack=stack, trainer=training_settings(cfg), allowlists=stack_allowlists(stack, stacks_dir)
    )
    findings = run_rules(Phase.plan, ctx)
    for f in findings:
        if f.level is Level.warning and verbose:
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
    r.add_argument(
        "--nodes",
        type=int,
        help="nodes (pods) of the run (with --config: required; with -f: sets the file's)",
    )
    r.add_argument("--name", help="TrainJob name (default: the config file's name; with -f: the file's name)")
    r.add_argument(
        "--dataset",
        help="shards prefix in the datasets bucket (default: that of the stack's run with the same config)",
    )
    r.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="repeatable: with --config a trainer setting (section.key=value); with -f a field of the job "
        "file (env.LR=0.1, timeouts.max_run_s=3600, command='[train.py, --lr, \"0.1\"]'), for sweeps",
    )
    r.add_argument(
        "--verbose", "-v", action="store_true", help="also print the stack's own warnings (for its operators)"
    )


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
    check_stack(args.stack, one, err, args.stacks_dir, verbose=args.verbose)
    assert one.training is not None
    facts = runtime_facts(one)
    doc = training_stack.run_trainjob(one, name, one.training.runs[name], facts)
    return BuiltRun(cfg=one, name=name, config=config, doc=doc, facts=facts)


# With -f the file is the job's one description: these flags are refused (--name, --nodes and --set
# override its fields instead).
JOB_FILE_FIELDS = {
    "dataset": "data",
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
                    f"drop --{flag} and set {field} in the file"
                    + (f" or with --set {field}=..." if not field.startswith("(") else ""),
                )
            )
    if problems:
        raise ConfigErrors(problems)


def runtime_grace_s(cfg: PlatformConfig) -> int:
    """The runtime's pods' grace period: the runtime's trainer config's shutdown window plus the margin."""
    settings = training_settings(cfg)
    assert settings is not None and cfg.training is not None
    return grace_period_s(settings["runtime"].shutdown_window_s, cfg.training.runtime.grace_margin_s)


@dataclass(frozen=True)
class BuiltJob:
    """A team's job, checked against the stack, and its TrainJob."""

    cfg: PlatformConfig  # the stack's config (its own runs and bandwidth check dropped)
    job: JobFile
    doc: dict[str, Any]
    facts: InstanceFacts


def check_job(
    stack: str,
    job: JobFile,
    err: Console,
    *,
    stacks_dir: Path | None = None,
    account_id: str | None = None,
    verbose: bool = False,
) -> BuiltJob:
    """One validation for every way a team's job reaches the cluster (``render -f``, ``submit -f`` and the
    Kubeflow SDK's ``team_job``): the stack's rules, the job against the stack (team, priority, pool,
    quota, nodes, launcher: ``infra/jobs/rules.py``) and its image; ``ConfigErrors`` each naming
    ``job.source`` and the job's field. ``account_id``: the stack's account when the caller knows it."""
    cfg = load_stack_config(stack, stacks_dir)
    if cfg.training is None:
        raise ConfigErrors([ConfigError(f"{CONFIG_KEY}.training", "the stack has no training section")])
    raw = cfg.model_dump(mode="json", exclude_none=True)
    raw["training"]["runs"] = {}
    raw["training"]["bandwidth_check"]["enabled"] = False
    one = parse_platform_config(raw)
    check_stack(stack, one, err, stacks_dir, verbose=verbose)
    facts = runtime_facts(one)
    gpus = one.node_pools[one.training.runtime.pool].gpus_per_node or facts.gpu_count  # type: ignore[union-attr]
    findings = job_rules.job_problems(one, job.spec, gpus_per_node=gpus)
    for f in findings:
        if f.level is Level.warning:
            print_warning(err, stack, f"{job.source}: {f.one_line()}")
    errors = [f.as_config_error() for f in findings if f.level is Level.error]
    known = account_id or one.security.account.id
    errors += job_rules.image_problems(one, job.spec.team, job.spec.image, known)
    if errors:
        raise ConfigErrors(errors).with_source(job.source)
    doc = jobs_documents.job_trainjob(
        one, job.spec, facts, runtime_grace_s=runtime_grace_s(one), gpus_per_node=gpus
    )
    return BuiltJob(cfg=one, job=job, doc=doc, facts=facts)


def team_job(
    stack: str,
    *,
    team: str,
    name: str,
    image: str,
    command: list[str],
    nodes: int = 1,
    launcher: str = "torchrun",
    env: dict[str, str] | None = None,
    data: str | None = None,
    checkpoints: str | None = None,
    priority: str | None = None,
    max_restarts: int | None = None,
    timeouts: dict[str, int] | None = None,
    stacks_dir: Path | None = None,
) -> jobs_documents.TeamJobSettings:
    """What a TrainJob of ``team`` on ``stack`` carries when the Kubeflow SDK builds it in a notebook
    (docs/how-to/kubeflow-sdk.md): the job is checked exactly as a job file with the same fields is
    (``check_job``: team, priority, quota, pool, nodes, image, timeouts), then its namespace, runtime, queue
    and priority labels, env contract, command and arguments are those ``aiplat train render -f`` would
    give it. ``kubeflow_options`` turns them into the SDK's options, so the name is set once.
    ``ConfigErrors`` naming the field otherwise."""
    fields: dict[str, Any] = {
        "name": name,
        "team": team,
        "image": image,
        "command": command,
        "nodes": nodes,
        "launcher": launcher,
        "env": env or {},
        "data": data,
        "checkpoints": checkpoints,
        "priority": priority,
        "max_restarts": max_restarts,
        "timeouts": timeouts or {},
    }
    source = f"team_job({name!r})"
    try:
        spec = parse_model({k: v for k, v in fields.items() if v is not None}, JobSpec, "")
    except ConfigErrors as exc:
        raise exc.with_source(source) from None
    built = check_job(
        stack, JobFile(spec=spec, source=source, data=b""), Console(stderr=True), stacks_dir=stacks_dir
    )
    grace = runtime_grace_s(built.cfg)
    window = spec.timeouts.preemption_window_s
    if window is not None and window != grace:
        # the SDK's RuntimePatch has no pod grace period (kubeflow 0.5.0 options/kubernetes.py PodSpecPatch)
        raise ConfigErrors(
            [
                ConfigError(
                    "timeouts.preemption_window_s",
                    f"{window}: the Kubeflow SDK cannot set the pods' grace period (runtime's: {grace} s)",
                    "drop it, or submit a job file (aiplat train submit -f), which can",
                    source=source,
                )
            ]
        )
    trainer = built.doc["spec"]["trainer"]
    return jobs_documents.TeamJobSettings(
        name=spec.name,
        namespace=built.doc["metadata"]["namespace"],
        runtime=built.doc["spec"]["runtimeRef"]["name"],
        labels=dict(built.doc["metadata"]["labels"]),
        env={e["name"]: e["value"] for e in trainer.get("env", [])},
        torchrun_args=jobs_documents.team_job_settings(
            built.cfg, team=team, name=name, max_restarts=max_restarts, runtime_grace_s=grace
        ).torchrun_args,
        preemption_window_s=grace,
        image=spec.image,
        nodes=spec.nodes,
        command=list(trainer.get("command", [])),
        args=list(trainer.get("args", [])),
        active_deadline_s=spec.timeouts.active_deadline_s,
    )


def kubeflow_options(job: jobs_documents.TeamJobSettings) -> list[Any]:
    """The Kubeflow SDK's options for ``job`` (``team_job``): its name, queue and priority labels, torchrun
    with the runtime's rendezvous and the job's command, and its deadline."""
    from kubeflow.trainer.options.common import Name
    from kubeflow.trainer.options.kubernetes import ActiveDeadlineSeconds, Labels, TrainerArgs, TrainerCommand

    options: list[Any] = [
        Name(job.name),
        Labels(job.labels),
        TrainerCommand(job.command),
        TrainerArgs(job.args),
    ]
    if job.active_deadline_s is not None:
        options.append(ActiveDeadlineSeconds(job.active_deadline_s))
    return options


def _job_overrides(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``--name``, ``--nodes`` and each ``--set field=value`` as overrides of the job file's fields."""
    out: list[tuple[str, str]] = []
    if args.name is not None:
        out.append(("name", args.name))
    if args.nodes is not None:
        out.append(("nodes", str(args.nodes)))
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigErrors([ConfigError("--set", item, "use --set field=value, e.g. --set nodes=2")])
        out.append((key.strip(), value))
    return out


def build_job(args: argparse.Namespace, err: Console, *, account_id: str | None = None) -> BuiltJob:
    """The job of ``args.file`` on ``args.stack`` (with ``--name``, ``--nodes`` and ``--set`` applied to
    its fields), checked by ``check_job``; raises ``ConfigErrors`` (each line naming the file)."""
    _no_run_flags(args)
    job = load_job_file(args.file, _job_overrides(args))
    return check_job(
        args.stack,
        job,
        err,
        stacks_dir=args.stacks_dir,
        account_id=account_id,
        verbose=getattr(args, "verbose", False),
    )
