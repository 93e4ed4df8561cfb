"""``aiplat plan`` across the stacks of a folder: a stack that would create a physical name another stack
creates is refused (exit 2, naming both stacks and the field), warnings shared by several stacks are printed
once, and the output is a short summary per stack unless ``--tree`` asks for the tree."""

from __future__ import annotations

import re

import pytest

from infra.cli.common import EXIT_CONFIG, EXIT_OK
from infra.cli.main import main
from infra.core.project import CONFIG_KEY
from infra.io.stackfiles import list_stacks


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consoles wide enough that each line stays one line."""
    from rich.console import Console

    monkeypatch.setattr(
        "infra.cli.main.consoles", lambda: (Console(width=400), Console(stderr=True, width=2000))
    )


def test_a_second_stack_with_the_same_names_is_refused(stack_doc, write_stack, tmp_path, capsys) -> None:
    # the new user's case: a copy of a stack, same region and environment, under another stack name
    write_stack("dev-us-train", stack_doc("dev-us-train"))
    copy = stack_doc("dev-us-train")
    # the copy's own VPC range (an overlapping one is refused before the plan, tests/infra/stack)
    copy["config"][CONFIG_KEY].setdefault("network", {})["vpc_cidr"] = "10.99.0.0/16"
    folder = write_stack("dev-us-copy", copy)
    out = tmp_path / "out"
    out.mkdir()
    (out / "dev-us-copy.json").write_text("{}")  # a stale plan must not survive the refusal
    code = main(["plan", "--stack", "dev-us-copy", "--stacks-dir", str(folder), "--out", str(out)])
    assert code == EXIT_CONFIG
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert all(
        line.startswith("error: dev-us-copy: ") and "Pulumi.dev-us-copy.yaml: " in line for line in lines
    )
    cluster = next(line for line in lines if "aws:eks/cluster:Cluster name: " in line)
    assert (
        "aws:eks/cluster:Cluster name: a name (unique per account in us-west-2) also declared by stack "
        "dev-us-train: 'aiplat-dev-train' (resource cluster-eks); the second pulumi up would fail with "
        "'already exists'; fix: give one of the two stacks another name_prefix, environment or role"
    ) in cluster
    buckets = next(line for line in lines if "aws:s3/bucket:Bucket bucket: " in line)
    assert re.search(
        r"\d+ names \(unique across every AWS account\) also declared by stack dev-us-train", buckets
    )
    assert "or set storage.bucket_names for its buckets" in buckets
    roles = next(line for line in lines if "aws:iam/role:Role name: " in line)
    assert "(unique in the account) also declared by stack dev-us-train" in roles
    # one line per resource field, however many names clash
    fields = [line.split(".yaml: ", 1)[1].split(": ", 1)[0] for line in lines]
    assert len(fields) == len(set(fields)), fields
    assert not (out / "dev-us-copy.json").exists()

    # --all refuses both, each naming the other
    assert main(["plan", "--all", "--stacks-dir", str(folder), "--out", str(out)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "error: dev-us-train: " in err and "also declared by stack dev-us-copy: " in err
    assert "error: dev-us-copy: " in err and "also declared by stack dev-us-train: " in err

    # the fixes the messages give: another name_prefix, and one owner of the region's EBS default
    doc = stack_doc("dev-us-train")
    doc["config"][CONFIG_KEY]["name_prefix"] = "aiplat2"
    doc["config"][CONFIG_KEY].setdefault("network", {})["vpc_cidr"] = "10.99.0.0/16"
    doc["config"][CONFIG_KEY].setdefault("security", {})["ebs_encryption_by_default"] = False
    write_stack("dev-us-copy", doc)
    assert main(["plan", "--stack", "dev-us-copy", "--stacks-dir", str(folder), "--out", str(out)]) == EXIT_OK
    assert (out / "dev-us-copy.json").exists()


def test_shared_warnings_print_once_and_each_stack_gets_a_summary(tmp_path, capsys) -> None:
    # what `make plan` runs
    assert main(["plan", "--all", "--out", str(tmp_path)]) == EXIT_OK
    stacks = list_stacks()
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert warnings and len(warnings) == len(set(warnings))
    # an add-on build every stack uses: one line naming them all, not one per stack
    addon = [w for w in warnings if "cluster.addons.vpc_cni" in w]
    assert len(addon) == 1 and addon[0].startswith(f"warning: {', '.join(stacks)}: "), addon
    out = captured.out.splitlines()
    assert len(out) == 2 * len(stacks), captured.out
    assert out[0].startswith("dev-us-train (us-west-2, train): ") and "resources" in out[0]
    assert out[1].strip().startswith(f"wrote {tmp_path / 'dev-us-train.json'}")
    assert out[2].startswith("prod-hk-infer (ap-east-1, infer): ")

    # the tree on request
    assert main(["plan", "--stack", "dev-us-train", "--out", str(tmp_path), "--tree"]) == EXIT_OK
    tree = capsys.readouterr().out
    assert "+ pulumi:pulumi:Stack aiplat-dev-us-train" in tree and "aws:eks/cluster:Cluster" in tree
