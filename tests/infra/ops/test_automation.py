"""The Automation API runner's thin parts: engine events as the display sees them (built from the engine's
JSON with the SDK's own ``EngineEvent.from_json``), and the clear failure without the Pulumi CLI."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from pulumi.automation import EngineEvent

from infra.cli.main import main
from infra.core.errors import ConfigErrors, ToolMissingError
from infra.io.rollout_config import load_rollout_config
from infra.ops.automation import AutomationRunner, _Recorder, require_pulumi_cli, to_stack_event
from tests.conftest import REPO

URN = "urn:pulumi:prod-us-train::aiplat::aiplat:network:GpuVpc$aws:ec2/vpc:Vpc::net-vpc"


def _event(**body: object) -> EngineEvent:
    return EngineEvent.from_json({"sequence": 1, "timestamp": 0, **body})


def test_engine_events_become_stack_events() -> None:
    pre = to_stack_event(
        "s", _event(resourcePreEvent={"metadata": {"op": "create", "urn": URN, "type": "aws:ec2/vpc:Vpc"}})
    )
    assert pre is not None and (pre.kind, pre.op, pre.message) == (
        "resource",
        "create",
        "create aws:ec2/vpc:Vpc",
    )
    failed = to_stack_event(
        "s",
        _event(
            resOpFailedEvent={
                "metadata": {"op": "update", "urn": URN, "type": "aws:ec2/vpc:Vpc"},
                "status": 1,
            }
        ),
    )
    assert failed is not None and (failed.kind, failed.level) == ("failed", "error")
    diag = to_stack_event("s", _event(diagnosticEvent={"message": "boom\n", "severity": "error", "urn": URN}))
    assert diag is not None and (diag.kind, diag.level, diag.message) == ("diagnostic", "error", "boom")
    assert (
        to_stack_event("s", _event(diagnosticEvent={"message": "x", "severity": "info", "ephemeral": True}))
        is None
    )
    summary = to_stack_event("s", _event(summaryEvent={"resourceChanges": {"same": 40, "create": 2}}))
    assert summary is not None and summary.message == "create 2, same 40"
    assert to_stack_event("s", _event(preludeEvent={"config": {}})) is None


def test_policy_events_are_kept_as_violations() -> None:
    seen = []
    recorder = _Recorder("prod-hk-infer", seen.append)
    recorder(
        _event(
            policyEvent={
                "message": "listener allows TLS 1.2\n",
                "policyName": "tls13-listeners",
                "policyPackName": "aiplat-guard",
                "policyPackVersion": "0.1.0",
                "enforcementLevel": "mandatory",
                "resourceUrn": URN,
            }
        )
    )
    recorder(
        _event(
            policyEvent={
                "message": "no Owner tag",
                "policyName": "tags",
                "policyPackName": "aiplat-guard",
                "enforcementLevel": "warning",
            }
        )
    )
    assert [(v.pack, v.policy, v.message, v.mandatory, v.urn) for v in recorder.violations] == [
        ("aiplat-guard", "tls13-listeners", "listener allows TLS 1.2", True, URN),
        ("aiplat-guard", "tags", "no Owner tag", False, ""),
    ]
    assert [e.level for e in seen] == ["mandatory", "warning"]


def test_without_the_pulumi_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing named pulumi here
    with pytest.raises(ToolMissingError, match=r"the Pulumi CLI is not installed here .*get\.pulumi\.com"):
        require_pulumi_cli()
    with pytest.raises(ToolMissingError):
        AutomationRunner(REPO, load_rollout_config())


def test_rollout_dry_run_without_the_cli_exits_4(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["rollout", "--env", "prod", "--dry-run"]) == 4
    err = " ".join(capsys.readouterr().err.split())
    assert "error: the Pulumi CLI is not installed here (no `pulumi` on PATH)" in err
    assert "curl -fsSL https://get.pulumi.com | sh" in err
    assert "Traceback" not in err


def test_policy_pack_folder_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A stand-in `pulumi` on PATH gets past the CLI check (the runner does not run it before a stack is used).
    cli = tmp_path / "pulumi"
    cli.write_text("#!/bin/sh\nexit 1\n")
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(ConfigErrors, match=r"rollout.yaml: policy_packs: \['policies'\] is not a folder"):
        AutomationRunner(project, load_rollout_config())
