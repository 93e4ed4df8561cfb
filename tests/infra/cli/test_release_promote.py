"""``aiplat release promote / rollback`` end to end: the stack files of a copy of the project's stacks folder
(a git repository), real signed releases published into the regions' replica buckets on moto, the rollout
driven through the Automation API against the stand-in ``pulumi`` (tests/support/stand_in_pulumi.py, which
records every command line), and the offline plans of ``--dry-run``."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
import yaml
from transformers import LlamaConfig, LlamaForCausalLM

from infra.cli.main import main
from infra.io.stackfiles import default_stacks_dir, list_stacks, load_stack_config
from infra.ops import rollout_state
from infra.ops.promote import served_releases, serving_stacks
from tests.infra.ops.test_rollout_stand_in import Drained, PassingGate, steps
from tests.support.hf_folders import save_folder
from tests.support.release_keys import release_keys
from tests.support.stand_in_pulumi import install, read_log
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow

MODEL = "gpt2-small"
INFER = [s for s in list_stacks() if s.startswith("prod-") and s.endswith("-infer")]
TRAIN = "prod-us-train"
REPLICAS = {load_stack_config(s).region: f"replica-{s}" for s in INFER}
V1, V2 = (datetime(2026, 12, d, tzinfo=UTC) for d in (2, 3))


class World:
    """A stacks folder under git, the stand-in CLI's state and log, and the releases in the buckets."""

    def __init__(self, root: Path) -> None:
        self.root, self.stacks, self.log = root, root / "stacks", root / "log"
        self.state = root / "state"
        self.seen = 0
        self.versions: dict[datetime, str] = {}

    def git(self, *argv: str) -> str:
        cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv]
        return subprocess.run(cmd, cwd=self.root, check=True, capture_output=True, text=True).stdout

    def files(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted(self.stacks.glob("Pulumi.*.yaml"))}

    def run(self, *argv: str) -> tuple[int, list[list[str]]]:
        code = main(["release", *argv, "--stacks-dir", str(self.stacks)])
        lines = read_log(self.log)
        new, self.seen = lines[self.seen :], len(lines)
        return code, new


@pytest.fixture
def world(tmp_path: Path, moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    w = World(tmp_path)
    shutil.copytree(default_stacks_dir(), w.stacks)
    w.git("init", "-q")
    w.git("add", ".")
    w.git("commit", "-qm", "stacks")
    for key, value in install(tmp_path / "bin", w.log, w.state).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(rollout_state, "state_file", lambda env, root=None: tmp_path / "rollout.json")
    monkeypatch.setattr("infra.ops.health.AwsHealthGate", lambda *a, **k: PassingGate())
    monkeypatch.setattr("infra.ops.drain.Route53Drainer", Drained)
    # two versions of a small Llama release, published (signed) into each inference region's replica
    s3 = moto_s3.client()
    torch.manual_seed(0)
    small = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=300, max_position_embeddings=2048)  # fmt: skip
    folder = save_folder(LlamaForCausalLM(small), tmp_path / "model")
    with release_keys(tmp_path / "keys") as (_, public):
        for bucket in REPLICAS.values():
            s3.create_bucket(Bucket=bucket)
            for now in (V1, V2):
                w.versions[now] = publish(str(folder), f"s3://{bucket}", MODEL, now=now).version
        # every prod stack deployed; the train stack's outputs name the replicas and the release key
        deployed = {"region": "x", "clusterName": "c", "vpcId": "v", "nodeGroups": []}
        train = {
            **deployed,
            "artifactReplicas": {r: {"bucket": b} for r, b in REPLICAS.items()},
            "releaseSigningPublicKey": public.read_text(),
        }
        (w.state / "stacks.json").write_text(
            json.dumps({s: {"outputs": train if s == TRAIN else deployed} for s in [TRAIN, *INFER]})
        )
        yield w


