"""``aiplat release promote MODEL VERSION`` / ``aiplat release rollback MODEL [VERSION]``: one model's
release in the infer stacks of an environment that serve it, and nothing else.

Parse, then find the infer stacks of ``--env`` that serve MODEL (a base model or an adapter:
``infra/ops/promote.py``), change that one key of each stack file (comments and layout kept), check with the
rollout's own release check (``infra/ops/release_check.py``) that the version is published, signed and fits
in each of their regions' replica buckets, write the files, and run ``aiplat rollout`` for those stacks only,
in their waves, with the health gate (the train stacks are never touched). ``--dry-run`` changes no file and
reaches nothing: it plans each stack before and after offline and prints the resources that change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, print_error
from infra.core.config import Environment
from infra.core.errors import ConfigError, ConfigErrors, PlatformError
from infra.ops.promote import Target, edited, previous_version, serving_stacks


def add_parsers(cmds: argparse._SubParsersAction) -> None:
    for name, help_, what in (
        (
            "promote",
            "serve VERSION of one model (base or adapter) in every infer stack of --env that serves it",
            "Set MODEL's release version to VERSION in each infer stack file of --env that serves it (base "
            "models: inference.models.<name>.release.version; adapters: inference.models.<base>.adapters."
            "<name>.release.version; that line only, comments kept), check with the rollout's release check "
            "that the version is in each region's replica bucket, signed and fits the stack's GPUs, "
            "then roll out those infer stacks only, in their waves, with the health gate.",
        ),
        (
            "rollback",
            "serve one model's previous version again (from the stack files' git history) in --env",
            "Like promote, to VERSION or, without it, to the version each stack file named before the "
            "current one (its git history: what was reviewed and served there).",
        ),
    ):
        p = cmds.add_parser(
            name,
            help=help_,
            description=f"{what} --dry-run changes no file: it plans each of those stacks offline before and "
            "after and prints the resources that change. Exit 0 done (or planned); 1 the release check "
            "refused the version or a stack failed its rollout; 2 unknown model or version, or a stack "
            "file refused; 4 no Pulumi CLI; 5 a mandatory policy violation.",
        )
        p.add_argument("model", metavar="MODEL", help="release name or served name (a base model or adapter)")
        p.add_argument(
            "version", metavar="VERSION", nargs=None if name == "promote" else "?", help="release version"
        )
        p.add_argument("--env", default=Environment.prod.value, choices=[e.value for e in Environment])
        p.add_argument("--dry-run", action="store_true", help="plan before and after offline; change nothing")
        p.add_argument("--json", action="store_true", help="with --dry-run: the changes as one JSON object")
        p.add_argument(
            "--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)"
        )
        p.set_defaults(run=run)


def _versions(targets: list[Target], args: argparse.Namespace) -> dict[str, str]:
    """stack -> the version it is to serve."""
    if args.version:
        return {t.stack: args.version for t in targets}
    out, missing = {}, []
    for t in targets:
        found = previous_version(t)
        if found is None:
            missing.append(t.stack)
        else:
            out[t.stack] = found
    if missing:
        raise ConfigErrors(
            [
                ConfigError(
                    "VERSION",
                    f"the git history of {', '.join(missing)} names no version of {args.model} before "
                    f"the current one",
                    "name the version to return to (aws s3 ls s3://<replica>/release/<model>/ lists them)",
                )
            ]
        )
    return out


def _staged(targets: list[Target], versions: dict[str, str], stacks_dir: Path | None, tmp: Path) -> Path:
    """A copy of the stacks folder with the targets' files changed: what the check and the plans read."""
    from infra.io.stackfiles import default_stacks_dir

    staged = tmp / "stacks"
    shutil.copytree(stacks_dir or default_stacks_dir(), staged)
    for t in targets:
        (staged / t.path.name).write_text(edited(t, versions[t.stack]))
    return staged


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.stackfiles import load_stack_config

    try:
        targets = serving_stacks(args.model, args.env, args.stacks_dir)
        versions = _versions(targets, args)
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return EXIT_CONFIG
    moving = [t for t in targets if t.current != versions[t.stack]]
    for t in targets:
        where = f"{t.stack}: {'.'.join(t.served.keys)}"
        # with --json, stdout holds the JSON alone
        (err if args.json else console).print(
            f"{where}: {t.current} -> {versions[t.stack]}", markup=False, highlight=False
        )
    if not moving:
        console.print(f"nothing to change: {args.model} already serves those versions", highlight=False)
        return EXIT_OK
    with tempfile.TemporaryDirectory(prefix="aiplat-promote-") as tmp:
        try:
            staged = _staged(moving, versions, args.stacks_dir, Path(tmp))
            configs = {t.stack: load_stack_config(t.stack, staged) for t in moving}  # the schema's verdict
        except ConfigErrors as exc:
            print_error(err, None, exc, debug=args.debug)
            return EXIT_CONFIG
        if args.dry_run:
            return _dry_run(moving, args, staged, console)
        try:
            refused = _release_check(moving, configs, args, console)
        except PlatformError as exc:
            print_error(err, None, exc, debug=args.debug)
            return exc.exit_code
        if refused:
            for line in refused:
                err.print(f"error: {line}", style="red", markup=False, highlight=False, soft_wrap=True)
            return EXIT_FAILED
        for t in moving:
            t.path.write_text((staged / t.path.name).read_text())
    return _rollout([t.stack for t in moving], args, console, err)


