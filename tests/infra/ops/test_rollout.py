"""Wave logic, gating and failure handling of ``aiplat rollout``, through the ``StackRunner`` and
``HealthGate`` interfaces with fakes (the production runner is the Automation API, which needs the CLI)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from infra.cli.rollout import execute
from infra.core.config import Environment
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.ops.rollout import (
    WHOLE,
    EventSink,
    GateCheck,
    Pass,
    PolicyViolation,
    PreviewOutcome,
    StackEvent,
    State,
    UpOutcome,
    run_rollout,
)
from infra.schema.platform import PlatformConfig
from infra.stack.rollout import plan_waves

CONFIGS = {s: load_stack_config(s) for s in list_stacks()}
PROD = plan_waves(load_rollout_config(), Environment.prod, CONFIGS)


class FakeRunner:
    """Records every call in order; ``fail`` maps a stack to what goes wrong there."""

    def __init__(
        self, fail: Mapping[str, str] | None = None, barrier: threading.Barrier | None = None
    ) -> None:
        self.fail = dict(fail or {})
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.barrier = barrier

    def _log(self, op: str, stack: str) -> None:
        with self.lock:
            self.calls.append((op, stack))

    def preview(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> PreviewOutcome:
        self._log("preview", stack)
        if self.barrier is not None and stack in ("prod-hk-infer", "prod-sg-infer"):
            self.barrier.wait(timeout=5)  # both inference stacks must be in flight at once
        on_event(StackEvent(stack, "resource", "create aws:ec2/vpc:Vpc", op="create"))
        if self.fail.get(stack) == "policy":
            violation = PolicyViolation("tls13", "aiplat-guard", "listener allows TLS 1.2", mandatory=True)
            advisory = PolicyViolation("tags", "aiplat-guard", "no Owner tag", mandatory=False)
            return PreviewOutcome({"create": 1}, (violation, advisory), "preview failed: policy violations")
        if self.fail.get(stack) == "preview":
            return PreviewOutcome({}, (), "error: StackReference prod-us-train not found")
        return PreviewOutcome({"create": 3, "same": 10})

    def up(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> UpOutcome:
        self._log("up", stack)
        time.sleep(0.05)
        if self.fail.get(stack) == "up":
            return UpOutcome({"create": 1}, {}, "aws:eks:NodeGroup train: InsufficientInstanceCapacity")
        return UpOutcome({"create": 3, "same": 10}, {"clusterName": f"{stack}-cluster"})


class FakeGate:
    """``fail``: stacks whose nodes check fails; ``no_release``: infer stacks whose servers are up with no
    model release to load (the gate's inference-rollout check passes, awaiting one)."""

    def __init__(self, fail: set[str] | None = None, no_release: set[str] | None = None) -> None:
        self.fail = fail or set()
        self.no_release = no_release or set()
        self.checked: list[str] = []

    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        self.checked.append(stack)
        assert outputs["clusterName"] == f"{stack}-cluster"  # the gate sees what up returned
        ok = stack not in self.fail
        checks = [GateCheck("nodes", ok, "Ready: 2/2" if ok else "train 0 of 2 nodes Ready")]
        if stack in self.no_release:
            checks.append(
                GateCheck("inference-rollout", True, "no model release yet: ...", awaiting="a model release")
            )
        return checks


def test_prod_waves_from_rollout_yaml() -> None:
    # the two inference regions serve one global endpoint: one drains while the other answers it
    assert PROD == [["prod-us-train"], ["prod-hk-infer"], ["prod-sg-infer"]]


def test_all_waves_in_order_a_wave_s_stacks_in_parallel() -> None:
    waves = [["prod-us-train"], ["prod-hk-infer", "prod-sg-infer"]]  # parallel: only for this test
    runner = FakeRunner(barrier=threading.Barrier(2))
    gate = FakeGate()
    events: list[StackEvent] = []
    result = run_rollout(waves, CONFIGS, runner, gate, on_event=events.append)
    assert result.ok and result.stopped_at is None
    # the training stack is previewed, updated and checked before any inference stack starts
    first_infer = min(i for i, (_, s) in enumerate(runner.calls) if s != "prod-us-train")
    assert runner.calls[:first_infer] == [("preview", "prod-us-train"), ("up", "prod-us-train")]
    assert gate.checked[0] == "prod-us-train" and sorted(gate.checked[1:]) == [
        "prod-hk-infer",
        "prod-sg-infer",
    ]
    assert {r.state for r in result.results.values()} == {State.healthy}
    assert {e.stack for e in events} == {"prod-us-train", "prod-hk-infer", "prod-sg-infer"}
    assert all(r.changes == 3 for r in result.results.values())


def test_dry_run_previews_every_wave_and_changes_nothing() -> None:
    runner = FakeRunner()
    result = run_rollout(PROD, CONFIGS, runner, FakeGate(), dry_run=True)
    assert result.ok
    assert [op for op, _ in runner.calls] == ["preview"] * 3
    assert {r.state for r in result.results.values()} == {State.previewed}


def test_mandatory_violation_stops_before_up() -> None:
    runner = FakeRunner(fail={"prod-us-train": "policy"})
    result = run_rollout(PROD, CONFIGS, runner, FakeGate())
    assert runner.calls == [("preview", "prod-us-train")]
    assert result.results["prod-us-train"].state is State.blocked
    assert [r.stack for r in result.by_state(State.not_started)] == ["prod-hk-infer", "prod-sg-infer"]
    assert result.blocked_by_policy and result.stopped_at == 0


def test_failed_update_in_a_wave_lets_the_other_finish_then_stops() -> None:
    waves = [["prod-hk-infer", "prod-sg-infer"], ["prod-us-train"]]  # an order only for this test
    runner = FakeRunner(fail={"prod-hk-infer": "up"})
    result = run_rollout(waves, CONFIGS, runner, FakeGate())
    assert result.results["prod-hk-infer"].state is State.up_failed
    assert "InsufficientInstanceCapacity" in (result.results["prod-hk-infer"].error or "")
    assert result.results["prod-sg-infer"].state is State.healthy
    assert result.results["prod-us-train"].state is State.not_started
    assert ("up", "prod-us-train") not in runner.calls
    assert result.stopped_at == 0 and not result.ok and not result.blocked_by_policy


def test_health_gate_failure_stops_the_next_wave() -> None:
    runner = FakeRunner()
    result = run_rollout(PROD, CONFIGS, runner, FakeGate(fail={"prod-us-train"}))
    assert result.results["prod-us-train"].state is State.gate_failed
    assert result.results["prod-us-train"].gate[0].detail == "train 0 of 2 nodes Ready"
    assert not any(s != "prod-us-train" for _, s in runner.calls)


def test_no_model_release_yet_is_deployed_not_failed_and_the_rollout_goes_on() -> None:
    """F6: an infer stack on a new platform has nothing to serve yet; that is its own state, and the next
    wave still deploys (only a failure stops the rollout)."""
    waves = [["prod-hk-infer"], ["prod-sg-infer"]]  # an order only for this test
    runner = FakeRunner()
    result = run_rollout(waves, CONFIGS, runner, FakeGate(no_release={"prod-hk-infer"}))
    assert result.results["prod-hk-infer"].state is State.awaiting_release
    assert result.results["prod-sg-infer"].state is State.healthy
    assert ("up", "prod-sg-infer") in runner.calls
    assert result.ok and result.stopped_at is None


def test_a_failed_check_beside_an_awaiting_one_fails_the_gate() -> None:
    result = run_rollout(
        PROD, CONFIGS, FakeRunner(), FakeGate(fail={"prod-hk-infer"}, no_release={"prod-hk-infer"})
    )
    assert result.results["prod-hk-infer"].state is State.gate_failed
    assert not result.ok and result.stopped_at == 1


def test_preview_error_is_not_a_policy_block() -> None:
    result = run_rollout(PROD, CONFIGS, FakeRunner(fail={"prod-us-train": "preview"}), FakeGate())
    assert result.results["prod-us-train"].state is State.preview_failed
    assert not result.blocked_by_policy


class BrokenGate:
    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        raise RuntimeError("gate bug")


def test_an_unexpected_error_is_recorded_for_its_stack() -> None:
    result = run_rollout(PROD, CONFIGS, FakeRunner(), BrokenGate())
    assert result.results["prod-us-train"].error == "RuntimeError: gate bug"
    assert result.stopped_at == 0


@pytest.mark.parametrize(
    ("fail", "gate_fail", "code", "lines"),
    [
        (
            {},
            set(),
            0,
            ["changed: prod-us-train, prod-hk-infer, prod-sg-infer; not changed: none"],
        ),
        (
            {},
            "no release in sg",
            0,
            [
                "│ prod-sg-infer │ deployed, no model release yet │",
                "inference-rollout: no model release yet",
                "deployed, no model release yet: prod-sg-infer; they serve once a model is trained, "
                "published and replicated",
            ],
        ),
        (
            {"prod-us-train": "policy"},
            set(),
            5,
            [
                "aiplat-guard/tls13: listener allows TLS 1.2",
                "changed: nothing; not changed: prod-us-train, prod-hk-infer, prod-sg-infer",
                "stopped after wave 1; not started: prod-hk-infer, prod-sg-infer",
            ],
        ),
        (
            {"prod-sg-infer": "up"},
            set(),
            1,
            [
                "update failed",
                "changed: prod-us-train, prod-hk-infer, prod-sg-infer; not changed: none",
                "stopped after wave 3",
            ],
        ),
    ],
)
def test_cli_summary_and_exit_code(fail, gate_fail, code, lines, capsys) -> None:
    from rich.console import Console

    console = Console(width=300, force_terminal=False)
    gate = FakeGate(no_release={"prod-sg-infer"}) if gate_fail == "no release in sg" else FakeGate(gate_fail)
    assert execute(PROD, CONFIGS, FakeRunner(fail=fail), gate, console, dry_run=False) == code
    out = " ".join(capsys.readouterr().out.split())
    for line in lines:
        assert line in out, out
