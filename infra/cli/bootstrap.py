"""``aiplat bootstrap``: the state bucket, the secrets key and the deployer role (with a least-privilege
policy generated from the stack's plan) that must exist before its first ``pulumi up``; and what only a
person can do, with the preflight check that verifies each."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, add_stack_selection, print_error
from infra.core.errors import ConfigError, ConfigErrors

if TYPE_CHECKING:
    from infra.bootstrap.documents import DeployerPolicy
    from infra.bootstrap.rules import HumanStep
    from infra.ops.bootstrap import SecretsKey, StateBackend
    from infra.schema.platform import PlatformConfig

STYLE = {"ok": "green", "created": "cyan", "updated": "cyan", "missing": "bold red"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bootstrap",
        help="create or check the state bucket, secrets key and deployer role before the first pulumi up",
        description="Plan the stack offline, generate its deployer role's managed policies from the plan "
        "(each resource type's create/read/update/delete actions, checked against the Service Authorization "
        "Reference; resources scoped to the stack's names where IAM allows), and check (default, read-only) "
        "or --create the state bucket (versioned, SSE-KMS, public access blocked) and the secrets key of "
        "rollout.yaml and the deployer role (security.account.deployer_role). Then list what only a person "
        "can do, each with the preflight check that verifies it. --print/--json: the policies only, no AWS. "
        "Exit 0 when everything exists, 1 when something is missing, 2 for a config error (a stack with "
        "placeholder principals is refused unless --print).",
    )
    add_stack_selection(p, many=False)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--print", action="store_true", help="print the deployer policy documents; no AWS")
    mode.add_argument(
        "--json", action="store_true", help="the policies, their names and the manual steps as JSON; no AWS"
    )
    mode.add_argument("--create", action="store_true", help="create or fix what is missing (else: check)")
    p.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="ARN",
        help="principal that may assume a deployer role bootstrap creates (repeatable; default: the "
        "account root, i.e. whoever IAM lets assume it)",
    )
    p.set_defaults(run=run)


def policy_names(global_prefix: str, count: int) -> list[str]:
    return [f"{global_prefix}-deployer-{i + 1}" for i in range(count)]


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.bootstrap.actions import registry_url
    from infra.bootstrap.documents import Backend, Resource, deployer_policy, policies_fit
    from infra.bootstrap.rules import human_steps
    from infra.cli.plan import plan_stack
    from infra.io.iam_reference import reference_source, service_reference
    from infra.io.rollout_config import load_rollout_config, rollout_file
    from infra.io.stackfiles import load_stack_config
    from infra.ops.bootstrap import secrets_key, state_backend

    stack = args.stack
    try:
        cfg = load_stack_config(stack, args.stacks_dir)
        rollout = load_rollout_config() if rollout_file().is_file() else None
        backend = state_backend(rollout.backend_url) if rollout else None
        key = secrets_key(rollout.secrets_provider) if rollout else None
    except (ConfigErrors, ConfigError) as exc:
        print_error(err, stack, exc, debug=args.debug)
        return exc.exit_code
    offline = args.print or args.json
    if not offline:
        if backend is None or key is None:
            err.print(f"error: {rollout_file()} not found: no state bucket or secrets key", style="red")
            return EXIT_CONFIG
        if (refused := _refusal(args, cfg, key.region)) is not None:
            err.print(refused, style="red", markup=False)
            return EXIT_CONFIG
    plan, code = plan_stack(stack, args, console, err)
    if plan is None:
        return code
    try:
        policy = deployer_policy(
            [Resource(r.type, r.name, r.inputs) for r in plan.resources if r.custom],
            [token for token, _ in plan.calls],
            service_reference(),
            region=cfg.region,
            account=cfg.security.account.id,
            backend=Backend(backend.bucket, backend.prefix, key.alias, key.region)
            if backend and key
            else None,
            source=reference_source(),
            field=f"plan of {stack}",
        )
    except ConfigError as exc:
        print_error(err, stack, exc, debug=args.debug)
        return exc.exit_code
    names = policy_names(cfg.names.global_prefix, len(policy.documents))
    role = cfg.security.account.deployer_role or f"{cfg.name_prefix}-deploy"
    manual = human_steps(cfg, stack=stack)
    problems = policies_fit(policy)
    for p in problems:
        err.print(f"error: {stack}: {p}", style="red", markup=False)
    if args.json:
        documents = [{"name": n, "document": d} for n, d in zip(names, policy.documents, strict=True)]
        console.print_json(
            json.dumps(
                {
                    "stack": stack,
                    "role": role,
                    "source": policy.source,
                    "policies": documents,
                    # each type's actions and the provider page they come from
                    "actions_by_type": {
                        t: {"actions": list(acts), "source": registry_url(t)}
                        for t, acts in policy.actions_by_type.items()
                    },
                    "no_iam_actions": policy.no_actions,
                    "quota_problems": problems,
                    "manual": [m.__dict__ for m in manual],
                }
            )
        )
    elif args.print:
        for n, d in zip(names, policy.documents, strict=True):
            console.print(f"# {n} (attach to role {role})", markup=False, highlight=False)
            console.print(json.dumps(d, indent=2), markup=False, highlight=False, soft_wrap=True)
        console.print(f"# actions checked against {policy.source}", markup=False, highlight=False)
    if problems or offline:
        return EXIT_CONFIG if problems else EXIT_OK
    assert backend is not None and key is not None
    return _apply(args, console, err, cfg, policy, names, role, backend, key, manual)


def _refusal(args: argparse.Namespace, cfg: PlatformConfig, region: str) -> str | None:
    """Why bootstrap must not touch AWS for this stack: AWS's example account still in it, or credentials of
    another account than ``security.account.id``. Asks STS who the credentials are."""
    from infra.bootstrap.rules import placeholders
    from infra.io.aws_credentials import require_credentials
    from infra.io.aws_live import boto3_clients
    from infra.io.stackfiles import display_path, stack_file

    source = display_path(stack_file(args.stack, args.stacks_dir))
    found = placeholders(cfg)
    if found or cfg.security.account.example:
        named = ", ".join(f"{f} is {v}" for f, v in found) if found else "security.account.example is true"
        return (
            f"{source}: error: {args.stack} is an example: {named}; bootstrap creates and checks nothing for "
            "AWS's example account; fix: put in your account ID and role ARNs and remove `example: true` "
            "(docs/deploy.md step 7), or use --print"
        )
    caller = require_credentials(boto3_clients()("sts", region))  # else one line and exit 6
    want = cfg.security.account.id
    if want is not None and caller.account != want:
        return (
            f"{source}: error: aiplat:platform.security.account.id is {want} but the credentials are of "
            f"account {caller.account}; fix: bootstrap with credentials of account {want}"
        )
    return None


def _apply(
    args: argparse.Namespace,
    console: Console,
    err: Console,
    cfg: PlatformConfig,
    policy: DeployerPolicy,
    names: list[str],
    role: str,
    backend: StateBackend,
    key: SecretsKey,
    manual: list[HumanStep],
) -> int:
    from infra.core.iam import account_root
    from infra.core.iam import policy as iam_policy
    from infra.core.naming import partition_of
    from infra.io.aws_live import boto3_clients
    from infra.ops.bootstrap import ensure_deployer, ensure_secrets_key, ensure_state_bucket

    clients = boto3_clients()
    steps, key_arn = ensure_secrets_key(clients, key, create=args.create)
    steps += ensure_state_bucket(clients, backend, key_arn, create=args.create)
    partition = partition_of(cfg.region)
    account = clients("sts", key.region).get_caller_identity()["Account"]
    trust = iam_policy(
        {
            "Effect": "Allow",
            "Principal": {"AWS": args.trust or [account_root(partition, account)]},
            "Action": "sts:AssumeRole",
        }
    )
    steps += ensure_deployer(
        clients,
        role=role,
        trust=trust,
        policies=list(zip(names, policy.documents, strict=True)),
        partition=partition,
        create=args.create,
    )
    table = Table(title=f"{args.stack}: before the first pulumi up", title_justify="left")
    for col in ("what", "status", "detail"):
        table.add_column(col, overflow="fold")
    for s in steps:
        table.add_row(s.what, f"[{STYLE.get(s.status, '')}]{s.status}[/]", s.detail)
    console.print(table)
    manual_table = Table(title="only a person can do these", title_justify="left")
    for col in ("what", "how", "verified by"):
        manual_table.add_column(col, overflow="fold")
    for m in manual:
        manual_table.add_row(m.what, m.how, f"{m.verified_by}: {m.check}" if m.check else m.verified_by)
    console.print(manual_table)
    missing = [s for s in steps if s.status == "missing"]
    if missing and not args.create:
        err.print(f"{len(missing)} missing: run again with --create to create them", style="yellow")
    return EXIT_FAILED if missing else EXIT_OK
