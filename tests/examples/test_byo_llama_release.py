"""Issue 31, end to end on CPU: a team's own script (examples/byo-llama/train.py: torchrun, 2 gloo ranks, a
tiny randomly initialised Llama built from a config) runs under the job environment contract against moto
and leaves a Hugging Face folder at ``$AIPLAT_OUTPUT_URI/model/``; ``python -m trainer.release.publish
--team``
validates, signs and writes it under ``release/``; replication copies it to an inference region; the fetch
tool (as its image runs it: no torch) verifies and downloads it; transformers loads that folder and
generates the greedy tokens the training process's model generated. Then the folders a publisher must refuse
(a pickle-bearing file, an architecture vLLM 0.33.0 does not serve, weights that disagree with config.json,
a crafted torch.distributed.checkpoint ``.metadata``): each one line, exit 2, nothing under ``release/``, and
the ``.metadata`` object never requested from S3."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import torch
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.inference.importguard import build_site
from tests.support.release_keys import release_keys
from tests.trainer._holdproxy import HoldProxy
from tests.trainer._support import base_env, make_corpus
from trainer.release.manifest import MANIFEST, SIGNATURE
from trainer.release.publish import main as publish_main
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow  # torchrun ranks, the CLIs and a moto server

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples/byo-llama/train.py"
TEAM, JOB, MODEL = "research", "byo-llama-ft", "byo-llama"
IMAGE_DIGEST = "sha256:" + "5e" * 32  # the TrainJob's image, as the run record names it
OUTPUT = f"s3://ckpt/{TEAM}/outputs/{JOB}/"
JOB_ENV = {
    "AIPLAT_TEAM": TEAM,
    "AIPLAT_TRAINJOB": JOB,
    "AIPLAT_IMAGE_DIGEST": IMAGE_DIGEST,
    "AIPLAT_DATA_URI": f"s3://datasets/{TEAM}/byo-llama/corpus/",
    "AIPLAT_CHECKPOINT_URI": f"s3://ckpt/{TEAM}/checkpoints/{JOB}/",
    "AIPLAT_OUTPUT_URI": OUTPUT,
    "AIPLAT_ATTEMPT_ID": f"{JOB}-attempt-0",
    "AIPLAT_PREEMPTION_WINDOW_S": "30",
    "HF_HUB_OFFLINE": "1",
    # what the runtime tells a pod of its node price (trainer/run/cost.py, tests/infra/training/test_wire.py)
    "AIPLAT_PRICE": json.dumps({"pool": "train", "instance_type": "p5.48xlarge", "node_gpus": 8,
                                "purchase_option": "on_demand", "usd_per_node_hour": 55.04}),
}  # fmt: skip


@pytest.fixture()
def work() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="byo-llama-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cli(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO, env=base_env(env), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def publish(folder: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # the job and its image come from the job's run record (the script writes it at its end), not from here
    return cli("trainer.release.publish", "--from", folder, "--team", TEAM, "--release-root", "s3://artifacts",
               "--model-name", MODEL, env=env)  # fmt: skip


def keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


def test_byo_llama_trains_publishes_replicates_fetches_and_generates(
    moto_s3: MotoServer, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s3 = moto_s3.client()
    for bucket in ("datasets", "ckpt", "artifacts", "hk-replica"):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket="datasets", Key=f"{TEAM}/byo-llama/corpus/part-0.txt", Body=make_corpus(40).encode())

    # 1. The team's job: torchrun, two gloo ranks, the platform's environment contract.
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT),
         "--steps", "3", "--batch-size", "2", "--seq-len", "32", "--hidden-size", "32"],
        cwd=work, env=base_env(JOB_ENV), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"attempt {JOB}-attempt-0: 2 ranks" in r.stdout and "step 3 loss" in r.stdout
    model_files = [k.rsplit("/", 1)[1] for k in keys(s3, "ckpt", f"{TEAM}/outputs/{JOB}/model/")]
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(model_files)
    greedy = json.loads(s3.get_object(Bucket="ckpt", Key=f"{TEAM}/outputs/{JOB}/greedy.json")["Body"].read())
    assert keys(s3, "ckpt", f"{TEAM}/checkpoints/{JOB}/") != []  # it checkpointed where the contract says

    # 2. Publish the folder as the publisher's Job would: checked, signed, create-only.
    with release_keys(work / "keys") as (_, public):
        r = publish(OUTPUT + "model/")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        version = out["version"]
        source = out["source"]
        assert {k: source[k] for k in ("uri", "step", "team", "job", "image_digest")} == {
            "uri": OUTPUT + "model/", "step": 0, "team": TEAM, "job": JOB, "image_digest": IMAGE_DIGEST
        }  # fmt: skip
        # from the run record the script wrote at its end, read by its version
        assert source["run_record"].startswith(
            f"s3://ckpt/{TEAM}/checkpoints/{JOB}/run-records/{JOB}-attempt-0"
        )
        assert (out["architecture"], out["dtype"]) == ("LlamaForCausalLM", "float32")
        prefix = f"release/{MODEL}/{version}/"
        published = keys(s3, "artifacts", prefix)
        assert sorted(k[len(prefix) :] for k in published) == sorted([*model_files, MANIFEST, SIGNATURE])
        manifest = json.loads(s3.get_object(Bucket="artifacts", Key=prefix + MANIFEST)["Body"].read())
        serving = manifest["serving"]
        assert (serving["layers"], serving["kv_heads"], serving["head_dim"]) == (2, 2, 8)
        assert serving["chat_template"] is True and serving["shape_check"] == "full"

        # 3. Replication (object by object, the manifest last), then the fetch tool as its image runs it.
        for key in sorted(published, key=lambda k: k.endswith(MANIFEST)):
            body = s3.get_object(Bucket="artifacts", Key=key)["Body"].read()
            s3.put_object(Bucket="hk-replica", Key=key, Body=body)
        site = build_site(work / "image-site")
        dest = work / "node" / "model"
        dest.parent.mkdir()
        fetch = subprocess.run(
            [sys.executable, "-S", "-m", "inference.fetch", "--root", "s3://hk-replica", "--model", MODEL,
             "--version", version, "--dest", str(dest)],
            cwd=site, env={**base_env(), "PYTHONPATH": str(site)}, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert fetch.returncode == 0, fetch.stderr
        assert fetch.stdout.splitlines()[-1] == version
        assert "LlamaForCausalLM, float32" in fetch.stdout and f"team {TEAM}, job {JOB}" in fetch.stdout

    # 4. transformers serves the fetched folder as the training process's model did: the same greedy tokens.
    model = AutoModelForCausalLM.from_pretrained(dest).eval()
    tok = AutoTokenizer.from_pretrained(dest)
    ids = tok(greedy["prompt"]).input_ids
    assert ids == greedy["prompt_ids"]
    with torch.no_grad():
        tokens = model.generate(torch.tensor([ids]), max_new_tokens=len(greedy["tokens"]), do_sample=False,
                                pad_token_id=tok.pad_token_id)[0, len(ids) :].tolist()  # fmt: skip
    assert tokens == greedy["tokens"]
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False).startswith("user: hi")

    # 5. Folders the publisher refuses, each derived from the good one: one line, exit 2, nothing written.
    good = work / "good"
    good.mkdir()
    for name in model_files:
        body = s3.get_object(Bucket="ckpt", Key=f"{TEAM}/outputs/{JOB}/model/{name}")["Body"].read()
        (good / name).write_bytes(body)
    before = keys(s3, "artifacts", "release/")
    [record_key] = keys(s3, "ckpt", f"{TEAM}/checkpoints/{JOB}/run-records/")
    finished = json.loads(s3.get_object(Bucket="ckpt", Key=record_key)["Body"].read())
    assert finished["status"] == "finished" and finished["image_digest"] == IMAGE_DIGEST
    # its cost at the runtime's price: CPU ranks hold no GPU, so no GPU hours and nothing to pay
    cost = finished["cost"]
    assert (cost["instance_type"], cost["gpu_hours"], cost["usd"]) == ("p5.48xlarge", 0, 0)
    assert cost["usd_per_gpu_hour"] == 55.04 / 8

    def bad_folder(case: str, change: Any) -> str:
        folder = work / case
        shutil.copytree(good, folder)
        change(folder)
        for p in folder.iterdir():
            s3.put_object(Bucket="ckpt", Key=f"{TEAM}/outputs/{case}/model/{p.name}", Body=p.read_bytes())
        # the case's job finished as the real one did: its run record names it
        record = {**finished, "workload": {"trainjob": case}}
        s3.put_object(
            Bucket="ckpt", Key=f"{TEAM}/checkpoints/{case}/run-records/a.json", Body=json.dumps(record)
        )
        return f"s3://ckpt/{TEAM}/outputs/{case}/model/"

    def edit_config(**changes: Any) -> Any:
        def change(folder: Path) -> None:
            cfg = json.loads((folder / "config.json").read_text())
            (folder / "config.json").write_text(json.dumps({**cfg, **changes}))

        return change

    capsys.readouterr()  # what transformers printed while loading
    with release_keys(work / "keys2"):
        cases = [
            (bad_folder("with-pickle", lambda f: (f / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")),
             "error: pytorch_model.bin: a pickle-bearing file (.bin)"),
            (bad_folder("unsupported", edit_config(architectures=["MyLlamaForCausalLM"])),
             "error: config.json: architectures: 'MyLlamaForCausalLM' is not an architecture vLLM 0.33.0 "
             "serves"),
            (bad_folder("shapes", edit_config(intermediate_size=64)),
             "error: the weights do not match config.json (LlamaForCausalLM's own model): "),
        ]  # fmt: skip
        for folder, line in cases:  # in this process (the CLI's own entry point), to keep the test short
            assert publish_main(["--from", folder, "--team", TEAM, "--release-root", "s3://artifacts",
                                 "--model-name", MODEL]) == 2  # fmt: skip
            err = capsys.readouterr().err
            assert err.splitlines() == [err.rstrip("\n")] and err.startswith(line), err
        assert "mlp.down_proj.weight is [32, 128], the model has [32, 64]" in err

        # A crafted DCP .metadata (a pickle that would run a command): S3 is reached through a proxy that
        # holds, and records, any request for it; the publisher refuses by the name alone, never asking.
        crafted = bad_folder("crafted", lambda f: (f / ".metadata").write_bytes(b"cos\nsystem\n(S'id'\ntR."))
        with HoldProxy(moto_s3.port) as proxy:
            proxy.hold(".metadata")
            r = publish(crafted, env={"AWS_ENDPOINT_URL": proxy.endpoint, "AWS_MAX_ATTEMPTS": "1"})
            assert proxy.held == []
            # The control: a reader that does ask for it is seen (and left hanging until it gives up).
            reader = boto3.client("s3", endpoint_url=proxy.endpoint, region_name=moto_s3.region,
                                  config=Config(read_timeout=1, retries={"max_attempts": 1}))  # fmt: skip
            with pytest.raises(ReadTimeoutError):
                reader.get_object(Bucket="ckpt", Key=crafted.removeprefix("s3://ckpt/") + ".metadata")
            assert proxy.held and all(h.startswith("GET ") and "/model/.metadata " in h for h in proxy.held)
        assert r.returncode == 2, r.stderr
        assert r.stderr.splitlines() == [
            "error: .metadata: part of a torch.distributed.checkpoint (its .metadata is a pickle); a release "
            "is an HF folder of safetensors: convert the checkpoint with python -m trainer.export.hf"
        ]
    assert keys(s3, "artifacts", "release/") == before


def test_the_script_imports_only_what_the_job_contract_names() -> None:
    """examples/byo-llama/train.py needs of this repository only the job contract's helpers (its checkpoints,
    its run record's cost; its image copies the trainer package), and only libraries its requirements.txt
    pins: the standard library, torch, transformers, boto3."""
    import ast

    allowed = {"torch", "transformers", "boto3", "trainer"}
    tree = ast.parse(SCRIPT.read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    names = {m.split(".")[0] for m in modules}
    assert names - set(sys.stdlib_module_names) - {"__future__"} == allowed
    assert {m for m in modules if m.split(".")[0] == "trainer"} == {
        "trainer.checkpoint.job",
        "trainer.run.cost",
    }
