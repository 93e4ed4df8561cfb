"""``aiplat rollout``: deploy an environment's stacks wave by wave (Pulumi Automation API), with gates."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from infra.cli.common import EXIT_FAILED, EXIT_OK, EXIT_POLICY, print_error
from infra.core.config import Environment
from infra.core.errors import ConfigErrors, PlatformError, ToolMissingError
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config, project_root
from infra.ops.rollout import (
    Drainer,
    FirstDeploy,
    HealthGate,
    ReleaseCheck,
    RolloutResult,
    StackEvent,
    StackResult,
    StackRunner,
    State,
    run_rollout,
)
from infra.schema.platform import PlatformConfig

if TYPE_CHECKING:
    from infra.ops.automation import AutomationRunner
from infra.stack.rollout import plan_waves

STYLE = {
    State.healthy: "green",
    State.awaiting_release: "yellow",
    State.previewed: "green",
    State.not_started: "dim",
    State.blocked: "bold red",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rollout",
        help="deploy an environment's stacks wave by wave: preview with the policy pack, up, health gate",
        description=(
            "Drive the stacks of --env through the Pulumi Automation API in the waves of rollout.yaml "
            "(prod: prod-us-train, then prod-hk-infer, then prod-sg-infer). Per stack: preview "
            "with the policy packs (a mandatory violation stops); for an infer stack, the release check (the "
            "release it will serve, read from its signed manifest, fits the pool's GPU memory with the "
            "configured tensor parallelism, max_model_len and utilization, and has a chat template if chat "
            "is routed; refused with the numbers before anything changes); up, then the health gate (outputs "
            "present, node groups and nodes Ready, the inference Deployment rolled out and its endpoint's "
            "health check answers; an infer stack whose servers wait for a first model release passes as "
            "'deployed, no model release yet'). An infer stack serving the global endpoint is drained from "
            "it before its update and put back after its gate passed; a failed wave leaves it drained "
            "and says so. The first failure stops the rollout with a summary of "
            "what changed and what did not. A stack's first deploy goes in steps: a targeted up of the copy "
            "area's ECR creation template, `aiplat images copy`, then the rest; with a private endpoint the "
            "rest is the AWS side only (the stack file with kubernetes_access: skip), and a second "
            "`aiplat rollout --resume` from inside the VPC adds the cluster services. Each stack's result is "
            "recorded in build/rollout/<env>.json for --resume. "
            "State backend and secrets provider come from rollout.yaml. "
            "Needs the Pulumi CLI. Exit 0 all healthy (or deployed with no model release yet), 1 a stack "
            "failed, 2 config error, 4 no Pulumi CLI, 5 a mandatory policy violation."
        ),
    )
    p.add_argument(
        "--env", required=True, choices=[e.value for e in Environment], help="the environment to roll out"
    )
    p.add_argument("--dry-run", action="store_true", help="preview every wave, change nothing")
    p.add_argument(
        "--stack",
        action="append",
        default=[],
        help="only this stack of the waves (repeatable; in wave order)",
    )
    p.add_argument("--wave", type=int, default=None, help="only this wave (1 = the first)")
    p.add_argument(
        "--model-only",
        action="store_true",
        help="only the infer stacks: a model rollout or rollback that leaves the train wave alone",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip the stacks the last rollout of --env finished (build/rollout/<env>.json)",
    )
    p.add_argument(
        "--stacks-dir", type=Path, default=None, help="folder of stack files (default: the project's stacks/)"
    )
    p.set_defaults(run=run)


class _Display:
    """One progress line per stack; engine events update it, problems are printed above it."""

    def __init__(self, progress: Progress, stacks: list[str]) -> None:
        self.progress = progress
        self.lock = threading.Lock()
        self.tasks: dict[str, TaskID] = {s: progress.add_task(f"{s}: waiting", total=None) for s in stacks}
        self.state: dict[str, str] = dict.fromkeys(stacks, "waiting")
        self.steps: dict[str, int] = dict.fromkeys(stacks, 0)

    def on_state(self, stack: str, state: str) -> None:
        with self.lock:
            self.state[stack] = state
            self.progress.update(self.tasks[stack], description=f"{stack}: {state}")

    def on_event(self, e: StackEvent) -> None:
        with self.lock:
            if e.kind == "resource":
                self.steps[e.stack] += 1
                self.progress.update(
                    self.tasks[e.stack],
                    description=f"{e.stack}: {self.state[e.stack]} [{self.steps[e.stack]}] {e.message}",
                )
            elif e.kind == "policy":
                style = "bold red" if e.level == "mandatory" else "yellow"
                self.progress.console.print(
                    f"{e.stack}: policy ({e.level}): {e.message}", style=style, markup=False
                )
            elif e.kind in ("failed", "diagnostic") and e.level in ("error", "warning"):
                style = "red" if e.level == "error" else "yellow"
                self.progress.console.print(f"{e.stack}: {e.level}: {e.message}", style=style, markup=False)
            elif e.kind == "summary":
                self.progress.console.print(f"{e.stack}: {e.message}", markup=False, highlight=False)


def _changes(changes: Mapping[str, int]) -> str:
    shown = {op: n for op, n in sorted(changes.items()) if n}
    return ", ".join(f"{op} {n}" for op, n in shown.items()) or "-"


def summary(result: RolloutResult) -> Table:
    table = Table(title="dry run (preview only)" if result.dry_run else "rollout", title_justify="left")
    for col in ("wave", "stack", "result", "previewed", "changed", "detail"):
        table.add_column(col, overflow="fold")
    for i, wave in enumerate(result.waves):
        for s in wave:
            r = result.results[s]
            detail = [f"{v.pack}/{v.policy}: {v.message}" for v in r.violations if v.mandatory]
            detail += [f"{r.release.name}: {r.release.detail}"] if r.release is not None else []
            detail += [f"{c.name}: {c.detail}" for c in r.gate]
            detail += [f"{d.action}: {d.detail}" for d in r.drain]
            if r.error and r.state is not State.blocked:
                detail.append(r.error)
            table.add_row(
                str(i + 1),
                s,
                f"[{STYLE.get(r.state, 'red')}]{r.state.value}[/]",
                _changes(r.previewed),
                _changes(r.changed),
                "\n".join(detail),
            )
    return table


def execute(
    waves: list[list[str]],
    configs: Mapping[str, PlatformConfig],
    runner: StackRunner,
    gate: HealthGate,
    console: Console,
    *,
    dry_run: bool,
    drainer: Drainer | None = None,
    release_check: ReleaseCheck | None = None,
    first: Mapping[str, FirstDeploy] | None = None,
    on_done: Callable[[StackResult], None] = lambda result: None,
) -> int:
    """Run the waves with a live display, print the summary, return the exit code."""
    stacks = [s for wave in waves for s in wave]
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console
    ) as progress:
        display = _Display(progress, stacks)
        result = run_rollout(
            waves,
            configs,
            runner,
            gate,
            dry_run=dry_run,
            on_event=display.on_event,
            on_state=display.on_state,
            drainer=drainer,
            release_check=release_check,
            first=first,
            on_done=on_done,
        )
    console.print(summary(result))
    changed = [r.stack for r in result.by_state(*State) if r.changes]
    untouched = [s for s in stacks if s not in changed]
    console.print(
        f"changed: {', '.join(changed) or 'nothing'}; not changed: {', '.join(untouched) or 'none'}"
    )
    awaiting = [r.stack for r in result.by_state(State.awaiting_release)]
    if awaiting:
        console.print(
            f"deployed, no model release yet: {', '.join(awaiting)}; they serve once a model is trained, "
            "published and replicated to their region (docs/how-to/promote-rollback.md)",
            style="yellow",
        )
    aws_side = [r.stack for r in result.by_state(State.aws_side)]
    if aws_side:
        console.print(
            f"AWS side deployed: {', '.join(aws_side)}; their endpoints are private, so the cluster services "
            "need a run from inside the VPC: `aiplat rollout --env <env> --resume` there "
            "(docs/how-to/reach-the-cluster.md)",
            style="yellow",
        )
    if result.left_drained:
        console.print(
            f"left drained from the global endpoint: {', '.join(result.left_drained)}; the other regions "
            "answer it. Fix the stack and roll out again: it is put back once its health gate passes "
            "(docs/inference/global-endpoint.md)",
            style="red",
        )
    if result.stopped_at is not None:
        skipped = [r.stack for r in result.by_state(State.not_started)]
        console.print(
            f"stopped after wave {result.stopped_at + 1}"
            + (f"; not started: {', '.join(skipped)}" if skipped else ""),
            style="red",
        )
    if result.ok:
        return EXIT_OK
    return EXIT_POLICY if result.blocked_by_policy else EXIT_FAILED


def _first_deploys(
    stacks: list[str],
    configs: Mapping[str, PlatformConfig],
    runner: AutomationRunner,
    args: argparse.Namespace,
    out_dir: Path,
) -> dict[str, FirstDeploy]:
    """The stacks with no outputs yet (never deployed) and their first deploy's steps; the copy area's
    targets come from the stack's offline plan."""
    from infra.ops.first_deploy import CommandCopier, copies_images, first_deploy
    from infra.plan.runner import run_plan

    copier = CommandCopier(args.stacks_dir)
    first = {}
    for stack in stacks:
        if runner.outputs(stack):
            continue
        cfg = configs[stack]
        try:
            resources = (
                run_plan(stack, cfg, args.stacks_dir).as_json()["resources"] if copies_images(cfg) else None
            )
        except ModuleNotFoundError as exc:  # the offline plan's extra (moto's AWS snapshot) is not installed
            raise ToolMissingError(
                f"{stack}'s first deploy reads the copy area's resources from its offline plan, which "
                f"needs the plan extra ({exc.name} is missing): .venv/bin/pip install -e '.[plan]', then "
                "run this again"
            ) from None
        first[stack] = first_deploy(
            stack, cfg, resources, copier, stacks_dir=args.stacks_dir, out_dir=out_dir
        )
    return first


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.aws_live import boto3_clients
    from infra.ops.automation import AutomationRunner
    from infra.ops.drain import Route53Drainer
    from infra.ops.health import AwsHealthGate
    from infra.ops.release_check import AwsReleaseCheck
    from infra.ops.rollout_state import finished, forget, record, select_waves, state_file

    env = Environment(args.env)
    state = state_file(env.value)
    try:
        rollout = load_rollout_config()
        configs = {s: load_stack_config(s, args.stacks_dir) for s in list_stacks(args.stacks_dir)}
        waves = select_waves(
            plan_waves(rollout, env, configs),
            configs,
            stacks=args.stack,
            wave=args.wave,
            model_only=args.model_only,
            skip=finished(state) if args.resume else (),
        )
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    if not waves:
        console.print(f"nothing to roll out: no stack selected, or all finished ({state})")
        return EXIT_OK
    console.print(
        f"{'dry run' if args.dry_run else 'rollout'} {env.value}: "
        + " -> ".join(" + ".join(w) for w in waves)
        + f" (backend {rollout.backend_url})",
        highlight=False,
    )
    try:
        runner = AutomationRunner(project_root(), rollout, stacks_dir=args.stacks_dir)
        first = _first_deploys([s for w in waves for s in w], configs, runner, args, state.parent)
    except PlatformError as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    if not args.dry_run and not args.resume:
        forget(state, [s for w in waves for s in w])  # a new rollout of these: --resume continues this one
    clients = boto3_clients()
    gate = AwsHealthGate(rollout.health, clients)
    drainer = Route53Drainer(clients, runner.outputs, configs=configs)
    releases = AwsReleaseCheck(clients, runner.outputs)
    return execute(
        waves,
        configs,
        runner,
        gate,
        console,
        dry_run=args.dry_run,
        drainer=drainer,
        release_check=releases,
        first=first,
        on_done=(lambda result: None) if args.dry_run else (lambda result: record(state, result)),
    )
