"""Issue 45: examples/byo-llama/train.py never resumes from a mixed checkpoint. Two gloo ranks under torchrun
save through the platform's checkpoint helper (trainer.checkpoint.job) to moto S3 behind a proxy that can
throttle uploads (a slow store) or hold one request (a crash at a chosen moment):

1. SIGTERM during a save on the throttled store, SIGKILL at the end of the window, the save still running;
2. the next attempt resumes from the last committed step and is killed while its manifest PUT hangs (every
   data file of that step written): no checkpoint of that step loads;
3. the next attempt resumes from the same committed step again and finishes: its losses, final checkpoint
   (model and optimizer) and released weights are bitwise those of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_safetensors

from tests.trainer._holdproxy import HoldProxy
from tests.trainer._support import (
    assert_bitwise_equal,
    base_env,
    load_checkpoint_tensors,
    make_corpus,
    wait_for,
)
from trainer.checkpoint.checkpointer import open_committed
from trainer.checkpoint.store import S3Store, step_dir_name
from trainer.errors import BadInput
from trainer.storage.hashing import MANIFEST
from trainer.tools.moto_server import MotoServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # torchrun ranks and a moto server

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples/byo-llama/train.py"
STEPS, EVERY = 6, 2  # checkpoints at steps 2, 4 and 6
ARGS = ["--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--batch-size", "2", "--seq-len", "32",
        "--hidden-size", "32", "--layers", "1"]  # fmt: skip
# A slow store: a save of this model (about 400 kB of DCP files) takes seconds at this rate, far longer
# than the window below, so SIGKILL at the end of the window lands while the save is still writing.
SLOW_BPS = 120_000
WINDOW_S = 1
WAIT_S = 300  # generous bound on each condition waited for (a loaded 2-core machine)


@pytest.fixture()
def work() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="byo-llama-ckpt-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def job_env(name: str, endpoint: str) -> dict[str, str]:
    return {
        "AIPLAT_DATA_URI": "s3://datasets/corpus/",
        "AIPLAT_CHECKPOINT_URI": f"s3://ckpt/{name}/checkpoints/",
        "AIPLAT_OUTPUT_URI": f"s3://ckpt/{name}/outputs/",
        "AIPLAT_ATTEMPT_ID": f"{name}-attempt",
        "AIPLAT_PREEMPTION_WINDOW_S": str(WINDOW_S),
        "AWS_ENDPOINT_URL": endpoint,
        "HF_HUB_OFFLINE": "1",
    }


def start(env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """torchrun with two ranks in its own session, so the test can kill the whole job as the kubelet does."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
             str(SCRIPT), *ARGS],
            cwd=log.parent, env=base_env(env), stdout=out, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip


def _processes() -> dict[int, tuple[int, str]]:
    """``{pid: (parent pid, state)}`` of every process, from /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            out[int(d.name)] = (int(ppid), state)
    return out


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL torchrun and its ranks, as the kubelet kills a pod's container at the end of the window.
    torchrun starts each rank in a session of its own, so they are found by parentage, not by group."""
    table = _processes()
    job, grew = {proc.pid}, True
    while grew:
        more = {p for p, (ppid, _) in table.items() if ppid in job} - job
        job |= more
        grew = bool(more)
    for pid in job:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=60)
    wait_for(
        lambda: all(_processes().get(p, (0, "Z"))[1] in "ZX" for p in job), 60, "the killed ranks to be gone"
    )


def finish(proc: subprocess.Popen[str], log: Path) -> str:
    try:
        rc = proc.wait(timeout=WAIT_S)
    finally:
        kill(proc)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    return text


def losses(text: str) -> dict[str, str]:
    return {ln.split()[1]: ln for ln in text.splitlines() if ln.startswith("step ") and " loss " in ln}


def step_objects(moto: MotoServer, name: str, step: int) -> list[str]:
    prefix = f"{name}/checkpoints/{step_dir_name(step)}/"
    resp = moto.client().list_objects_v2(Bucket="ckpt", Prefix=prefix)
    return sorted(o["Key"][len(prefix) :] for o in resp.get("Contents", []))


def checkpoint_tensors(name: str, step: int, dst: Path) -> dict[str, torch.Tensor]:
    """Model and optimizer tensors of the committed checkpoint at ``step`` (checked against its manifest)."""
    ckpt = open_committed(f"s3://ckpt/{name}/checkpoints", step)
    store: S3Store = ckpt.store  # type: ignore[assignment]
    folder = step_dir_name(step)
    for key in store.blobs.list(folder):
        (dst / folder / key).parent.mkdir(parents=True, exist_ok=True)
        store.blobs.download(f"{folder}/{key}", dst / folder / key)
    return load_checkpoint_tensors(dst / folder)


def released(moto: MotoServer, name: str) -> tuple[dict[str, torch.Tensor], dict]:
    s3 = moto.client()
    weights = s3.get_object(Bucket="ckpt", Key=f"{name}/outputs/model/model.safetensors")["Body"].read()
    greedy = s3.get_object(Bucket="ckpt", Key=f"{name}/outputs/greedy.json")["Body"].read()
    return load_safetensors(weights), json.loads(greedy)


def test_interrupted_saves_never_leave_a_checkpoint_that_loads(moto_s3: MotoServer, work: Path) -> None:
    s3 = moto_s3.client()
    for bucket in ("datasets", "ckpt"):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket="datasets", Key="corpus/part-0.txt", Body=make_corpus(40).encode())

    # The uninterrupted reference, straight to moto.
    ref = finish(start(job_env("ref", moto_s3.endpoint), work / "ref.log"), work / "ref.log")
    assert "steps 0..6" in ref

    with HoldProxy(moto_s3.port) as proxy:
        env = job_env("run", proxy.endpoint)

        # 1. SIGTERM as the save of step 4 starts uploading on the slow store; SIGKILL at the end of the
        #    window, while that save is still writing (the job is still running then).
        proxy.throttle(SLOW_BPS)
        log = work / "attempt-1.log"
        proc = start(env, log)
        try:
            step4 = f"/{step_dir_name(4)}/attempt-"
            wait_for(lambda: any(step4 in r for r in proxy.forwarded), WAIT_S, "the save of step 4 to start")
            proc.send_signal(signal.SIGTERM)  # torchrun forwards it to both ranks
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=WINDOW_S)  # the window: the save cannot finish in it
        finally:
            kill(proc)
        assert MANIFEST not in step_objects(moto_s3, "run", 4)
        assert MANIFEST in step_objects(moto_s3, "run", 2)
        assert open_committed("s3://ckpt/run/checkpoints").step == 2

        # 2. The next attempt resumes from step 2; it crashes while its manifest of step 4 is being written.
        proxy.throttle(None)
        proxy.hold(f"/{step_dir_name(4)}/{MANIFEST}")
        log = work / "attempt-2.log"
        proc = start(env, log)
        try:
            wait_for(lambda: proxy.held, WAIT_S, "the manifest of step 4 to be written")
        finally:
            kill(proc)
        assert "steps 2..6" in log.read_text()
        objects = step_objects(moto_s3, "run", 4)
        # every data file of the crashed attempt is there (DCP writes .metadata after the ranks' files), no
        # manifest
        [crashed] = [o.split("/")[0] for o in objects if o.endswith("/.metadata")]
        assert sorted(o for o in objects if o.startswith(crashed + "/")) == [
            f"{crashed}/.metadata",
            f"{crashed}/__0_0.distcp",
            f"{crashed}/__1_0.distcp",
        ]
        assert MANIFEST not in objects
        with pytest.raises(BadInput, match=r"not a committed checkpoint: no manifest\.json"):
            open_committed("s3://ckpt/run/checkpoints", 4)
        assert open_committed("s3://ckpt/run/checkpoints").step == 2

        # 3. The next attempt resumes from step 2 again and finishes.
        proxy.pass_through()
        log = work / "attempt-3.log"
        done = finish(start(env, log), log)
    assert "steps 2..6" in done
    assert "skipping checkpoint" in done and step_dir_name(4) in done  # the uncommitted folder, said so

    # Bitwise what the uninterrupted run computed: every loss after the resume, the final checkpoint (model
    # and optimizer), the released weights and their greedy tokens.
    got, want = losses(done), losses(ref)
    assert sorted(got) == [str(s) for s in range(3, STEPS + 1)]
    assert all(got[s] == want[s] for s in got), (got, want)
    assert_bitwise_equal(
        checkpoint_tensors("run", STEPS, work / "run"), checkpoint_tensors("ref", STEPS, work / "ref")
    )
    (run_w, run_greedy), (ref_w, ref_greedy) = released(moto_s3, "run"), released(moto_s3, "ref")
    assert_bitwise_equal(run_w, ref_w)
    assert run_greedy == ref_greedy
