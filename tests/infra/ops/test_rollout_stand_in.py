"""``aiplat rollout --env prod`` end to end through the Automation API, against a stand-in ``pulumi`` on PATH
(tests/support/stand_in_pulumi.py) that records every command line: each preview and up carries its stack's
pack config, the waves go in order, and a stack's first deploy goes copy area, image copy, then the AWS
side (private endpoints), the cluster services in a resumed run."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli.main import main, parser
from infra.core.config import Environment, KubernetesAccess
from infra.io.policypack import stack_pack_config_file
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.ops import first_deploy, rollout_state
from infra.ops.rollout import DrainStep, GateCheck
from infra.schema.platform import PlatformConfig
from infra.stack.rollout import plan_waves
from tests.support.pulumi_cli import ParsedCommand, parse
from tests.support.stand_in_pulumi import install, read_log

pytestmark = pytest.mark.slow

CONFIGS = {s: load_stack_config(s) for s in list_stacks()}
WAVES = plan_waves(load_rollout_config(), Environment.prod, CONFIGS)
PROD = [s for w in WAVES for s in w]


class PassingGate:
    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        return [GateCheck("outputs", True, f"{len(outputs)} outputs")]


class Drained:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def drain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        return DrainStep("drain", True, "weight 0")

    def undrain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        return DrainStep("undrain", True, "weight 100")


class World:
    """The stand-in CLI's log and state, and the rollout's state file, shared by one module's runs."""

    def __init__(self, root: Path) -> None:
        self.log, self.state = root / "log", root / "rollout" / "prod.json"
        self.seen = 0

    def run(self, *argv: str) -> tuple[int, list[list[str]]]:
        """``aiplat rollout`` with ``argv``; the exit code and the command lines it ran."""
        code = main(["rollout", *argv])
        lines = read_log(self.log)
        new, self.seen = lines[self.seen :], len(lines)
        return code, new


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("stand-in")
    w = World(root)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in install(root / "bin", w.log, root / "state").items():
            mp.setenv(key, value)
        mp.setattr(first_deploy, "AIPLAT", (str(root / "bin" / "aiplat"),))
        mp.setattr(rollout_state, "state_file", lambda env, root=None: w.state)
        mp.setattr("infra.ops.health.AwsHealthGate", lambda *a, **k: PassingGate())
        mp.setattr("infra.ops.drain.Route53Drainer", Drained)
        yield w


def updates(lines: list[list[str]]) -> list[ParsedCommand]:
    """The previews and ups among the command lines, parsed."""
    parsed = [parse(line) for line in lines if line[0] != "aiplat"]
    return [p for p in parsed if p.words in (("preview",), ("up",))]


def steps(lines: list[list[str]]) -> list[tuple[str, str, str]]:
    """(stack, operation, pass) in order: pass is 'target', 'config-file' or 'whole'; the image copy is
    ('<stack>', 'images copy', '')."""
    out = []
    for line in lines:
        if line[0] == "aiplat":
            args = parser().parse_args(line[1:])  # the real command line of `aiplat images copy`
            out.append((args.stack[0] if isinstance(args.stack, list) else args.stack, "images copy", ""))
            continue
        p = parse(line)
        if p.words not in (("preview",), ("up",)):
            continue
        kind = "target" if p.flags.get("--target") else "config-file" if p.one("--config-file") else "whole"
        out.append((p.one("--stack") or "", p.words[0], kind))
    return out


def assert_pack_config_everywhere(lines: list[list[str]]) -> None:
    checked = updates(lines)
    assert checked, "no preview or up ran"
    for p in checked:
        stack = p.one("--stack")
        assert p.flags.get("--policy-pack-config") == [str(stack_pack_config_file(stack).resolve())], (
            f"pulumi {p.words[0]} -s {stack} without its pack config: {p.flags}"
        )
        assert len(p.flags["--policy-pack"]) == len(p.flags["--policy-pack-config"])


