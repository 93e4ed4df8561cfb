"""``aiplat train run-local``: the example job file (examples/byo-llama/job.yaml) run here as the cluster
would run it (two gloo ranks under torchrun, the job contract, a local S3 with the stack's buckets), and its
preemption drill: SIGTERM once a checkpoint is committed, then the next attempt resumes from the newest
committed step and finishes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.cli.main import main
from tests.conftest import REPO

STACK = "prod-us-train"
EXAMPLE = REPO / "examples/byo-llama/job.yaml"
SMALL = ["--hidden-size", "32", "--layers", "1", "--batch-size", "2", "--seq-len", "32"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_example_runs_locally_and_its_drill_resumes_from_the_last_committed_step(capfd) -> None:
    steps = 30  # the drill lands after step 2's commit, long before the end, however busy the machine
    argv = ["train", "run-local", "-s", STACK, "-f", str(EXAMPLE), "--drill", "sigterm:2"]
    code = main([*argv, "--steps", str(steps), "--checkpoint-every", "2", *SMALL])
    out = capfd.readouterr().out
    assert code == 0, out[-3000:]
    assert "run-local: running " in out and "examples/byo-llama/train.py for the image's /app/train.py" in out
    assert "1 data files under s3://aiplat-prod-us-east-1-datasets/research/byo-llama/corpus/" in out
    [resumed] = re.findall(r"the next attempt resumes from committed step (\d+)", out)
    assert 2 <= int(resumed) < steps
    # the script's own word: the second attempt started from that step, with its own attempt id
    assert "attempt byo-llama-ft-local-1: 2 ranks" in out and f"steps {resumed}..{steps}" in out
    assert out.rstrip().endswith(f"run-local: attempt 1 exit 0; last committed step {steps}")


def test_run_local_refuses_what_it_cannot_run(capsys, tmp_path: Path) -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["command"] = ["/app/elsewhere.py"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["train", "run-local", "-s", STACK, "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert "command: '/app/elsewhere.py' is a path in the image and" in err and "--set command=" in err
    assert main(["train", "run-local", "-s", STACK, "-f", str(EXAMPLE), "--drill", "sigkill"]) == 2
    assert "--drill: sigkill; fix: use --drill sigterm or --drill sigterm:STEP" in capsys.readouterr().err
    # the same validation as render and submit: a job above the team's quota is refused before it runs
    assert main(["train", "run-local", "-s", STACK, "-f", str(EXAMPLE), "--set", "nodes=3"]) == 2
    assert "can get at most 16 on pool 'train'" in capsys.readouterr().err
