"""``aiplat rollout`` and the global endpoint: each region is drained before its update and put back after
its health gate passed; a failed wave leaves it drained and says so (fakes for the runner, gate and
drainer; the Route 53 drainer itself: tests/infra/ops/test_drain.py)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from infra.cli.rollout import execute
from infra.core.config import Environment
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.ops.rollout import (
    WHOLE,
    DrainStep,
    EventSink,
    GateCheck,
    Pass,
    PreviewOutcome,
    State,
    UpOutcome,
    run_rollout,
)
from infra.schema.platform import PlatformConfig
from infra.stack.rollout import plan_waves

CONFIGS = {s: load_stack_config(s) for s in list_stacks()}
PROD = plan_waves(load_rollout_config(), Environment.prod, CONFIGS)


class Log:
    """One ordered log shared by the fakes: (step, stack)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[tuple[str, str]] = []

    def add(self, step: str, stack: str) -> None:
        with self.lock:
            self.steps.append((step, stack))


class Runner:
    def __init__(self, log: Log, fail_up: set[str] | None = None) -> None:
        self.log, self.fail_up = log, fail_up or set()

    def preview(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> PreviewOutcome:
        self.log.add("preview", stack)
        return PreviewOutcome({"same": 10})

    def up(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> UpOutcome:
        self.log.add("update", stack)
        if stack in self.fail_up:
            return UpOutcome({"update": 1}, {}, "helm release inference: timed out")
        return UpOutcome({"update": 2, "same": 10}, {"clusterName": stack})


class Gate:
    def __init__(self, log: Log, fail: set[str] | None = None) -> None:
        self.log, self.fail = log, fail or set()

    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        self.log.add("gate", stack)
        ok = stack not in self.fail
        return [GateCheck("inference-endpoint", ok, "200" if ok else "GET /healthz: 503")]


class Drainer:
    def __init__(self, log: Log, fail: Mapping[str, str] | None = None) -> None:
        self.log, self.fail = log, dict(fail or {})
        self.out: set[str] = set()

    def _step(self, action: str, stack: str, cfg: PlatformConfig) -> DrainStep:
        self.log.add(action, stack)
        if self.fail.get(stack) == action:
            return DrainStep(action, False, "route53:UpdateHealthCheck: AccessDenied")
        (self.out.add if action == "drain" else self.out.discard)(stack)
        return DrainStep(action, True, f"{cfg.region} {'out of' if action == 'drain' else 'back in'} it")

    def drain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        assert self.out - {stack} == set(), f"{stack} drained while {self.out} still is"
        return self._step("drain", stack, cfg)

    def undrain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        return self._step("undrain", stack, cfg)


def test_each_region_drained_updated_gated_and_put_back_one_at_a_time() -> None:
    log = Log()
    drainer = Drainer(log)
    result = run_rollout(PROD, CONFIGS, Runner(log), Gate(log), drainer=drainer)
    assert result.ok and result.left_drained == []
    steps = [s for s in log.steps if s[0] != "preview"]
    # the train stack serves no global endpoint: never drained
    assert steps == [
        ("update", "prod-us-train"),
        ("gate", "prod-us-train"),
        ("drain", "prod-hk-infer"),
        ("update", "prod-hk-infer"),
        ("gate", "prod-hk-infer"),
        ("undrain", "prod-hk-infer"),
        ("drain", "prod-sg-infer"),
        ("update", "prod-sg-infer"),
        ("gate", "prod-sg-infer"),
        ("undrain", "prod-sg-infer"),
    ]
    assert drainer.out == set()
    assert [d.action for d in result.results["prod-hk-infer"].drain] == ["drain", "undrain"]


def test_a_failed_gate_leaves_the_region_drained_and_stops() -> None:
    log = Log()
    drainer = Drainer(log)
    result = run_rollout(PROD, CONFIGS, Runner(log), Gate(log, fail={"prod-hk-infer"}), drainer=drainer)
    hk = result.results["prod-hk-infer"]
    assert hk.state is State.gate_failed and hk.drained
    assert result.left_drained == ["prod-hk-infer"] and drainer.out == {"prod-hk-infer"}
    assert ("undrain", "prod-hk-infer") not in log.steps
    # the other region keeps answering the global name: never drained, never updated
    assert not any(stack == "prod-sg-infer" for _, stack in log.steps)
    assert result.results["prod-sg-infer"].state is State.not_started


def test_a_failed_update_leaves_the_region_drained() -> None:
    log = Log()
    result = run_rollout(
        PROD, CONFIGS, Runner(log, fail_up={"prod-hk-infer"}), Gate(log), drainer=Drainer(log)
    )
    assert result.results["prod-hk-infer"].state is State.up_failed
    assert result.left_drained == ["prod-hk-infer"]
    assert ("gate", "prod-hk-infer") not in log.steps


def test_a_failed_drain_stops_before_the_update() -> None:
    log = Log()
    drainer = Drainer(log, fail={"prod-hk-infer": "drain"})
    result = run_rollout(PROD, CONFIGS, Runner(log), Gate(log), drainer=drainer)
    hk = result.results["prod-hk-infer"]
    assert hk.state is State.drain_failed and not hk.drained
    assert "AccessDenied" in (hk.error or "")
    assert ("update", "prod-hk-infer") not in log.steps


def test_a_failed_undrain_is_a_failure_that_says_the_region_is_still_out() -> None:
    log = Log()
    drainer = Drainer(log, fail={"prod-hk-infer": "undrain"})
    result = run_rollout(PROD, CONFIGS, Runner(log), Gate(log), drainer=drainer)
    hk = result.results["prod-hk-infer"]
    assert hk.state is State.undrain_failed and hk.drained and not result.ok
    assert result.left_drained == ["prod-hk-infer"]


def test_dry_run_drains_nothing() -> None:
    log = Log()
    result = run_rollout(PROD, CONFIGS, Runner(log), Gate(log), drainer=Drainer(log), dry_run=True)
    assert result.ok and {step for step, _ in log.steps} == {"preview"}


def test_cli_says_which_region_was_left_drained(capsys) -> None:
    from rich.console import Console

    log = Log()
    console = Console(width=300, force_terminal=False)
    code = execute(
        PROD,
        CONFIGS,
        Runner(log),
        Gate(log, fail={"prod-hk-infer"}),
        console,
        dry_run=False,
        drainer=Drainer(log),
    )
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1
    assert "left drained from the global endpoint: prod-hk-infer; the other regions answer it" in out
    assert "drain: ap-east-1 out of it" in out