def test_promote_changes_one_line_per_infer_stack_and_rolls_out_only_those(world: World) -> None:
    before = world.files()
    v2 = world.versions[V2]
    code, lines = world.run("promote", MODEL, v2, "--env", "prod")
    assert code == 0
    after = world.files()
    changed = sorted(name for name in after if after[name] != before[name])
    assert changed == sorted(f"Pulumi.{s}.yaml" for s in INFER)
    for name in changed:  # only that line: the diff has one line out, one in
        diff = world.git("diff", "-U0", "--", f"stacks/{name}").splitlines()
        body = [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]
        assert len(body) == 2 and body[1].rstrip().endswith(v2), body
    for t in serving_stacks(MODEL, "prod", world.stacks):
        assert t.current == v2
    # the rollout: preview and up of the infer stacks, in their waves; the train stack never
    ran = steps(lines)
    assert [s for s, _, _ in ran] == [s for s in INFER for _ in ("preview", "up")]
    assert all(TRAIN not in " ".join(line) for line in lines if "preview" in line or "up" in line)


def test_a_version_the_regions_do_not_hold_changes_nothing(world: World, capsys) -> None:
    before = world.files()
    code, lines = world.run("promote", MODEL, "20261201T000000Z-step7", "--env", "prod")
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1
    missing = f"inference.models.{MODEL}.release.version 20261201T000000Z-step7 is not under s3://"
    assert missing + REPLICAS["ap-east-1"] in err
    assert "no stack file was changed" in err
    assert world.files() == before and steps(lines) == []
    code, _ = world.run("promote", "phi-3", "20261201T000000Z-step7")
    assert code == 2
    assert "'phi-3' is served by no infer stack of prod" in " ".join(capsys.readouterr().err.split())


def test_rollback_returns_to_the_version_served_before(world: World) -> None:
    v1, v2 = world.versions[V1], world.versions[V2]
    assert world.run("promote", MODEL, v1)[0] == 0
    world.git("commit", "-qam", f"promote {v1}")
    assert world.run("promote", MODEL, v2)[0] == 0
    world.git("commit", "-qam", f"promote {v2}")
    code, lines = world.run("rollback", MODEL)
    assert code == 0
    assert {t.current for t in serving_stacks(MODEL, "prod", world.stacks)} == {v1}
    assert [s for s, _, _ in steps(lines)] == [s for s in INFER for _ in ("preview", "up")]
    # already there: nothing to change, nothing rolled out
    code, lines = world.run("rollback", MODEL, v1)
    assert (code, steps(lines)) == (0, [])


# -- the dry run: offline plans of the affected stacks before and after -------------------------------


def dry_run(model: str, env: str, capsys, *extra: str) -> dict[str, list[dict]]:
    argv = [
        "release",
        "promote",
        model,
        "20261202T000000Z-step9",
        "--env",
        env,
        "--dry-run",
        "--json",
        *extra,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])["changes"]


def test_a_dry_run_changes_only_the_model_server_and_no_file(capsys) -> None:
    before = {s: (default_stacks_dir() / f"Pulumi.{s}.yaml").read_text() for s in list_stacks()}
    changes = dry_run(MODEL, "prod", capsys)
    assert sorted(changes) == INFER  # the train stack is not even planned
    for stack, cs in changes.items():
        assert cs, stack
        # Kubernetes objects only: no AWS resource (buckets, roles, load balancer) moves for a new version
        assert {c["type"].split(":")[0] for c in cs} == {"kubernetes"}, cs
        assert {c["op"] for c in cs} == {"update"}, cs
    assert before == {s: (default_stacks_dir() / f"Pulumi.{s}.yaml").read_text() for s in list_stacks()}


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize("model", ["gpt2-small", "llama-3.1-8b", "support-bot"])
def test_a_dry_run_of_one_of_several_models_changes_only_its_objects(capsys, model: str) -> None:
    """The example infer stack serving two base models and an adapter: promoting one changes that model's
    Deployment only (an adapter's: its base's fetch container of it), no other model's objects."""
    doc = yaml.safe_load((EXAMPLES / "Pulumi.models-infer.yaml").read_text())["config"]["aiplat:platform"]
    served = {s.served: s for s in served_releases(doc)}
    assert len({s.adapter_of or s.served for s in served.values()}) > 1 and model in served
    changes = dry_run(model, doc["environment"], capsys, "--stacks-dir", str(EXAMPLES))
    assert sorted(changes) == ["models-infer"]
    owner = served[model].adapter_of or model
    (change,) = changes["models-infer"]
    assert change["op"] == "update" and change["type"] == "kubernetes:apps/v1:Deployment"
    assert change["name"] == f"inference-{owner}-deployment"
    if served[model].adapter_of:  # only the adapter's fetch container's command
        assert all(f.startswith("spec.template.spec.initContainers[fetch-adapter-") for f in change["fields"])