def _release_check(
    targets: list[Target], configs: dict[str, Any], args: argparse.Namespace, console: Console
) -> list[str]:
    """The rollout's release check of each target with its new version; the refusals."""
    from infra.io.aws_live import boto3_clients
    from infra.io.rollout_config import load_rollout_config
    from infra.io.stackfiles import project_root
    from infra.ops.automation import AutomationRunner
    from infra.ops.release_check import AwsReleaseCheck

    runner = AutomationRunner(project_root(), load_rollout_config(), stacks_dir=args.stacks_dir)
    check = AwsReleaseCheck(boto3_clients(), runner.outputs)
    refused = []
    for t in targets:
        verdict = check.check(t.stack, configs[t.stack])
        if verdict is None:
            continue
        console.print(f"{t.stack}: {verdict.name}: {verdict.detail}", markup=False, highlight=False)
        if not verdict.ok:
            refused.append(f"{t.stack}: {verdict.detail}; no stack file was changed")
    return refused


def _rollout(stacks: list[str], args: argparse.Namespace, console: Console, err: Console) -> int:
    """``aiplat rollout --env ENV --model-only --stack ...``: those stacks, in their waves, gated."""
    from infra.cli import rollout

    argv = argparse.Namespace(
        env=args.env,
        dry_run=False,
        stack=stacks,
        wave=None,
        model_only=True,
        resume=False,
        stacks_dir=args.stacks_dir,
        debug=args.debug,
    )
    return rollout.run(argv, console, err)


def _dry_run(targets: list[Target], args: argparse.Namespace, staged: Path, console: Console) -> int:
    """Plan every target before and after; print what changes."""
    from infra.plan.diff import plan_changes
    from infra.plan.runner import run_plan, stack_file_plan

    changes = {
        t.stack: plan_changes(stack_file_plan(t.stack, args.stacks_dir), run_plan(t.stack, stacks_dir=staged))
        for t in targets
    }
    if args.json:
        doc = {s: [c.__dict__ | {"fields": list(c.fields)} for c in cs] for s, cs in changes.items()}
        console.out(json.dumps({"model": args.model, "changes": doc}, indent=1), highlight=False)
        return EXIT_OK
    table = Table(title=f"dry run: {args.model} (plans before and after, offline)", title_justify="left")
    for col in ("stack", "change", "type", "name", "inputs"):
        table.add_column(col, overflow="fold")
    for stack, cs in changes.items():
        for c in cs:
            table.add_row(stack, c.op, c.type, c.name, ", ".join(c.fields))
    console.print(table)
    console.print(
        "the release was not checked (a dry run reaches nothing): the promote checks it in each region first",
        highlight=False,
    )
    return EXIT_OK
