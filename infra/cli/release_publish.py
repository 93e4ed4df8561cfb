"""``aiplat release publish --stack TRAIN --team T --job J``: publish a team job's output as a model release.

Parse, then load the train stack (the team must be one of its teams with ``releases: true``), read the job's
run record (the newest finished attempt under ``<team>/checkpoints/<job>/run-records/``: the provenance comes
from it, never from flags), take the trainer image and the release signing key from the stack's outputs,
render the publisher's Job (``infra/jobs/publisher.py``), validate it against the Kubernetes schema, and
create it through the cluster's API (``infra/io/kube_jobs.py``). ``--dry-run`` prints the Job instead;
``--wait`` follows its log and prints the version it published.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console

from infra.cli.common import EXIT_FAILED, EXIT_OK, add_stack_selection, print_error
from infra.core.config import Role
from infra.core.errors import ConfigError, ConfigErrors, PlatformError
from infra.jobs.publisher import CONTAINER, JOB_NAME_LABEL, PublishSpec, publisher_job
from infra.schema.platform import PlatformConfig
from infra.storage.config.storage import OUTPUTS_PREFIX, BucketPurpose

POLL_S = 2.0
MODEL_SUBFOLDER = "model"  # $AIPLAT_OUTPUT_URI/model/: where a job leaves its Hugging Face folder


def add_parser(cmds: argparse._SubParsersAction) -> None:
    p = cmds.add_parser(
        "publish",
        help="publish a team job's output folder as a signed release (the publisher's Job on the cluster)",
        description="Render the release publisher's Job for a team job's output (s3://<checkpoints>/<team>/"
        "outputs/<job>/model/): namespace and service account of storage.publisher, the publisher's own "
        "nodes, the trainer image by digest and the signing key from the train stack's outputs, the job's "
        "newest finished run record as provenance (read now; never from flags). It is validated against "
        "the Kubernetes schema and created through the cluster's API; --dry-run prints it instead, --wait "
        "follows it and prints the version. Exit 0; 1 the publisher refused or failed (with --wait); 2 "
        "refused arguments, no finished run record, or outputs missing; 4 no Pulumi CLI; 6 AWS "
        "credentials; 7 no cluster access; 8 unknown team; 9 name taken.",
    )
    add_stack_selection(p, many=False)
    p.add_argument("--team", required=True, help="the team whose job's output it is (releases: true)")
    p.add_argument("--job", required=True, help="the TrainJob whose output folder is published")
    p.add_argument("--model-name", help="release/<model-name>/<version>/ (default: the job's name)")
    p.add_argument("--name", help="the Job's name (default: publish-<job>-<UTC time>)")
    p.add_argument("--dry-run", "--print", action="store_true", help="print the Job (YAML); create nothing")
    p.add_argument("--wait", action="store_true", help="follow the Job's log and print the version")
    p.add_argument("--timeout", type=float, default=3600.0, help="with --wait: seconds to wait (3600)")
    p.add_argument("--api-endpoint", help="reach the Kubernetes API here (an SSM port forward)")
    p.set_defaults(run=run)


def _spec(args: argparse.Namespace, cfg: PlatformConfig, outputs: dict[str, Any]) -> PublishSpec:
    """The Job's inputs: the stack's config and outputs, and the job's run record."""
    from infra.io.releases import ReleaseUnreadable, job_run_record
    from infra.jobs.rules import team_config

    team = team_config(cfg, args.stack, args.team)
    if not team.releases:
        raise ConfigErrors(
            [
                ConfigError(
                    f"teams.{args.team}.releases",
                    "false: the publisher's role may not read this team's outputs",
                    f"set teams.{args.team}.releases: true in the stack file and run the rollout first",
                )
            ]
        )
    missing = [k for k in ("images", "releaseSigningKeyArn") if not outputs.get(k)]
    image = (outputs.get("images") or {}).get("trainer")
    if missing or not image or "@sha256:" not in str(image):
        raise ConfigErrors(
            [
                ConfigError(
                    f"{args.stack} outputs",
                    f"no {', '.join(missing) or 'trainer image by digest (images.trainer)'}",
                    "deploy the train stack first (aiplat rollout --env <env>)",
                )
            ]
        )
    checkpoints = cfg.bucket_name(BucketPurpose.checkpoints)
    try:
        where, doc = job_run_record(checkpoints, args.team, args.job)
    except ReleaseUnreadable as exc:
        raise ConfigErrors([ConfigError("--job", exc.reason, "name a job that finished")]) from None
    steps = doc.get("steps") if isinstance(doc.get("steps"), dict) else {}
    step = steps.get("last")
    job_prefix = args.job[:38].rstrip("-")
    return PublishSpec(
        name=args.name or f"publish-{job_prefix}-{datetime.now(UTC):%Y%m%d%H%M%S}",
        namespace=cfg.storage.publisher.namespace,
        service_account=cfg.storage.publisher.service_account,
        image=str(image),
        region=cfg.region,
        team=args.team,
        job=args.job,
        from_uri=f"s3://{checkpoints}/{args.team}/{OUTPUTS_PREFIX}/{args.job}/{MODEL_SUBFOLDER}/",
        run_record=where,  # the publisher reads it again, by its current version
        release_root=f"s3://{cfg.bucket_name(BucketPurpose.artifacts)}",
        model_name=args.model_name or args.job,
        step=step if isinstance(step, int) and step >= 0 else 0,
        signing_key=str(outputs["releaseSigningKeyArn"]),
    )


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.cli.train_build import validated
    from infra.io.rollout_config import load_rollout_config
    from infra.io.stackfiles import load_stack_config, project_root
    from infra.ops.automation import AutomationRunner

    try:
        cfg = load_stack_config(args.stack, args.stacks_dir)
        if cfg.role is not Role.train:
            raise ConfigErrors([ConfigError("--stack", f"{args.stack} is not a train stack", "name one")])
        runner = AutomationRunner(project_root(), load_rollout_config(), stacks_dir=args.stacks_dir)
        spec = _spec(args, cfg, runner.outputs(args.stack))
        doc = validated(publisher_job(spec), cfg)
    except PlatformError as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return exc.exit_code
    err.print(
        f"publishing {spec.from_uri} as {spec.model_name} (step {spec.step}); run record {spec.run_record}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if args.dry_run:
        console.out(yaml.safe_dump(doc, sort_keys=False), end="", highlight=False)
        return EXIT_OK
    import boto3

    from infra.io.kube_jobs import connect, create_job

    aws = boto3.session.Session(region_name=cfg.region)
    cluster = connect(aws.client("eks"), aws.client("sts"), cfg.names.cluster, args.api_endpoint)
    created = create_job(cluster, doc)
    meta = created.get("metadata", doc["metadata"])
    console.print(f"created Job {meta['namespace']}/{meta['name']}", markup=False, highlight=False)
    if not args.wait:
        return EXIT_OK
    return _follow(cluster, meta["namespace"], meta["name"], args, console, err)


def _finished(job: dict[str, Any]) -> bool | None:
    """True succeeded, False failed, None still running."""
    status = job.get("status") or {}
    if status.get("succeeded"):
        return True
    return False if status.get("failed") else None


def _follow(
    cluster: Any, ns: str, name: str, args: argparse.Namespace, console: Console, err: Console
) -> int:
    """The pod's log as it runs, then the Job's verdict and the version the publisher printed."""
    from infra.io import kube_jobs as k

    deadline = time.monotonic() + args.timeout
    lines: list[str] = []
    followed = False
    while time.monotonic() < deadline:
        pods = [] if followed else k.list_pods(cluster, ns, f"{JOB_NAME_LABEL}={name}")
        started = [p for p in pods if (p.get("status") or {}).get("phase") not in (None, "Pending")]
        if started:  # its log, followed until the container exits (backoffLimit 0: one pod)
            followed = True
            pod = started[-1]["metadata"]["name"]
            for line in k.pod_log(cluster, ns, pod, CONTAINER, follow=True):
                lines.append(line)
                err.print(line, markup=False, highlight=False, soft_wrap=True)
        verdict = _finished(k.read_job(cluster, ns, name))
        if verdict is not None:
            return _verdict(verdict, lines, ns, name, console, err)
        time.sleep(POLL_S)
    err.print(
        f"error: {ns}/{name} has not finished after {args.timeout:.0f} s; it goes on: kubectl -n {ns} logs "
        f"job/{name} -f",
        style="red",
        markup=False,
        soft_wrap=True,
    )
    return EXIT_FAILED


def _verdict(ok: bool, lines: list[str], ns: str, name: str, console: Console, err: Console) -> int:
    published = None
    for line in reversed(lines):
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict) and "version" in got:
            published = got
            break
    if not ok or published is None:
        err.print(
            f"error: {ns}/{name} failed: {lines[-1] if lines else 'no log'}",
            style="red",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_FAILED
    console.print(
        f"published {published['model_name']} {published['version']} ({published.get('published', '')}); "
        f"promote it: aiplat release promote {published['model_name']} {published['version']}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK
