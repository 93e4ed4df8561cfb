"""``aiplat train render -f``: the example job file renders, on prod-us-train, a TrainJob in the team's
namespace and queue with the team's image by digest, which validates (Trainer CRD model, Kubernetes schema)
and which the plan's own admission policies let through, TrainJob and pod alike; another team's image, or
the team's by tag, is refused by render and by the admission policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli.main import main
from infra.io.kube_validate import validate_manifest
from infra.plan.runner import Plan
from tests.conftest import REPO
from tests.support.trainjobs import admission_refusals, effective_pod, plan_runtime

STACK = "prod-us-train"
EXAMPLE = REPO / "examples/byo-llama/job.yaml"
POD_POLICIES = ("aiplat-workload-images", "aiplat-publisher-identity", "aiplat-team-pods")


@pytest.fixture(scope="module")
def plan(plan_stack) -> Plan:
    return plan_stack(STACK)


def render(capsys, path: Path) -> tuple[int, Any, str]:
    code = main(["train", "render", "-s", STACK, "-f", str(path)])
    out, err = capsys.readouterr()
    return code, (yaml.safe_load(out) if out else None), err


def test_the_example_renders_a_trainjob_the_cluster_would_admit(capsys, plan: Plan) -> None:
    code, doc, err = render(capsys, EXAMPLE)
    assert code == 0, err
    spec = yaml.safe_load(EXAMPLE.read_text())
    team = plan.outputs["queueing"]["teams"][spec["team"]]
    assert doc["kind"] == "TrainJob" and doc["metadata"]["namespace"] == team["namespace"] == "team-research"
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == team["localQueue"]
    # the team's image, by digest, from the repository the plan declares for the team
    image = doc["spec"]["trainer"]["image"]
    repo, _, digest = image.partition("@")
    assert digest.startswith("sha256:") and image == spec["image"]
    assert repo.split("/", 1)[1] in {r.inputs["name"] for r in plan.by_type("aws:ecr/repository:Repository")}
    assert repo.split("/", 1)[1].startswith("aiplat-prod/teams/research/")
    # valid for the Trainer CRD model and the Kubernetes schema, and so is the pod it starts
    assert validate_manifest(doc, "1.35") == []
    pod = effective_pod(plan_runtime(plan), doc)
    assert validate_manifest(pod, "1.35") == []
    # the stack's admission policies let both through in the team's namespace
    assert admission_refusals(plan, doc, "team-research", "aiplat-trainjobs") == []
    assert admission_refusals(plan, pod, "team-research", *POD_POLICIES) == []
    # the pod runs the team's image under the team's service account, with the runtime's EFA devices
    [node] = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    assert node["image"] == image and pod["spec"]["serviceAccountName"] == team["serviceAccount"]
    assert int(node["resources"]["limits"]["vpc.amazonaws.com/efa"]) > 0
    env = {e["name"]: e for e in node["env"]}
    assert env["AIPLAT_IMAGE_DIGEST"]["value"] == digest  # the run's image, replacing the runtime's
    assert env["AIPLAT_PREEMPTION_WINDOW_S"]["value"] == str(pod["spec"]["terminationGracePeriodSeconds"])


def _variant(tmp_path: Path, **changes: Any) -> Path:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw.update(changes)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_another_teams_image_is_refused_by_render_and_by_the_admission_policy(
    capsys, plan: Plan, tmp_path: Path
) -> None:
    theirs = EXAMPLE.read_text().split("image: ", 1)[1].split()[0].replace("/research/", "/production/")
    code, doc, err = render(capsys, _variant(tmp_path, image=theirs))
    assert code == 2 and doc is None
    assert "job.yaml: image: aiplat-prod/teams/production/byo-llama is team 'production''s repository" in err
    # the same TrainJob, had it been sent anyway (kubectl): the admission policy refuses it and its pods
    code, ok, _ = render(capsys, EXAMPLE)
    assert code == 0
    ok["spec"]["trainer"]["image"] = theirs
    [refused] = admission_refusals(plan, ok, "team-research", "aiplat-trainjobs")
    assert refused.startswith("aiplat-trainjobs: spec.trainer.image: an image of a team's repositories")
    pod = effective_pod(plan_runtime(plan), ok)
    [refused] = admission_refusals(plan, pod, "team-research", *POD_POLICIES)
    assert "runs only in that team's namespace" in refused


def test_an_image_by_tag_is_refused_by_render_and_by_the_admission_policy(
    capsys, plan: Plan, tmp_path: Path
) -> None:
    tagged = EXAMPLE.read_text().split("image: ", 1)[1].split()[0].split("@")[0] + ":v1"
    code, doc, err = render(capsys, _variant(tmp_path, image=tagged))
    assert code == 2 and doc is None
    assert f"job.yaml: image: '{tagged}' is not an image by digest" in err
    code, ok, _ = render(capsys, EXAMPLE)
    ok["spec"]["trainer"]["image"] = tagged
    assert admission_refusals(plan, ok, "team-research", "aiplat-trainjobs") == [
        "aiplat-trainjobs: spec.trainer.image comes from the stack's ECR repositories by digest"
    ]
    pod = effective_pod(plan_runtime(plan), ok)
    [refused] = admission_refusals(plan, pod, "team-research", *POD_POLICIES)
    assert "by digest (@sha256:...)" in refused


def test_run_flags_beside_a_job_file_are_refused(capsys) -> None:
    code = main(
        ["train", "render", "-s", STACK, "-f", str(EXAMPLE), "--dataset", "x", "--team", "production"]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert "--dataset: the job file " in err and "fix: drop --dataset and set data in the file" in err
    assert "fix: drop --team and set team in the file or with --set team=..." in err


def test_a_sweep_overrides_the_job_files_fields(capsys) -> None:
    code = main(
        ["train", "render", "-s", STACK, "-f", str(EXAMPLE), "--name", "sweep-lr-1", "--nodes", "1"]
        + [
            "--set",
            "env.LR=0.10",
            "--set",
            "timeouts.max_run_s=3600",
            "--set",
            "command=[/app/train.py, --lr]",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["metadata"]["name"] == "sweep-lr-1" and doc["spec"]["trainer"]["numNodes"] == 1
    env = {e["name"]: e["value"] for e in doc["spec"]["trainer"]["env"]}
    assert env["LR"] == "0.10" and env["HF_HUB_OFFLINE"] == "1"  # env values stay strings; the file's stay
    assert env["AIPLAT_CHECKPOINT_URI"].endswith("/research/checkpoints/sweep-lr-1/")
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "3600"
    assert doc["spec"]["trainer"]["args"][-2:] == ["/app/train.py", "--lr"]
    assert "warning" not in err  # the stack's own warnings are its operators' (--verbose shows them)
    # a bad override names itself beside the file
    code = main(["train", "render", "-s", STACK, "-f", str(EXAMPLE), "--set", "nodes=many"])
    _, err = capsys.readouterr()
    assert code == 2 and "byo-llama/job.yaml with nodes=many: nodes: " in err


def test_render_submit_and_the_sdk_refuse_a_job_above_the_quota_alike(capsys, tmp_path: Path) -> None:
    """One validation, three entry points: research can get 16 GPUs on 'train' (8 nominal, 8 borrowed), so
    3 nodes x 8 GPUs is refused by render -f, by submit -f (before any AWS call) and by the SDK helper, each
    naming the job's field and where it came from."""
    from infra.cli.train_build import team_job
    from infra.core.errors import ConfigErrors

    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["nodes"] = 3
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(spec))
    said = []
    for command in ("render", "submit"):
        code = main(["train", command, "-s", STACK, "-f", str(path)])
        _, err = capsys.readouterr()
        assert code == 2, err
        [quota] = [line for line in err.splitlines() if "can get at most" in line]
        source, _, problem = quota.partition("big.yaml: ")
        assert source.startswith(f"error: {STACK}: ") and problem.startswith("nodes: 3 nodes x 8 GPUs = 24")
        said.append(problem)
    timeouts = {k: v for k, v in spec["timeouts"].items() if k != "preemption_window_s"}
    sdk = {**spec, "timeouts": timeouts}
    with pytest.raises(ConfigErrors) as exc:
        team_job(STACK, **{k: v for k, v in sdk.items()})
    [quota] = [e.one_line() for e in exc.value.errors if "can get at most" in e.problem]
    assert quota.startswith("team_job('byo-llama-ft'): ")
    said.append(quota.partition(": ")[2])
    assert said[0] == said[1] == said[2]
    assert (
        "fix: use nodes 2 or fewer, or ask your platform team to raise teams.research.quotas.train" in said[0]
    )


def test_a_missing_job_file(capsys, tmp_path: Path) -> None:
    code = main(["train", "render", "-s", STACK, "-f", str(tmp_path / "nope.yaml")])
    _, err = capsys.readouterr()
    assert code == 2 and "-f: " in err and "nope.yaml: no such file" in err
