"""``aiplat rollout``: deploy an environment's stacks wave by wave, with a gate after each stack.

Each stack of a wave (in parallel): preview with the policy packs (a mandatory violation stops), the release
check of an infer stack (``infra/ops/release_check.py``: the release it will serve fits its engine settings
and GPUs; a refusal stops before anything changes, in dry runs too), ``up``, then the health gate
(``infra/ops/health.py``); ``awaiting_release`` passes. An infer stack serving the
global endpoint is drained from it before its ``up`` and put back once its gate passed; a failed update or
gate leaves it drained (``Drainer``, ``infra/ops/drain.py``; docs/inference/global-endpoint.md). The next
wave starts only when every stack passed; the result names the stacks changed, failed and never started.
``dry_run`` previews only. Stacks run through ``StackRunner`` (``infra/ops/automation.py``) and are checked
through ``HealthGate``, so the wave logic is tested with fakes (docs/operations.md).

A stack's first deploy (``FirstDeploy``, docs/how-to/image-cache.md) goes in three steps: a targeted up of the
copy area's creation template, ``aiplat images copy`` (an ``ImageCopier``), then the rest; with a private
endpoint (``kubernetes_access: in_vpc``) the rest is the AWS side only (the stack file with
``kubernetes_access: skip``), and the cluster services follow in a run from inside the new VPC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from infra.core.errors import PlatformError
from infra.schema.platform import PlatformConfig


@dataclass(frozen=True)
class StackEvent:
    """What the engine reported, reduced to what a progress display shows."""

    stack: str
    kind: str  # resource | failed | diagnostic | policy | summary
    message: str
    op: str = ""  # create | update | delete | replace | same ... (resource events)
    urn: str = ""
    level: str = ""  # info | warning | error (diagnostics); warning | mandatory (policy)


EventSink = Callable[[StackEvent], None]


@dataclass(frozen=True)
class PolicyViolation:
    policy: str
    pack: str
    message: str
    mandatory: bool
    urn: str = ""


@dataclass(frozen=True)
class PreviewOutcome:
    """What a preview would change (``{"create": 3, "same": 40}``) and the policy violations it reported;
    ``error`` when the preview itself failed."""

    changes: Mapping[str, int]
    violations: Sequence[PolicyViolation] = ()
    error: str | None = None


@dataclass(frozen=True)
class UpOutcome:
    """What ``up`` changed, the stack's outputs afterwards; ``error`` when the update failed."""

    changes: Mapping[str, int]
    outputs: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Pass:
    """What one preview and up of a stack covers: the whole program, only the resources whose URNs match
    ``targets`` (Pulumi's ``--target`` globs), or the program run with another stack file
    (``config_file``)."""

    name: str = "whole stack"
    targets: tuple[str, ...] = ()
    config_file: str | None = None


WHOLE = Pass()