def test_first_rollout_of_prod(world: World) -> None:
    code, lines = world.run("--env", "prod")
    assert code == 0
    assert_pack_config_everywhere(lines)
    done = steps(lines)
    # wave order: every step of a stack before any of the next wave's
    order = [stack for stack, _, _ in done]
    assert sorted(set(order), key=order.index) == PROD
    assert [i for i, s in enumerate(order) if s == PROD[0]][-1] < order.index(PROD[1])
    for stack in PROD:
        mine = [(op, kind) for s, op, kind in done if s == stack]
        assert mine == [
            ("preview", "target"),
            ("up", "target"),
            ("images copy", ""),
            ("preview", "config-file"),
            ("up", "config-file"),
        ], stack
    # the targeted pass names the copy area's creation template and what it needs, by URN
    for p in updates(lines):
        if p.flags.get("--target"):
            targets = p.flags["--target"]
            assert any(t.endswith("-copy-template") and "RepositoryCreationTemplate" in t for t in targets)
            assert any(t.endswith("-copy-template-role-policy") for t in targets)
            assert all(t.startswith(f"urn:pulumi:{p.one('--stack')}::aiplat::") for t in targets)
        elif p.one("--config-file"):
            doc = yaml.safe_load(Path(p.one("--config-file")).read_text())
            access = doc["config"]["aiplat:platform"]["cluster_services"]["kubernetes_access"]
            assert access == KubernetesAccess.skip.value
    recorded = rollout_state.read_state(world.state)
    assert {s: e["state"] for s, e in recorded.items()} == dict.fromkeys(
        PROD, "AWS side deployed; run again from inside the VPC"
    )


def test_resumed_from_inside_the_vpc_deploys_the_rest(world: World) -> None:
    code, lines = world.run("--env", "prod", "--resume")
    assert code == 0
    assert_pack_config_everywhere(lines)
    assert steps(lines) == [(s, op, "whole") for s in PROD for op in ("preview", "up")]
    assert rollout_state.finished(world.state) == set(PROD)
    code, lines = world.run("--env", "prod", "--resume")
    assert (code, updates(lines)) == (0, [])


def test_model_only_wave_and_stack_select_stacks(world: World) -> None:
    infer = [s for s in PROD if CONFIGS[s].role.value == "infer"]
    _, lines = world.run("--env", "prod", "--model-only", "--dry-run")
    assert_pack_config_everywhere(lines)
    assert [s for s, _, _ in steps(lines)] == infer
    _, lines = world.run("--env", "prod", "--wave", "2")
    assert {s for s, _, _ in steps(lines)} == set(WAVES[1])
    _, lines = world.run("--env", "prod", "--stack", PROD[-1], "--stack", PROD[0])
    order = [s for s, _, _ in steps(lines)]
    assert sorted(set(order), key=order.index) == [PROD[0], PROD[-1]]


def test_a_wave_or_stack_not_in_the_rollout_is_refused(world: World, capsys: pytest.CaptureFixture) -> None:
    assert world.run("--env", "prod", "--wave", "9")[0] == 2
    assert world.run("--env", "prod", "--stack", "dev-us-train")[0] == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--wave: 9 is not a wave" in err and "dev-us-train" in err


def test_a_preview_without_the_pack_config_is_what_the_stand_in_refuses(world: World, tmp_path: Path) -> None:
    """The stand-in answers a preview without --policy-pack-config as the engine would with the pack's
    defaults (a mandatory violation), so the assertions above are about the CLI's real inputs."""
    from infra.ops.automation import AutomationRunner
    from tests.conftest import REPO

    runner = AutomationRunner(REPO, load_rollout_config(), stacks_dir=tmp_path)  # no pack configs there
    outcome = runner.preview(PROD[0], lambda e: None)
    assert [v.policy for v in outcome.violations if v.mandatory] == ["gpu-budget"]
    assert "--policy-pack-config" not in shlex.join(read_log(world.log)[-1])


def test_the_aws_side_passes_plan_and_pass_the_pack(world: World, tmp_path: Path) -> None:
    """What the first pass runs (the stack files with kubernetes_access: skip that the first rollout wrote)
    plans, and the pack with each stack's settings passes it: the first pass is not blocked."""
    from infra.plan.runner import run_plan
    from infra.review import review_configured_plan

    written = sorted(world.state.parent.glob("Pulumi.*.aws-side.yaml"))
    assert [p.name.split(".")[1] for p in written] == sorted(PROD)
    for path in written:
        (tmp_path / path.name.replace(".aws-side", "")).write_text(path.read_text())
    for stack in PROD:
        plan = run_plan(stack, stacks_dir=tmp_path)
        assert not plan.by_type("kubernetes:helm.sh/v3:Release"), stack  # the Kubernetes side is left out
        review = review_configured_plan(plan.as_json())
        assert review.passed, (stack, [(d.policy, d.message) for d in review.mandatory])
