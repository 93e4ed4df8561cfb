"""docs/how-to/add-stack.md walked through with the CLI: a throwaway stack (dev-us-train copied to us-east-1,
only its region changed) in a copy of ``stacks/``, planned and reviewed; and its inference section, a copy
of prod-sg-infer in ap-northeast-1, through replication, its own name, review and the rollout waves. Every
refusal on the way names a field or file, and the page must name each one (the issue's case: it never
mentioned ``stacks/policy-pack/<stack>.json``, so the first review of a new stack failed on settings it
never saw)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from infra.cli.common import EXIT_CONFIG, EXIT_OK, EXIT_POLICY
from infra.cli.main import main
from infra.core.config import Environment
from infra.core.errors import ConfigErrors
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.plan.runner import stack_file_plan
from infra.stack.rollout import plan_waves
from tests.conftest import REPO

PAGE = (REPO / "docs" / "how-to" / "add-stack.md").read_text()
NEW = "dev-use1-train"


def _stack(stacks: Path) -> dict:
    return yaml.safe_load((stacks / f"Pulumi.{NEW}.yaml").read_text())


def _write(stacks: Path, doc: dict) -> None:
    (stacks / f"Pulumi.{NEW}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def test_the_page_names_every_step_a_new_stack_is_refused_for(tmp_path, capsys) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(REPO / "stacks", stacks)
    doc = yaml.safe_load((stacks / "Pulumi.dev-us-train.yaml").read_text())
    doc["config"]["aiplat:platform"]["region"] = "us-east-1"
    _write(stacks, doc)
    plan = ["plan", "--stack", NEW, "--stacks-dir", str(stacks), "--out", str(tmp_path / "plans")]
    refused = []
    # each refusal of the plan: the page names its field, and the fix it gives makes the next plan go on
    fixes = {
        "network.vpc_cidr": lambda c: c["network"].update(vpc_cidr="10.0.0.0/16"),
        "security.ebs_encryption_by_default": lambda c: c.setdefault("security", {}).update(
            ebs_encryption_by_default=False
        ),
    }
    for _ in range(len(fixes) + 1):
        code = main(plan)
        err = capsys.readouterr().err
        if code == EXIT_OK:
            break
        assert code == EXIT_CONFIG, err
        # the field each error names (as `aiplat:platform.<field>:` or in its fix)
        fields = [f for f in fixes if f in err]
        assert fields, err
        for field in fields:
            assert f"`{field}" in PAGE, f"add-stack.md does not name {field}: {err}"
            refused.append(field)
            doc = _stack(stacks)
            fixes[field](doc["config"]["aiplat:platform"])
            _write(stacks, doc)
    assert code == EXIT_OK and set(refused) == set(fixes), refused
    # the review without a pack config file: the defaults refuse it, and the fix names the file the page
    # describes; with the file the page's example shows, the review passes
    review = ["review", "--stack", NEW, "--stacks-dir", str(stacks)]
    assert main(review) == EXIT_POLICY
    out = capsys.readouterr().out
    assert f"stacks/policy-pack/{NEW}.json" in " ".join(out.split())
    assert "stacks/policy-pack/<stack>.json" in PAGE
    for setting in ("gpu-budget.maxGpus", "cost-cap.maxMonthlyUsd", "cost-cap.unpriced"):
        assert f"`{setting}`" in PAGE, setting
    example = json.loads(PAGE.split("```json", 1)[1].split("```", 1)[0])
    (stacks / "policy-pack" / f"{NEW}.json").write_text(json.dumps(example))
    assert main(review) == EXIT_OK, capsys.readouterr().out


INFER = "prod-jp-infer"
REGION = "ap-northeast-1"  # the user's third inference region
SECTION = PAGE.split("## An inference stack in a new region", 1)[1]


def _platform(stacks: Path, stack: str) -> tuple[dict, Callable[[], None]]:
    """The stack file's ``aiplat:platform`` section, and a function writing the file back."""
    path = stacks / f"Pulumi.{stack}.yaml"
    doc = yaml.safe_load(path.read_text())
    return doc["config"]["aiplat:platform"], lambda: path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_the_page_walks_an_inference_stack_in_a_new_region(tmp_path, capsys) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(REPO / "stacks", stacks)
    shutil.copy(stacks / "Pulumi.prod-sg-infer.yaml", stacks / f"Pulumi.{INFER}.yaml")
    cfg, save = _platform(stacks, INFER)
    cfg["region"] = REGION
    save()
    source = cfg["storage"]["source_stack"]

    def replicate_here(_: dict) -> None:
        train, save_train = _platform(stacks, source)
        train["storage"]["replicate_to"].append(REGION)
        save_train()

    plan = ["plan", "--stack", INFER, "--stacks-dir", str(stacks), "--out", str(tmp_path / "plans")]
    # each refusal of the plan: the section names its field, and the fix it gives makes the next plan go on
    fixes: dict[str, Callable[[dict], None]] = {
        "network.vpc_cidr": lambda c: c["network"].update(vpc_cidr="10.0.0.0/16"),
        "storage.source_stack": replicate_here,
        "inference.https.domain": lambda c: c["inference"]["https"].update(domain="jp.inference.example.com"),
    }
    refused = []
    for _ in range(len(fixes) + 1):
        code = main(plan)
        err = capsys.readouterr().err
        if code == EXIT_OK:
            break
        assert code == EXIT_CONFIG, err
        fields = [f for f in fixes if f in err]
        assert fields, err
        for field in fields:
            assert f"`{field}`" in SECTION, f"the section does not name {field}: {err}"
            refused.append(field)
            cfg, save = _platform(stacks, INFER)
            fixes[field](cfg)
            save()
    assert code == EXIT_OK and set(refused) == set(fixes), refused
    # the global endpoint: the new region answers the same global name with its own latency record
    planned = stack_file_plan(INFER, stacks)
    assert planned.outputs["globalEndpoint"]["setIdentifier"] == REGION
    assert "`inference.global_endpoint`" in SECTION

    # the residency allow-list: the review refuses the region until the stack's pack file allows it
    pack_infer, pack_train = [json.loads(b.split("```", 1)[0]) for b in SECTION.split("```json")[1:]]
    review = ["review", "--stack", INFER, "--stacks-dir", str(stacks)]
    assert main(review) == EXIT_POLICY
    out = " ".join(capsys.readouterr().out.split())
    assert "data-residency-regions" in out and f"created in {REGION}" in out
    assert "`data-residency-regions.allowedRegions`" in SECTION
    (stacks / "policy-pack" / f"{INFER}.json").write_text(json.dumps(pack_infer))
    assert main(review) == EXIT_OK, capsys.readouterr().out
    # and the train stack's until its file allows the replication target
    review_train = ["review", "--stack", source, "--stacks-dir", str(stacks)]
    assert main(review_train) == EXIT_POLICY
    assert "data-residency-replication" in " ".join(capsys.readouterr().out.split())
    train_pack = stacks / "policy-pack" / f"{source}.json"
    train_pack.write_text(json.dumps({**json.loads(train_pack.read_text()), **pack_train}))
    assert main(review_train) == EXIT_OK, capsys.readouterr().out

    # the rollout wave: refused in no wave, then rolled out after its source stack
    rollout_yaml = yaml.safe_load((REPO / "rollout.yaml").read_text())
    path = tmp_path / "rollout.yaml"
    configs = {s: load_stack_config(s, stacks) for s in list_stacks(stacks)}
    path.write_text(yaml.safe_dump(rollout_yaml))
    with pytest.raises(ConfigErrors) as info:
        plan_waves(load_rollout_config(path), Environment.prod, configs)
    assert f"'{INFER}' is in no wave" in str(info.value) and "'prod-jp-infer' is in no wave" in SECTION
    rollout_yaml["environments"]["prod"]["waves"].append([INFER])
    path.write_text(yaml.safe_dump(rollout_yaml))
    waves = plan_waves(load_rollout_config(path), Environment.prod, configs)
    order = {s: i for i, wave in enumerate(waves) for s in wave}
    assert order[INFER] > order[source] and waves[order[INFER]] == [INFER]