class StackRunner(Protocol):
    """Preview and update one stack (the Automation API in production)."""

    def preview(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> PreviewOutcome: ...

    def up(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> UpOutcome: ...


@dataclass(frozen=True)
class GateCheck:
    """One check of the health gate. ``awaiting``: the check passed, but the stack waits for something
    outside the deploy before it serves (e.g. "a model release" on a new platform, finding F6)."""

    name: str
    ok: bool
    detail: str
    awaiting: str = ""


class HealthGate(Protocol):
    """Checks a stack after ``up``; a failed check stops the rollout."""

    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]: ...


class ReleaseCheck(Protocol):
    """Checks, before ``up``, that what a stack will serve can be served (None: nothing to check)."""

    def check(self, stack: str, cfg: PlatformConfig) -> GateCheck | None: ...


@dataclass(frozen=True)
class DrainStep:
    """One drain or undrain of a region: done or not, and what was seen (switch, wait, or the error)."""

    action: str  # drain | undrain
    ok: bool
    detail: str


class Drainer(Protocol):
    """Takes an infer stack's region out of the global endpoint and puts it back (Route 53 in production)."""

    def drain(self, stack: str, cfg: PlatformConfig) -> DrainStep: ...

    def undrain(self, stack: str, cfg: PlatformConfig) -> DrainStep: ...


class ImageCopier(Protocol):
    """Copies a stack's images of registries no pull through cache rule takes (``aiplat images copy``)."""

    def copy(self, stack: str) -> GateCheck: ...


@dataclass(frozen=True)
class FirstDeploy:
    """A stack that was never deployed: ``copy_area`` (a targeted pass) and the image copy (when ``copies``:
    its charts run images of the copy area), then ``rest``; ``aws_side_only``: ``rest`` leaves the
    Kubernetes side for a run from inside the VPC."""

    copy_area: Pass
    rest: Pass
    copier: ImageCopier
    aws_side_only: bool = False
    copies: bool = True


def serves_global_endpoint(cfg: PlatformConfig) -> bool:
    """An infer stack whose region is one of the global endpoint's (``inference.global_endpoint``)."""
    return cfg.inference is not None and cfg.inference.global_endpoint is not None


class State(StrEnum):
    not_started = "not started"
    previewed = "previewed"  # dry run: the preview passed
    blocked = "blocked by policy"
    preview_failed = "preview failed"
    release_refused = "release refused, not updated"
    up_failed = "update failed"
    images_failed = "image copy failed"
    gate_failed = "health gate failed"
    drain_failed = "not drained, not updated"
    undrain_failed = "deployed and healthy, still drained"
    healthy = "deployed and healthy"
    # deployed, its gate passed, but it serves nothing until what a check awaits exists (no model release
    # yet on a new platform): not a failed deploy, so the next wave goes on
    awaiting_release = "deployed, no model release yet"
    # a first deploy from outside the VPC of a private endpoint: the AWS side is up (the next wave can read
    # its outputs), the cluster services wait for `aiplat rollout` from inside the VPC
    aws_side = "AWS side deployed; run again from inside the VPC"


PASSED = (State.previewed, State.healthy, State.awaiting_release, State.aws_side)
# what a later `aiplat rollout --resume` need not deploy again
FINISHED = (State.healthy, State.awaiting_release)


@dataclass
class StackResult:
    stack: str
    wave: int
    state: State = State.not_started
    previewed: Mapping[str, int] = field(default_factory=dict)
    changed: Mapping[str, int] = field(default_factory=dict)
    violations: Sequence[PolicyViolation] = ()
    gate: Sequence[GateCheck] = ()
    release: GateCheck | None = None  # the release check before up (infer stacks)
    error: str | None = None
    drain: Sequence[DrainStep] = ()
    # out of the global endpoint when the rollout ended (drained and not put back)
    drained: bool = False

    @property
    def changes(self) -> int:
        """Resources the update touched (everything but 'same')."""
        return sum(n for op, n in self.changed.items() if op != "same")


@dataclass
class RolloutResult:
    waves: list[list[str]]
    results: dict[str, StackResult]
    dry_run: bool

    @property
    def ok(self) -> bool:
        return all(r.state in PASSED for r in self.results.values())

    @property
    def stopped_at(self) -> int | None:
        """The wave whose failure stopped the rollout, if any."""
        failed = [r.wave for r in self.results.values() if r.state not in (*PASSED, State.not_started)]
        return min(failed) if failed else None

    @property
    def blocked_by_policy(self) -> bool:
        return any(r.state is State.blocked for r in self.results.values())

    def by_state(self, *states: State) -> list[StackResult]:
        return [self.results[s] for wave in self.waves for s in wave if self.results[s].state in states]

    @property
    def left_drained(self) -> list[str]:
        """Stacks whose region the rollout took out of the global endpoint and did not put back."""
        return [s for wave in self.waves for s in wave if self.results[s].drained]


def _mandatory(violations: Sequence[PolicyViolation]) -> list[PolicyViolation]:
    return [v for v in violations if v.mandatory]


def _previewed(stack: str, result: StackResult, runner: StackRunner, part: Pass, on_event: EventSink) -> bool:
    """Preview ``part`` into ``result``; False (the state set) when a mandatory policy or an error stops."""
    preview = runner.preview(stack, on_event, part)
    result.previewed = {k: result.previewed.get(k, 0) + n for k, n in preview.changes.items()}
    result.violations = (*result.violations, *preview.violations)
    if _mandatory(preview.violations):
        result.state, result.error = State.blocked, preview.error
        return False
    if preview.error:
        result.state, result.error = State.preview_failed, preview.error
        return False
    return True


def _updated(
    stack: str, result: StackResult, runner: StackRunner, part: Pass, on_event: EventSink
) -> UpOutcome:
    up = runner.up(stack, on_event, part)
    result.changed = {k: result.changed.get(k, 0) + n for k, n in up.changes.items()}
    if up.error:
        result.state, result.error = State.up_failed, up.error
    return up


def _first_steps(
    stack: str,
    result: StackResult,
    runner: StackRunner,
    first: FirstDeploy,
    *,
    dry_run: bool,
    on_event: EventSink,
    on_state: Callable[[str, str], None],
) -> bool:
    """The copy area's pass and the image copy of a first deploy; False (the state set) when one stops."""
    on_state(stack, f"previewing the {first.copy_area.name}")
    if not _previewed(stack, result, runner, first.copy_area, on_event):
        return False
    if dry_run:
        return True
    on_state(stack, f"updating the {first.copy_area.name}")
    if _updated(stack, result, runner, first.copy_area, on_event).error:
        return False
    on_state(stack, "copying images (aiplat images copy)")
    copied = first.copier.copy(stack)
    result.gate = (copied,)
    if not copied.ok:
        result.state, result.error = State.images_failed, copied.detail
        return False
    return True


def deploy_stack(
    stack: str,
    wave: int,
    cfg: PlatformConfig,
    runner: StackRunner,
    gate: HealthGate,
    *,
    dry_run: bool,
    on_event: EventSink,
    on_state: Callable[[str, str], None],
    drainer: Drainer | None = None,
    release_check: ReleaseCheck | None = None,
    first: FirstDeploy | None = None,
) -> StackResult:
    """One stack: preview (policy gate), release check, drain, up, health gate, undrain. Never raises for a
    failed step: it is recorded. The region is drained only when a ``drainer`` is given and it serves the
    global endpoint; a refused release or a failed drain stops before ``up`` (the region still serves), a
    failed up or gate leaves it drained. ``first``: a first deploy, whose copy area and images go first and
    whose ``rest`` may be the AWS side only (no drain, no gate: nothing serves yet)."""
    result = StackResult(stack, wave)
    if (
        first is not None
        and first.copies
        and not _first_steps(
            stack, result, runner, first, dry_run=dry_run, on_event=on_event, on_state=on_state
        )
    ):
        return result
    part = first.rest if first is not None else WHOLE
    on_state(stack, "previewing" if first is None else f"previewing the {part.name}")
    if not _previewed(stack, result, runner, part, on_event):
        return result
    if release_check is not None:
        on_state(stack, "checking the release")
        result.release = release_check.check(stack, cfg)
        if result.release is not None and not result.release.ok:
            result.state = State.release_refused
            return result
    if dry_run:
        result.state = State.previewed
        return result
    aws_side_only = first is not None and first.aws_side_only
    drains = drainer is not None and serves_global_endpoint(cfg) and not aws_side_only
    if drains:
        assert drainer is not None
        on_state(stack, "draining from the global endpoint")
        step = drainer.drain(stack, cfg)
        result.drain = (step,)
        if not step.ok:
            result.state, result.error = State.drain_failed, step.detail
            return result
        result.drained = True
    on_state(stack, "updating" if first is None else f"updating the {part.name}")
    up = _updated(stack, result, runner, part, on_event)
    if up.error:
        return result
    if aws_side_only:
        result.state = State.aws_side
        return result
    on_state(stack, "checking health")
    result.gate = (*result.gate, *gate.check(stack, cfg, up.outputs))
    if not all(c.ok for c in result.gate):
        result.state = State.gate_failed
        return result
    result.state = State.awaiting_release if any(c.awaiting for c in result.gate) else State.healthy
    if drains:
        assert drainer is not None
        on_state(stack, "back into the global endpoint")
        step = drainer.undrain(stack, cfg)
        result.drain = (*result.drain, step)
        if step.ok:
            result.drained = False
        else:
            result.state, result.error = State.undrain_failed, step.detail
    return result


def run_rollout(
    waves: list[list[str]],
    configs: Mapping[str, PlatformConfig],
    runner: StackRunner,
    gate: HealthGate,
    *,
    dry_run: bool = False,
    on_event: EventSink = lambda e: None,
    on_state: Callable[[str, str], None] = lambda stack, state: None,
    drainer: Drainer | None = None,
    release_check: ReleaseCheck | None = None,
    first: Mapping[str, FirstDeploy] | None = None,
    on_done: Callable[[StackResult], None] = lambda result: None,
) -> RolloutResult:
    """Run the waves in order, each wave's stacks in parallel; stop after the first wave with a failure
    (its other stacks finish: an update in flight is not interrupted). ``drainer``: drain and undrain the
    regions of the global endpoint around their update (``plan_waves`` keeps them in separate waves).
    ``first``: the stacks deployed for the first time and how; ``on_done`` is told each stack's result."""
    out = RolloutResult(
        [list(w) for w in waves],
        {s: StackResult(s, i) for i, wave in enumerate(waves) for s in wave},
        dry_run,
    )
    for i, wave in enumerate(waves):
        with ThreadPoolExecutor(max_workers=len(wave), thread_name_prefix=f"wave{i}") as pool:
            futures = {
                s: pool.submit(
                    deploy_stack,
                    s,
                    i,
                    configs[s],
                    runner,
                    gate,
                    dry_run=dry_run,
                    on_event=on_event,
                    on_state=on_state,
                    drainer=drainer,
                    release_check=release_check,
                    first=(first or {}).get(s),
                )
                for s in wave
            }
            for s, future in futures.items():
                try:
                    out.results[s] = future.result()
                except PlatformError:
                    raise  # a user error (the Pulumi CLI is missing...): printed with its exit code
                except Exception as exc:  # a runner or gate bug: recorded for this stack, stops the rollout
                    out.results[s] = StackResult(
                        s,
                        i,
                        State.up_failed,
                        error=f"{type(exc).__name__}: {exc}",
                        # it may have been drained before the error: say so rather than assume it serves
                        drained=drainer is not None and serves_global_endpoint(configs[s]),
                    )
            for s, r in out.results.items():
                if r.wave == i:
                    on_state(s, r.state.value)
                    on_done(r)
        if any(out.results[s].state not in PASSED for s in wave):
            break
    return out
