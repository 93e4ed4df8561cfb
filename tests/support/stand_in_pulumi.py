"""A stand-in for the ``pulumi`` CLI, run by the Automation API as the real one would be (there is no
Pulumi CLI here): it records every argv to ``$STAND_IN_LOG`` (one JSON list a line), parses it against the
recorded CLI table (``tests/support/pulumi_cli.py``: an unknown flag exits 255 as the CLI does), and answers
what the Automation API asks: ``version``, ``stack select`` (255 "no stack named" until ``stack init``),
``stack output``, ``stack history``, and ``preview``/``up`` with engine events streamed to the
``--event-log`` address over the SDK's own gRPC Events service (CLI > 3.205 does so). Like the engine with
the project's pack and no pack config, a preview or up given ``--policy-pack`` without
``--policy-pack-config`` reports the pack's defaults as a mandatory violation and fails. State (stacks,
outputs) lives in ``$STAND_IN_STATE``.

Run as ``python stand_in_pulumi.py ARGS`` through a ``pulumi`` wrapper on PATH (``install`` writes one).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "3.272.0"  # the CLI release of the pinned SDK (pyproject.toml: pulumi==3.272.0)
PROJECT = "aiplat"


def install(bin_dir: Path, log: Path, state: Path) -> dict[str, str]:
    """Write ``bin_dir/pulumi`` (and ``bin_dir/aiplat``, which only records its argv as ``["aiplat", ...]``)
    and return the environment that puts them first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    for name, lead in (("pulumi", ""), ("aiplat", " --as-aiplat")):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}"{lead} "$@"\n')
        wrapper.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "STAND_IN_LOG": str(log),
        "STAND_IN_STATE": str(state),
    }


def read_log(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _stacks(state: Path) -> dict[str, dict]:
    file = state / "stacks.json"
    return json.loads(file.read_text()) if file.exists() else {}


def _save(state: Path, stacks: dict[str, dict]) -> None:
    (state / "stacks.json").write_text(json.dumps(stacks))


def _stream(address: str, events: list[dict]) -> None:
    import grpc
    from pulumi.runtime.proto import events_pb2, events_pb2_grpc

    target = address.removeprefix("tcp://")
    with grpc.insecure_channel(target) as channel:
        stub = events_pb2_grpc.EventsStub(channel)
        requests = (
            events_pb2.EventRequest(event=json.dumps({"sequence": i, "timestamp": 0, **e}))
            for i, e in enumerate(events)
        )
        stub.StreamEvents(requests)


def _urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def _update(parsed, stack: str, stacks: dict[str, dict], state: Path, *, apply: bool) -> int:  # noqa: ANN001
    packs = parsed.flags.get("--policy-pack", [])
    configs = parsed.flags.get("--policy-pack-config", [])
    events: list[dict] = []
    type_ = "aws:ec2/vpc:Vpc"
    events.append(
        {"resourcePreEvent": {"metadata": {"op": "create", "urn": _urn(stack, type_, "vpc"), "type": type_}}}
    )
    failed = ""
    if configs and len(configs) != len(packs):
        failed = "the number of --policy-pack-config paths must match the number of --policy-pack paths"
    elif packs and not configs:
        # the pack's defaults apply: what prod-us-train's 32 GPUs meet without its settings
        events.append(
            {
                "policyEvent": {
                    "message": "no --policy-pack-config: the pack's defaults apply (gpu-budget.maxGpus 16)",
                    "policyName": "gpu-budget",
                    "policyPackName": "aiplat-guard",
                    "policyPackVersion": "0.1.0",
                    "enforcementLevel": "mandatory",
                }
            }
        )
        failed = "preview failed: 1 mandatory policy violation"
    changes = {"create": 3} if stacks[stack].get("outputs") is None else {"same": 3}
    events.append({"summaryEvent": {"resourceChanges": changes}})
    address = parsed.one("--event-log")
    if address:
        _stream(address, events)
    if failed:
        print(f"error: {failed}", file=sys.stderr)
        return 255
    if apply:
        outputs = {"region": "us-east-1", "clusterName": f"{stack}-eks", "vpcId": "vpc-1", "nodeGroups": []}
        if parsed.flags.get("--target"):
            outputs = {}  # a targeted up registers no outputs of the whole program
        stacks[stack]["outputs"] = {**(stacks[stack].get("outputs") or {}), **outputs}
        stacks[stack]["changes"] = changes
        _save(state, stacks)
    return 0


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    from tests.support.pulumi_cli import UnknownCommand, parse

    log = Path(os.environ["STAND_IN_LOG"])
    state = Path(os.environ["STAND_IN_STATE"])
    with log.open("a") as f:
        f.write(json.dumps(["aiplat", *argv[1:]] if argv[:1] == ["--as-aiplat"] else argv) + "\n")
    if argv[:1] == ["--as-aiplat"]:
        return 0
    try:
        parsed = parse(argv)
    except UnknownCommand as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 255
    stacks = _stacks(state)
    stack = parsed.one("--stack") or (parsed.args[0] if parsed.args else "")
    command = parsed.words
    if command == ("version",):
        print(f"v{VERSION}")
        return 0
    if command == ("stack", "select"):
        if stack not in stacks:
            print(f"error: no stack named '{stack}' found", file=sys.stderr)
            return 255
        return 0
    if command == ("stack", "init"):
        stacks[stack] = {"secretsProvider": parsed.one("--secrets-provider")}
        _save(state, stacks)
        return 0
    if command == ("stack", "output"):
        print(json.dumps(stacks.get(stack, {}).get("outputs") or {}))
        return 0
    if command == ("stack", "history"):
        changes = stacks.get(stack, {}).get("changes") or {}
        history = [
            {
                "version": 1,
                "kind": "update",
                "startTime": "2026-12-06T12:00:00.000Z",
                "message": "",
                "environment": {},
                "config": {},
                "result": "succeeded",
                "endTime": "2026-12-06T12:00:01.000Z",
                "resourceChanges": changes,
            }
        ]
        print(json.dumps(history))
        return 0
    if command in (("preview",), ("up",)):
        if stack not in stacks:
            print(f"error: no stack named '{stack}' found", file=sys.stderr)
            return 255
        return _update(parsed, stack, stacks, state, apply=command == ("up",))
    print(f"error: the stand-in does not answer pulumi {' '.join(command)}", file=sys.stderr)
    return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
