"""``aiplat train render`` / ``bandwidth-check``: YAML on stdout for kubectl, refusals on stderr."""

from __future__ import annotations

import yaml

from infra.cli.main import main
from infra.io.kube_validate import validate_manifest
from tests.conftest import REPO

STACKS_DIR = REPO / "stacks"


def test_render_prints_a_trainjob_that_validates(capsys) -> None:
    code = main(
        [
            "train",
            "render",
            "--stack",
            "prod-us-train",
            "--config",
            "trainer/configs/gpt2_124m.toml",
            "--nodes",
            "2",
            "--team",
            "research",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["kind"] == "TrainJob" and doc["metadata"]["name"] == "gpt2-124m"
    assert doc["spec"]["trainer"]["numNodes"] == 2 and doc["spec"]["trainer"]["numProcPerNode"] == 8
    # queued in the team's LocalQueue at its default priority; created suspended, Kueue starts it
    assert doc["metadata"]["namespace"] == "team-research"
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "research"
    assert doc["spec"]["suspend"] is True
    # the dataset of the stack's run with the same config, under the team's prefix; checkpoints too
    args = doc["spec"]["trainer"]["args"]
    assert "data.source=s3://aiplat-prod-us-east-1-datasets/research/shards/openwebtext" in args
    assert "checkpoint.uri=s3://aiplat-prod-us-east-1-checkpoints/research/checkpoints/gpt2-124m" in args
    assert validate_manifest(doc, "1.35") == []


def _render(*extra: str) -> list[str]:
    return ["train", "render", "-s", "prod-us-train", "--config", "trainer/configs/gpt2_124m.toml", *extra]


def test_render_with_a_priority_and_held(capsys) -> None:
    code = main(_render("--nodes", "1", "--team", "production", "--priority", "dev", "--suspend"))
    out, err = capsys.readouterr()
    assert code == 0, err
    labels = yaml.safe_load(out)["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/priority-class"] == "dev"
    assert "kueue.x-k8s.io/queue-name" not in labels  # held: queued once labelled


def test_render_needs_a_team_on_a_stack_with_teams(capsys) -> None:
    code = main(_render("--nodes", "1"))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert (
        "--team: the stack queues every run under a team; fix: pass one of ['production', 'research']" in err
    )


def test_render_refuses_an_unknown_team_or_priority(capsys) -> None:
    assert main(_render("--nodes", "1", "--team", "vision")) == 2
    _, err = capsys.readouterr()
    assert "--team: 'vision' is not a team; fix: use one of ['production', 'research']" in err
    assert main(_render("--nodes", "1", "--team", "research", "--priority", "urgent")) == 2
    _, err = capsys.readouterr()
    assert (
        "--priority: 'urgent' is not a priority class; fix: use one of ['dev', 'production', 'research']"
        in err
    )


def test_render_refuses_what_the_stack_would(capsys) -> None:
    code = main(
        [
            "train",
            "render",
            "-s",
            "prod-us-train",
            "--config",
            "trainer/configs/gpt2_124m.toml",
            "--nodes",
            "9",
            "--team",
            "production",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "gpt2-124m wants 9 nodes but pool 'train' has max_size 4" in err


def test_render_needs_a_config_inside_the_image(capsys, tmp_path) -> None:
    cfg = tmp_path / "x.toml"
    cfg.write_text("[data]\nsource='s3://a/b'\n")
    code = main(
        ["train", "render", "-s", "prod-us-train", "--config", str(cfg), "--nodes", "1", "--dataset", "d"]
    )
    _, err = capsys.readouterr()
    assert code == 2 and "not under trainer/" in err


def test_render_refuses_more_nodes_than_the_pool_runs(capsys) -> None:
    # prod-us-train's pool runs desired_size 2 (max_size 4): nothing scales it, so 3 pods means one Pending
    code = main(
        ["train", "render", "-s", "prod-us-train", "--config", "trainer/configs/gpt2_124m.toml"]
        + ["--nodes", "3", "--team", "production"]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "gpt2-124m wants 3 nodes but pool 'train' has desired_size 2" in err


def test_bandwidth_check_on_dev_needs_the_pool_scaled_to_two_nodes(capsys) -> None:
    code = main(["train", "bandwidth-check", "-s", "dev-us-train", "--name", "bw-1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "bandwidth-check wants 2 nodes but pool 'gpu' has desired_size 1" in err
    assert "set node_pools.gpu.desired_size to 2 and run pulumi up" in err


def test_bandwidth_check_on_dev_has_no_efa_and_a_network_threshold(capsys, tmp_path) -> None:
    # the operator's way: dev's gpu pool scaled to the check's 2 nodes in the stack file
    raw = yaml.safe_load((STACKS_DIR / "Pulumi.dev-us-train.yaml").read_text())
    raw["config"]["aiplat:platform"]["node_pools"]["gpu"]["desired_size"] = 2
    (tmp_path / "Pulumi.dev-us-train.yaml").write_text(yaml.safe_dump(raw))
    code = main(
        ["train", "bandwidth-check", "-s", "dev-us-train", "--stacks-dir", str(tmp_path), "--name", "bw-1"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["metadata"]["name"] == "bw-1"
    # queued in team ml's queue: Kueue starts it when it admits it
    assert doc["metadata"]["namespace"] == "team-ml" and doc["spec"]["suspend"] is True
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml"
    assert "--min-busbw=0.156" in doc["spec"]["trainer"]["args"]
    assert "BaselineBandwidthInGbps" in err
    assert validate_manifest(doc, "1.35") == []
