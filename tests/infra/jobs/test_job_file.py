"""Job files (``aiplat train render/submit -f``): the schema's one-line refusals naming the file and the
field, the checks against the stack (the team's repositories, the runtime's pool and nodes, the launcher),
and the TrainJob built from a job (its command under torchrun, the env contract, the time limits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli.train_build import runtime_grace_s
from infra.core.errors import ConfigErrors
from infra.io.job_files import load_job_file
from infra.io.snapshot import instance_facts
from infra.io.stackfiles import load_stack_config
from infra.jobs import documents as jobs
from infra.jobs.config import JobSpec
from infra.jobs.rules import image_problems, job_problems
from infra.schema.parse import parse_model
from infra.storage.config.storage import BucketPurpose
from infra.training.documents import runtime as t

CFG = load_stack_config("prod-us-train")
FACTS = instance_facts(CFG.node_pools["train"].instance_type, CFG.region)
GRACE = runtime_grace_s(CFG)  # the runtime's pods' (the trainer config's shutdown window plus the margin)
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
DIGEST = "sha256:" + "5e" * 32
OWN = f"{REGISTRY}/aiplat-prod/teams/research/byo-llama@{DIGEST}"
BASE: dict[str, Any] = {
    "name": "ft-1",
    "team": "research",
    "image": OWN,
    "command": ["/app/train.py", "--steps", "10"],
    "nodes": 2,
}


def job(**changes: Any) -> JobSpec:
    return parse_model({**BASE, **changes}, JobSpec, "")


def refusal(tmp_path: Path, **changes: Any) -> str:
    path = tmp_path / "job.yaml"
    raw = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigErrors) as exc:
        load_job_file(path)
    return str(exc.value)


# -- the schema -------------------------------------------------------------------------------------------


def test_a_misspelt_key_is_refused_with_a_hint(tmp_path: Path) -> None:
    msg = refusal(tmp_path, nodez=2, nodes=None)
    assert f"{tmp_path / 'job.yaml'}: nodez: unknown key; fix: did you mean 'nodes'?" in msg
    assert "required key is missing" not in msg  # the misspelling explains the missing 'nodes'


def test_an_image_by_tag_is_refused(tmp_path: Path) -> None:
    msg = refusal(tmp_path, image=f"{REGISTRY}/aiplat-prod/teams/research/byo-llama:v3")
    assert f"image: '{REGISTRY}/aiplat-prod/teams/research/byo-llama:v3' is not an image by digest" in msg
    assert "fix: push the image to one of your team's repositories and use " in msg


def test_a_quoted_number_and_a_reserved_variable_are_refused(tmp_path: Path) -> None:
    msg = refusal(tmp_path, nodes="2", env={"AIPLAT_DATA_URI": "s3://elsewhere/", "WORLD_SIZE": "1"})
    assert "nodes: '2' is a string, but an integer is expected; fix: write it without quotes (nodes: 2)" in (
        msg
    )
    assert "env: 'AIPLAT_DATA_URI' is set by the platform, torchrun or the Trainer on every pod" in msg


def test_data_stays_inside_the_teams_prefix(tmp_path: Path) -> None:
    for bad in ("s3://other-bucket/x", "/abs", "a/../../production"):
        assert "data: " in refusal(tmp_path, data=bad) and "must be a prefix inside the team's" in refusal(
            tmp_path, data=bad
        )


def test_the_example_job_file_loads() -> None:
    loaded = load_job_file(Path(__file__).resolve().parents[3] / "examples/byo-llama/job.yaml")
    assert loaded.source == "examples/byo-llama/job.yaml"
    assert loaded.spec.team == "research" and loaded.spec.nodes == 2


# -- against the stack ------------------------------------------------------------------------------------


def fields(spec: JobSpec) -> dict[str, str]:
    return {f.field: f.one_line() for f in job_problems(CFG, spec, gpus_per_node=8)}


def test_a_job_that_fits_the_stack_passes() -> None:
    assert fields(job()) == {}
    assert image_problems(CFG, "research", OWN, "123456789012") == []
    assert image_problems(CFG, "research", "trainer", None) == []
    # the platform's own repositories by digest are the platform's images, allowed too
    assert image_problems(CFG, "research", f"{REGISTRY}/aiplat-prod/trainer@{DIGEST}", None) == []


@pytest.mark.parametrize(
    ("image", "account", "says"),
    [
        (
            f"{REGISTRY}/aiplat-prod/teams/production/byo-llama@{DIGEST}",
            None,
            "image: aiplat-prod/teams/production/byo-llama is team 'production''s repository; a team's jobs "
            "run only its own images and the platform's (the admission policy aiplat-workload-images refuses "
            "it as well); fix: push the image to aiplat-prod/teams/research/<repository> "
            "(teams.research.registry.repositories: ['byo-llama'])",
        ),
        (
            f"{REGISTRY}/aiplat-prod/teams/research/other@{DIGEST}",
            None,
            "image: aiplat-prod/teams/research/other is not one of team 'research''s repositories "
            "(['byo-llama']); fix: add 'other' to teams.research.registry.repositories and run pulumi up",
        ),
        (
            f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/aiplat-prod/teams/research/byo-llama@{DIGEST}",
            None,
            "but the stack's registry is in us-east-1",
        ),
        (
            OWN,
            "210987654321",
            "is in account 123456789012, but the stack's registry is account 210987654321's",
        ),
        (f"docker.io/library/python@{DIGEST}", None, "is not in an ECR registry"),
        (f"{REGISTRY}/aiplat-dev/teams/research/byo-llama@{DIGEST}", None, "nor the platform's"),
    ],
)
def test_images_outside_the_teams_repositories_are_refused(
    image: str, account: str | None, says: str
) -> None:
    problems = [p.one_line() for p in image_problems(CFG, "research", image, account)]
    assert any(says in p for p in problems), problems


def test_the_job_must_fit_the_runtime() -> None:
    found = fields(job(pool="system", gpus_per_node=4, nodes=3, name="x" * 50))
    assert found["pool"].startswith("pool: 'system': the stack's training runtime runs on pool 'train' only")
    assert (
        "gpus_per_node: 4: the runtime gives each pod a whole node of pool 'train', 8 GPUs"
        in found["gpus_per_node"]
    )
    # prod-us-train's pool runs 2 nodes (desired_size) and nothing scales it: the job's author cannot change
    # that, so the fix is theirs to take or to ask for, not an admin's command
    assert "wants 3 nodes but pool 'train' keeps 2 (nothing scales it)" in found["nodes"]
    assert "fix: use at most 2 nodes, or ask your platform team to scale pool 'train' to 3" in found["nodes"]
    assert "update-nodegroup-config" not in found["nodes"]
    assert "JobSet refuses more than 63" in found["name"]
    assert "fix: drop gpus_per_node, or set it to 8" in found["gpus_per_node"]


def test_the_launcher_and_the_command_must_agree() -> None:
    found = fields(job(command=["python", "/app/train.py"]))
    assert (
        "command: starts with 'python', but launcher torchrun runs the script under torchrun"
        in found["command"]
    )
    found = fields(job(launcher="none", max_restarts=2, command=["/app/run.sh"]))
    assert "max_restarts: is torchrun's --max-restarts, but launcher is none" in found["max_restarts"]


def test_an_unknown_team_or_priority() -> None:
    assert (
        "team: 'vision' is not a team of the stack (its teams: ['production', 'research'])"
        in fields(job(team="vision"))["team"]
    )
    # a misspelt team is the team's error alone: no advice to push images to a repository it cannot have
    assert image_problems(CFG, "reserch", OWN, "123456789012") == []
    assert "priority: 'urgent' is not a priority class" in fields(job(priority="urgent"))["priority"]


# -- the TrainJob -----------------------------------------------------------------------------------------


def env_of(doc: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in doc["spec"]["trainer"]["env"]}


def test_the_trainjob_runs_the_command_under_torchrun_with_the_contract() -> None:
    assert FACTS is not None
    spec = job(data="corpus/v1", env={"NCCL_DEBUG": "INFO"}, max_restarts=0)
    doc = jobs.job_trainjob(CFG, spec, FACTS, runtime_grace_s=GRACE)
    trainer = doc["spec"]["trainer"]
    assert doc["metadata"]["namespace"] == "team-research"
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert doc["spec"]["suspend"] is True and doc["spec"]["runtimeRef"]["name"] == "aiplat-torch"
    assert trainer["image"] == OWN and trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 8
    assert trainer["command"] == ["torchrun"]
    assert trainer["args"] == [*t.rendezvous_args(worker_restarts=0), "/app/train.py", "--steps", "10"]
    datasets = CFG.bucket_name(BucketPurpose.datasets)
    ckpt = CFG.bucket_name(BucketPurpose.checkpoints)
    assert env_of(doc) == {
        "AIPLAT_TEAM": "research",
        "AIPLAT_DATA_URI": f"s3://{datasets}/research/corpus/v1/",
        "AIPLAT_CHECKPOINT_URI": f"s3://{ckpt}/research/checkpoints/ft-1/",
        "AIPLAT_OUTPUT_URI": f"s3://{ckpt}/research/outputs/ft-1/",
        "AIPLAT_IMAGE_DIGEST": DIGEST,  # the run record's image: the team's, not the runtime's
        # torchrun gives the ranks the runtime's grace period (less its own exit) after SIGTERM, not 30 s
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(GRACE - jobs.TORCHRUN_EXIT_MARGIN_S),
        "NCCL_DEBUG": "INFO",
    }
    # the runtime's grace period and AIPLAT_PREEMPTION_WINDOW_S hold: no patch of either
    assert "runtimePatches" not in doc["spec"] and "activeDeadlineSeconds" not in doc["spec"]


def test_a_job_as_given_with_its_limits_and_its_own_window() -> None:
    assert FACTS is not None
    spec = job(
        launcher="none",
        command=["/app/run.sh"],
        checkpoints="ft-0",
        image="trainer",
        timeouts={"max_run_s": 7200, "active_deadline_s": 3600, "preemption_window_s": 300},
    )
    doc = jobs.job_trainjob(CFG, spec, FACTS, runtime_grace_s=GRACE)
    trainer = doc["spec"]["trainer"]
    # the runtime's own args would stay if none were sent: an empty list replaces them
    assert trainer["command"] == ["/app/run.sh"] and trainer["args"] == []
    assert "image" not in trainer and "AIPLAT_IMAGE_DIGEST" not in env_of(doc)  # the runtime's image
    assert env_of(doc)["AIPLAT_CHECKPOINT_URI"].endswith("/research/checkpoints/ft-0/")  # resumes ft-0's
    assert env_of(doc)["AIPLAT_OUTPUT_URI"].endswith("/research/outputs/ft-1/")
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "7200"
    assert doc["spec"]["activeDeadlineSeconds"] == 3600
    [patch] = doc["spec"]["runtimePatches"]
    [replicated] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = replicated["template"]["spec"]["template"]
    # the grace period the pods get is the window the job is told
    assert pod["spec"]["terminationGracePeriodSeconds"] == int(env_of(doc)[t.PREEMPTION_WINDOW_ENV]) == 300
    assert env_of(doc)["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "295"
