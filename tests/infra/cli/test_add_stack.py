"""docs/how-to/add-stack.md walked through with the CLI: a throwaway stack (dev-us-train copied to us-east-1,
only its region changed) in a copy of ``stacks/``, planned and reviewed. Every refusal on the way names a
field or file, and the page must name each one (the issue's case: it never mentioned
``stacks/policy-pack/<stack>.json``, so the first review of a new stack failed on settings it never saw)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from infra.cli.common import EXIT_CONFIG, EXIT_OK, EXIT_POLICY
from infra.cli.main import main
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
