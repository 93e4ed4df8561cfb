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
    code = main(["train", "render", "-s", STACK, "-f", str(EXAMPLE), "--nodes", "4", "--team", "production"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "--nodes: the job file " in err and "fix: drop --nodes and set nodes in the file" in err
    assert "fix: drop --team and set team in the file" in err


def test_a_missing_job_file(capsys, tmp_path: Path) -> None:
    code = main(["train", "render", "-s", STACK, "-f", str(tmp_path / "nope.yaml")])
    _, err = capsys.readouterr()
    assert code == 2 and "-f: " in err and "nope.yaml: no such file" in err
