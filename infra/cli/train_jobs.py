"""``aiplat train submit / list / logs / cancel``: TrainJobs on the cluster through its Kubernetes API.

``submit`` builds the run exactly as ``aiplat train render`` does (``infra/cli/train_build.py``
``build_run``),
puts it in the team's queue (``infra/jobs/documents.py``) and creates it; ``list`` shows each job's queue
state from its Kueue Workload; ``logs`` reads a rank's pod while it exists and CloudWatch Logs after;
``cancel`` deletes the job so that every rank gets SIGTERM and its pod's termination grace period to
checkpoint. The API is reached with an EKS token from the caller's AWS credentials
(``infra/io/kube_jobs.py``).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_CONFIG, EXIT_OK, add_stack_selection, print_error, print_warning
from infra.cli.train_build import add_run_arguments, build_job, build_run, validated
from infra.core.errors import ConfigError, ConfigErrors, JobNotFoundError, PlatformError
from infra.core.trainjobs import REPLICATED_JOB, pod_name_prefix
from infra.cost.runs import AttemptCost, job_attempts
from infra.io.trainer_configs import REPO
from infra.jobs import documents as jobs
from infra.jobs import rules as job_rules
from infra.jobs.config import PLATFORM_TRAINER_IMAGE
from infra.jobs.rules import check_fits, job_priority, team_config
from infra.queueing.names import TeamNames, team_names
from infra.schema.platform import PlatformConfig

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every pod of a JobSet (jobset v0.12.0)
# The pod index of an indexed Job: the trainer's node rank (Trainer v2 sets PET_NODE_RANK from it).
POD_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
CANCEL_MARGIN_S = 120  # past the longest grace period: the API server and the kubelet take their time too
POLL_S = 2.0


def add_parsers(cmds: argparse._SubParsersAction) -> None:
    s = cmds.add_parser(
        "submit",
        help="create a run's TrainJob on the cluster, in a team's queue",
        description="Validate the job (-f job file) or run (--config) exactly as `render` does, check that "
        "a job file's image is in the registry, put it in the team's Kueue LocalQueue with a priority "
        "class, annotate it with your AWS identity, the job file's (or trainer config's) sha256 and the "
        "image digest, and create it through the cluster's Kubernetes API (EKS token from your AWS "
        "credentials). Exit 0; 2 refused run; 6 AWS credentials or AWS unreachable; 7 no cluster access; "
        "12 AWS denied a call; 8 unknown team; "
        "9 name taken; 10 a --config run fits no flavor (a job file's: 2, as render says).",
    )
    add_run_arguments(s)
    s.add_argument(
        "--team", help="team whose namespace, queue and quota the run uses (with --config: required)"
    )
    s.add_argument("--priority", help="WorkloadPriorityClass (default: the team's default_priority)")
    _add_access(s)
    s.set_defaults(run=run_submit)

    ls = cmds.add_parser(
        "list",
        help="the teams' TrainJobs: queue state, position, nodes, age, last checkpoint, cost",
        description="Every TrainJob of the stack's teams (or one team): admitted or waiting and why (the "
        "Kueue Workload's conditions), position in the LocalQueue, nodes, age, the last committed "
        "checkpoint step and what its attempts cost (USD, from their run records: GPU hours x the node-hour "
        "price of the pool's type and purchase option / the node's GPUs; '+?' when an attempt has no "
        "cost); with --json also each attempt's cost or why it has none, the GPU hours it was admitted for "
        "(every admission) and the image digest it was submitted with. Exit 0; 6 AWS credentials or AWS "
        "unreachable; 7 no cluster access; 12 AWS denied a call; 8 unknown team.",
    )
    add_stack_selection(ls, many=False)
    ls.add_argument("--team", help="only this team's jobs")
    ls.add_argument("--json", action="store_true", help="one JSON list of the rows")
    _add_access(ls)
    ls.set_defaults(run=run_list)

    lg = cmds.add_parser(
        "logs",
        help="a rank's log: from its pod while it exists, from CloudWatch Logs after",
        description="Print the log of one node rank of a TrainJob: from the pod (pods logs API) while it "
        "exists, else every stored stream of that rank from CloudWatch Logs (one group per namespace). "
        "Exit 0; 6 AWS credentials or AWS unreachable; 7 no cluster access; "
        "12 AWS denied a call; 8 unknown team; 11 no such job.",
    )
    add_job_selection(lg)
    lg.add_argument("--rank", type=int, default=0, help="node rank (pod index), default 0")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing while the pod runs")
    _add_access(lg)
    lg.set_defaults(run=run_logs)

    c = cmds.add_parser(
        "cancel",
        help="delete a TrainJob after its ranks checkpoint (SIGTERM, the pods' grace period)",
        description="Delete the TrainJob (foreground: its JobSet, Jobs and pods first). No grace period "
        "override is sent, so every pod gets SIGTERM and its own terminationGracePeriodSeconds, which the "
        "training runtime sets to the trainer's shutdown window plus a margin: the ranks checkpoint the "
        "current step and exit (docs/trainer.md). Waits until the job is gone unless --no-wait. Exit 0; "
        "6 AWS credentials or AWS unreachable; 7 no cluster access; "
        "12 AWS denied a call; 8 unknown team; 11 no such job.",
    )
    add_job_selection(c)
    c.add_argument("--no-wait", action="store_true", help="return once the deletion is accepted")
    _add_access(c)
    c.set_defaults(run=run_cancel)


def add_job_selection(p: argparse.ArgumentParser) -> None:
    """NAME, the stack and ``--team`` of a command about one TrainJob."""
    p.add_argument("name", metavar="NAME", help="TrainJob name")
    add_stack_selection(p, many=False)
    p.add_argument("--team", help="the job's team (default: searched in every team's namespace)")


def _add_access(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-endpoint",
        help="reach the Kubernetes API here instead of the cluster's endpoint, e.g. https://127.0.0.1:8443 "
        "through an SSM port forward to a private endpoint (TLS still checks the cluster's certificate)",
    )


def _aws(cfg: PlatformConfig) -> Any:
    """A boto3 session of its own (credentials resolved now, not cached from an earlier one)."""
    import boto3

    return boto3.session.Session(region_name=cfg.region)


def _connect(cfg: PlatformConfig, args: argparse.Namespace, aws: Any = None) -> Any:
    from infra.io.kube_jobs import connect

    aws = aws or _aws(cfg)
    return connect(aws.client("eks"), aws.client("sts"), cfg.names.cluster, args.api_endpoint)


def _stack(args: argparse.Namespace) -> PlatformConfig:
    from infra.io.stackfiles import load_stack_config

    return load_stack_config(args.stack, args.stacks_dir)


def _teams(cfg: PlatformConfig, args: argparse.Namespace) -> list[TeamNames]:
    """The teams a command looks at: ``--team`` (checked), else all of the stack's."""
    if args.team:
        return [team_names(args.team, team_config(cfg, args.stack, args.team).namespace)]
    if not cfg.teams:
        raise ConfigErrors(
            [ConfigError("teams", f"stack {args.stack} declares no teams", "declare teams in the stack file")]
        )
    return [team_names(t, c.namespace) for t, c in sorted(cfg.teams.items())]


def run_submit(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.file is not None:
        return _submit_job_file(args, console, err)
    from infra.io.aws_credentials import require_credentials
    from infra.io.kube_jobs import create_trainjob, read_runtime

    try:
        if args.team is None:
            raise ConfigErrors([ConfigError("--team", "required with --config", "pass --team <team>")])
        cfg = _stack(args)
        team = team_config(cfg, args.stack, args.team)
        names = team_names(args.team, team.namespace)
        priority = job_priority(cfg, args.team, args.priority)
        built = build_run(args, err, team=args.team, priority=priority)
        check_fits(built.cfg, args.team, nodes=args.nodes, gpus_per_node=built.facts.gpu_count)
        config_hash = jobs.config_sha256((REPO / built.config).read_bytes())
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    except PlatformError as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return exc.exit_code
    aws = _aws(cfg)
    who = require_credentials(aws.client("sts"))
    cluster = _connect(cfg, args, aws)
    assert built.cfg.training is not None
    runtime = read_runtime(cluster, built.cfg.training.runtime.name)
    doc = jobs.submitted_trainjob(
        built.doc,
        names=names,
        priority=priority,
        submitter_arn=who.arn,
        config_hash=config_hash,
        digest=jobs.image_digest(jobs.runtime_image(runtime) or ""),
        submitted_at=datetime.now(UTC),
    )
    validated(doc, built.cfg)
    created = create_trainjob(cluster, doc)
    meta = created.get("metadata", doc["metadata"])
    console.print(
        f"submitted {meta['namespace']}/{meta['name']} to queue {names.local_queue} (priority {priority}, "
        f"{args.nodes} nodes); watch it: aiplat train list -s {args.stack} --team {args.team}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def _submit_job_file(args: argparse.Namespace, console: Console, err: Console) -> int:
    """``submit -f``: the job file's job, checked as render checks it and against the caller's account,
    its image looked up in ECR, queued and created."""
    from infra.io.aws_credentials import require_credentials
    from infra.io.ecr_images import image_problem
    from infra.io.kube_jobs import create_trainjob, read_runtime

    try:
        built = build_job(args, err)  # offline checks first: a bad file needs no credentials
        cfg = built.cfg
        spec = built.job.spec
        aws = _aws(cfg)
        who = require_credentials(aws.client("sts"))
        # the stack's account is the caller's (submit runs in it): the image's registry must be too
        wrong = job_rules.image_problems(cfg, spec.team, spec.image, who.account)
        if wrong:
            raise ConfigErrors(wrong).with_source(built.job.source)
        team = team_config(built.cfg, args.stack, spec.team)
        names = team_names(spec.team, team.namespace)
        priority = job_priority(built.cfg, spec.team, spec.priority)
        if spec.image != PLATFORM_TRAINER_IMAGE:
            repo_ref, _, digest = spec.image.partition("@")
            repository = repo_ref.split("/", 1)[1]
            problem = image_problem(aws.client("ecr"), repository=repository, digest=digest, push_to=repo_ref)
            if problem is not None:
                raise ConfigErrors([problem]).with_source(built.job.source)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    except PlatformError as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return exc.exit_code
    cluster = _connect(cfg, args, aws)
    assert built.cfg.training is not None
    digest = jobs.image_digest(spec.image)
    if digest is None:  # the platform's trainer image: the runtime's digest
        digest = jobs.image_digest(
            jobs.runtime_image(read_runtime(cluster, built.cfg.training.runtime.name)) or ""
        )
    doc = jobs.submitted_trainjob(
        built.doc,
        names=names,
        priority=priority,
        submitter_arn=who.arn,
        config_hash=jobs.config_sha256(built.job.data),
        digest=digest,
        submitted_at=datetime.now(UTC),
    )
    validated(doc, built.cfg)
    created = create_trainjob(cluster, doc)
    meta = created.get("metadata", doc["metadata"])
    console.print(
        f"submitted {meta['namespace']}/{meta['name']} to queue {names.local_queue} (priority {priority}, "
        f"{spec.nodes} nodes, image {digest}); watch it: aiplat train list -s {args.stack} "
        f"--team {spec.team}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def _last_step(row_job: dict[str, Any], err: Console, stack: str) -> int | None:
    from infra.io.checkpoints import last_committed_step

    root = jobs.checkpoint_root(row_job)
    if not root:
        return None
    try:
        return last_committed_step(root)
    except Exception as exc:  # the listing goes on without it: one warning per job
        print_warning(err, stack, f"{row_job['metadata']['name']}: checkpoints at {root}: {exc}")
        return None


def _attempts(row_job: dict[str, Any], err: Console, stack: str) -> list[AttemptCost]:
    """What each attempt of the job cost, from its run records (none without a checkpoint root)."""
    from infra.io.run_records import job_records

    root = jobs.checkpoint_root(row_job)
    if not root:
        return []
    name = row_job["metadata"]["name"]
    skipped: list[str] = []
    try:
        attempts = job_attempts(name, job_records(root, skipped))
    except Exception as exc:  # the listing goes on without them: one warning per job
        print_warning(err, stack, f"{name}: run records at {root}: {exc}")
        return []
    for line in skipped:
        print_warning(err, stack, f"{name}: {line}")
    return attempts


def run_list(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io import kube_jobs as k

    cfg = _stack(args)
    teams = _teams(cfg, args)
    cluster = _connect(cfg, args)
    now = datetime.now(UTC)
    rows: list[jobs.JobRow] = []
    for names in teams:
        trainjobs = k.list_objects(cluster, names.namespace, k.TRAINER_GROUP, k.TRAINER_VERSION, k.TRAINJOBS)
        workloads = k.list_objects(cluster, names.namespace, k.KUEUE_GROUP, k.KUEUE_VERSION, k.WORKLOADS)
        pending = k.pending_positions(cluster, names.namespace, names.local_queue) if trainjobs else None
        for tj in sorted(trainjobs, key=lambda t: t["metadata"].get("creationTimestamp", "")):
            wl = jobs.owned_workload(tj, workloads)
            step = _last_step(tj, err, args.stack)
            attempts = _attempts(tj, err, args.stack)
            rows.append(
                jobs.job_row(tj, wl, pending, team=names.team, last_step=step, now=now, attempts=attempts)
            )
    if args.json:
        console.out(json.dumps([r.as_dict() for r in rows], indent=1), highlight=False)
        return EXIT_OK
    table = Table(title=f"TrainJobs of {args.stack}", title_justify="left")
    columns = (
        "name",
        "team",
        "queue",
        "priority",
        "state",
        "position",
        "nodes",
        "age",
        "last step",
        "USD",
        "why",
    )
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.name,
            r.team,
            r.queue,
            r.priority,
            r.state,
            "" if r.position is None else str(r.position),
            str(r.nodes),
            r.age,
            "" if r.last_checkpoint_step is None else str(r.last_checkpoint_step),
            r.cost,
            r.reason,
        )
    console.print(table)
    return EXIT_OK


def _find_namespace(cluster: Any, cfg: PlatformConfig, args: argparse.Namespace) -> TeamNames | None:
    """The team whose namespace holds the TrainJob ``args.name``; None when none does."""
    from infra.io.kube_jobs import get_trainjob

    for names in _teams(cfg, args):
        try:
            get_trainjob(cluster, names.namespace, args.name)
        except JobNotFoundError:
            continue
        return names
    return None


def run_logs(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io import kube_jobs as k

    cfg = _stack(args)
    aws = _aws(cfg)
    cluster = _connect(cfg, args, aws)
    teams = _teams(cfg, args)
    owner = _find_namespace(cluster, cfg, args)
    selector = f"{JOBSET_NAME_LABEL}={args.name},{POD_INDEX_LABEL}={args.rank}"
    for names in [owner] if owner else []:
        pods = k.list_pods(cluster, names.namespace, selector)
        running = [p for p in pods if p.get("status", {}).get("phase") not in ("Pending", None)]
        if running:
            pod = sorted(running, key=lambda p: p["metadata"].get("creationTimestamp", ""))[-1]
            name = pod["metadata"]["name"]
            err.print(f"{names.namespace}/{name} (pod log)", markup=False, highlight=False)
            for line in k.pod_log(cluster, names.namespace, name, REPLICATED_JOB, follow=args.follow):
                console.out(line, highlight=False)
            return EXIT_OK
    # the pods are gone (or not started): the collector's copy (CONTRACTS C4)
    logs = aws.client("logs")
    prefix = pod_name_prefix(args.name, args.rank)
    for names in [owner] if owner else teams:
        streams = k.stored_log_streams(logs, cluster.name, names.namespace, prefix, REPLICATED_JOB)
        if not streams:
            continue
        if args.follow:
            print_warning(err, args.stack, "the pods are gone: printing the stored log, nothing to follow")
        for stream in streams:
            err.print(f"{names.namespace}/{stream} (CloudWatch Logs)", markup=False, highlight=False)
            for line in k.stored_log(logs, cluster.name, names.namespace, stream):
                console.out(line, highlight=False)
        return EXIT_OK
    if owner is not None:  # the job is there, its rank has not run yet
        exc = JobNotFoundError(
            f"NAME: TrainJob {owner.namespace}/{args.name} has no running pod of rank {args.rank} and no "
            "stored log yet; fix: see whether it waits in the queue (aiplat train list), and check --rank"
        )
        print_error(err, args.stack, exc, debug=args.debug)
        return exc.exit_code
    where = ", ".join(n.namespace for n in teams)
    exc = JobNotFoundError(
        f"NAME: no pod and no stored log of rank {args.rank} of {args.name!r} in {where}; fix: check the "
        "name and --rank (aiplat train list), or wait for the job to be admitted and its pods to start"
    )
    print_error(err, args.stack, exc, debug=args.debug)
    return exc.exit_code


def run_cancel(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io import kube_jobs as k

    cfg = _stack(args)
    cluster = _connect(cfg, args)
    owner = _find_namespace(cluster, cfg, args)
    if owner is None:
        where = ", ".join(n.namespace for n in _teams(cfg, args))
        raise JobNotFoundError(
            f"NAME: no TrainJob {args.name!r} in {where}; fix: check the name and --team (aiplat train list)"
        )
    pods = k.list_pods(cluster, owner.namespace, f"{JOBSET_NAME_LABEL}={args.name}")
    grace = max((int(p.get("spec", {}).get("terminationGracePeriodSeconds") or 30) for p in pods), default=0)
    k.delete_trainjob(cluster, owner.namespace, args.name)
    if pods:
        what = (
            f"{len(pods)} pods get SIGTERM and up to {grace} s (their terminationGracePeriodSeconds) to "
            "checkpoint the current step before they are killed"
        )
    else:
        what = "it has no pods (not admitted yet, or done): it leaves the queue"
    console.print(
        f"cancelling {owner.namespace}/{args.name}: {what}", markup=False, highlight=False, soft_wrap=True
    )
    if args.no_wait:
        return EXIT_OK
    deadline = time.monotonic() + grace + CANCEL_MARGIN_S
    while time.monotonic() < deadline:
        try:
            k.get_trainjob(cluster, owner.namespace, args.name)
        except JobNotFoundError:
            console.print(f"{owner.namespace}/{args.name} is gone", markup=False, highlight=False)
            return EXIT_OK
        time.sleep(POLL_S)
    print_warning(
        err,
        args.stack,
        f"{args.name} still exists {grace + CANCEL_MARGIN_S} s after the deletion: its pods may be stuck "
        f"terminating; see kubectl -n {owner.namespace} get pods -l {JOBSET_NAME_LABEL}={args.name}",
    )
    return EXIT_OK
