"""LoRA adapter releases end to end on CPU (issue 42): a team's job (tests/trainer/release/lora_job.py: a tiny
Llama built from a config, a peft LoRA trained a few steps) leaves a base folder and an adapter folder in its
output prefix; the base is published, then the adapter with ``--base NAME@VERSION`` (the base's signed
manifest read back and verified, the adapter's modules and shapes checked against the base's own model);
replication copies both; the fetch tool verifies both, the adapter against the base folder it fetched; peft
and transformers load base + adapter from the fetched folders and generate the greedy tokens the training
process did. Then what the publisher and the fetch tool refuse: a rank that is not the tensors', a rank
vLLM 0.33.0 cannot serve, a target module the base lacks, a pickle, modules_to_save, a base of another size,
a base that does not exist or is not signed, and an adapter served on another base than the one it names."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from inference.fetch import main as fetch_main
from tests.inference.importguard import build_site
from tests.support.hf_folders import save_folder
from tests.trainer._support import PY, REPO, base_env
from tests.trainer.test_publish import record
from trainer.release.adapter import MAX_LORA_RANK
from trainer.release.manifest import FORMAT_ADAPTER, MANIFEST, SIGNATURE
from trainer.release.publish import main as publish_main
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow  # a training process, transformers' meta-device model, a moto server

HERE = Path(__file__).resolve().parent
TEAM, BASE_JOB, LORA_JOB = "research", "llama-base-1", "llama-support-lora"
BASE, ADAPTER = "tiny-llama", "tiny-llama-support"
ROOT = "s3://artifacts"


@dataclass(frozen=True)
class Published:
    s3: Any
    job: Path  # what the training process wrote: base/, adapter/, greedy.json
    base_version: str
    adapter_version: str
    adapter_out: dict[str, Any]  # the publisher's JSON line
    work: Path


def _upload(s3: Any, folder: Path, job: str, sub: str) -> str:
    for p in folder.iterdir():
        s3.put_object(Bucket="ckpt", Key=f"{TEAM}/outputs/{job}/{sub}/{p.name}", Body=p.read_bytes())
    record(s3, f"{TEAM}/checkpoints/{job}/run-records/{job}-0.end.json", job=job)
    return f"s3://ckpt/{TEAM}/outputs/{job}/{sub}/"


def _publish(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = publish_main(["--team", TEAM, "--release-root", ROOT, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _released(s3: Any, model: str) -> list[str]:
    got = s3.list_objects_v2(Bucket="artifacts", Prefix=f"release/{model}/").get("Contents", [])
    return sorted(o["Key"] for o in got)


@pytest.fixture(scope="module")
def published(trainer_tmp_root: Path) -> Iterator[Published]:
    """The job run once, its base and adapter published from a moto S3 (module-wide: one training process,
    one meta-device model of the base)."""
    work = trainer_tmp_root / "lora-release"
    r = subprocess.run([PY, str(HERE / "lora_job.py"), str(work / "job")], cwd=REPO, env=base_env(),
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    with MotoServer() as moto, pytest.MonkeyPatch.context() as mp:
        for k, v in moto.env().items():
            mp.setenv(k, v)
        moto.reset()
        s3 = moto.client()
        for b in ("ckpt", "artifacts", "hk-replica"):
            s3.create_bucket(Bucket=b)
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        base = publish(_upload(s3, work / "job/base", BASE_JOB, "model"), ROOT, BASE, team=TEAM)
        adapter_from = _upload(s3, work / "job/adapter", LORA_JOB, "adapter")
        with contextlib.redirect_stdout(io.StringIO()) as out:  # capsys is per test
            code = publish_main(["--from", adapter_from, "--team", TEAM, "--release-root", ROOT,
                                 "--model-name", ADAPTER, "--base", f"{BASE}@{base.version}"])  # fmt: skip
        assert code == 0
        line = json.loads(out.getvalue().splitlines()[-1])
        yield Published(s3, work / "job", base.version, line["version"], line, work)


def _fetch(model: str, version: str, dest: Path, *extra: str) -> int:
    return fetch_main(["--root", "s3://hk-replica", "--model", model, "--version", version, "--dest",
                       str(dest), *extra])  # fmt: skip


def _replicate(s3: Any, model: str) -> None:
    # object by object, the manifest last (S3 Replication keeps no order; the fetch tool copes either way)
    for key in sorted(_released(s3, model), key=lambda k: k.endswith(MANIFEST)):
        body = s3.get_object(Bucket="artifacts", Key=key)["Body"].read()
        s3.put_object(Bucket="hk-replica", Key=key, Body=body)


def test_adapter_publishes_fetches_and_generates_the_training_tokens(published: Published) -> None:
    p, s3 = published, published.s3
    greedy = json.loads((p.job / "greedy.json").read_text())
    assert greedy["adapted"] != greedy["base"]  # the adapter changes what the model says

    # The manifest: an adapter, its base by name, version and the sha256 of the base's signed manifest.
    prefix = f"release/{ADAPTER}/{p.adapter_version}/"
    assert _released(s3, ADAPTER) == [prefix + n for n in
                                      sorted(["adapter_config.json", "adapter_model.safetensors", MANIFEST,
                                              SIGNATURE])]  # fmt: skip
    manifest = json.loads(s3.get_object(Bucket="artifacts", Key=prefix + MANIFEST)["Body"].read())
    base_raw = s3.get_object(Bucket="artifacts", Key=f"release/{BASE}/{p.base_version}/{MANIFEST}")["Body"]
    adapter = manifest["adapter"]
    assert manifest["format"] == FORMAT_ADAPTER and "serving" not in manifest
    assert adapter["base"] == {"model_name": BASE, "version": p.base_version,
                               "manifest_sha256": hashlib.sha256(base_raw.read()).hexdigest()}  # fmt: skip
    config = json.loads((p.job / "adapter/adapter_config.json").read_text())
    assert (adapter["rank"], adapter["target_modules"]) == (config["r"], config["target_modules"])
    assert (adapter["base_architecture"], adapter["shape_check"], adapter["modules"]) == (
        "LlamaForCausalLM",
        "full",
        6,
    )  # fmt: skip  (3 target modules in each of the 2 layers)
    assert p.adapter_out["adapter"] == adapter
    # provenance from the adapter job's run record, as for a base
    source = manifest["source"]
    assert (source["team"], source["job"]) == (TEAM, LORA_JOB)
    assert source["run_record"].startswith(f"s3://ckpt/{TEAM}/checkpoints/{LORA_JOB}/run-records/")

    # Replicated, then fetched as the inference pod does: the base, then the adapter against it.
    _replicate(s3, BASE)
    _replicate(s3, ADAPTER)
    node = p.work / "node"
    (node / "adapters").mkdir(parents=True)
    assert _fetch(BASE, p.base_version, node / "model") == 0
    # the adapter as the fetch image runs the tool: no torch, no peft importable
    site = build_site(p.work / "image-site")
    r = subprocess.run(
        [PY, "-S", "-m", "inference.fetch", "--root", "s3://hk-replica", "--model", ADAPTER, "--version",
         "latest", "--dest", str(node / "adapters/support"), "--base-dir", str(node / "model")],
        cwd=site, env={**base_env(), "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.splitlines()[-1] == p.adapter_version
    assert f"LoRA adapter rank {config['r']} on {BASE}/{p.base_version}" in out

    # peft + transformers from the fetched folders: the training process's greedy tokens.
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(node / "model"),
                                      node / "adapters/support").eval()  # fmt: skip
    with torch.no_grad():
        tokens = model.generate(input_ids=torch.tensor([greedy["prompt"]]), do_sample=False,
                                eos_token_id=None, max_new_tokens=len(greedy["adapted"]),
                                pad_token_id=256)  # fmt: skip
    assert tokens[0, len(greedy["prompt"]) :].tolist() == greedy["adapted"]


def _edit_config(**changes: Any) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        cfg = json.loads((folder / "adapter_config.json").read_text())
        (folder / "adapter_config.json").write_text(json.dumps({**cfg, **changes}))

    return change


@pytest.mark.parametrize(
    ("case", "change", "line"),
    [
        ("rank", _edit_config(r=8),
         "error: adapter_model.safetensors: model.layers.0.mlp.down_proj has rank 4 (lora_A [4, 48], lora_B "
         "[32, 4]), adapter_config.json says r 8: publish the folder save_pretrained wrote, unedited"),
        ("rank-vllm", _edit_config(r=MAX_LORA_RANK * 2),
         f"error: adapter_config.json: rank {MAX_LORA_RANK * 2} is above {MAX_LORA_RANK}, the largest "
         "--max-lora-rank vLLM 0.33.0 takes"),
        ("target", _edit_config(target_modules=["q_proj", "v_proj", "down_proj", "c_attn"]),
         "error: adapter_config.json: target module 'c_attn' is not a layer of the base (LlamaForCausalLM, "
         "whose layers are ["),
        ("pickle", lambda f: (f / "adapter_model.bin").write_bytes(b"\x80\x04K\x01."),
         "error: adapter_model.bin: a pickle-bearing file (.bin), which loading would execute"),
        ("unknown", lambda f: (f / "config.json").write_text("{}"),
         "error: config.json: not a file an adapter release holds"),
        ("save", _edit_config(modules_to_save=["lm_head"]),
         "error: adapter_config.json: modules_to_save ['lm_head'] (vLLM serves none for a causal LM"),
        ("dora", _edit_config(use_dora=True), "error: adapter_config.json: use_dora true"),
    ],
)  # fmt: skip
def test_the_publisher_refuses_an_adapter_that_does_not_fit(
    published: Published, capsys: pytest.CaptureFixture[str], case: str, change: Any, line: str
) -> None:
    folder = published.work / f"bad-{case}"
    shutil.copytree(published.job / "adapter", folder)
    change(folder)
    before = _released(published.s3, ADAPTER)
    uri = _upload(published.s3, folder, f"bad-{case}", "adapter")
    base = f"{BASE}@{published.base_version}"
    code, out, err = _publish(capsys, "--from", uri, "--model-name", ADAPTER, "--base", base)
    assert (code, out) == (2, "")
    assert err.splitlines() == [err.rstrip("\n")] and err.startswith(line), err
    assert _released(published.s3, ADAPTER) == before  # nothing written under release/


def test_the_base_must_exist_verify_and_fit(published: Published, capsys: pytest.CaptureFixture[str]) -> None:
    p, s3 = published, published.s3
    adapter_from = f"s3://ckpt/{TEAM}/outputs/{LORA_JOB}/adapter/"
    missing = "20260101T000000Z-step0"
    code, _, err = _publish(capsys, "--from", adapter_from, "--model-name", ADAPTER, "--base",
                            f"{BASE}@{missing}")  # fmt: skip
    assert code == 2
    assert err.startswith(f"error: --base={BASE}@{missing}: no signed release {BASE}/{missing}"), err
    assert f"its versions: ['{p.base_version}']" in err
    code, _, err = _publish(capsys, "--from", adapter_from, "--model-name", ADAPTER)
    assert code == 2 and "is a LoRA adapter (adapter_config.json): name the base release it was" in err

    # A base whose manifest is not signed by the release key.
    forged = f"release/{BASE}/20260102T000000Z-step0/"
    for name in (MANIFEST, SIGNATURE, "config.json"):
        body = s3.get_object(Bucket="artifacts", Key=f"release/{BASE}/{p.base_version}/{name}")["Body"].read()
        s3.put_object(
            Bucket="artifacts",
            Key=forged + name,
            Body=body.replace(p.base_version.encode(), b"20260102T000000Z-step0"),
        )
    code, _, err = _publish(capsys, "--from", adapter_from, "--model-name", ADAPTER, "--base",
                            f"{BASE}@20260102T000000Z-step0")  # fmt: skip
    assert code == 2 and "manifest.json: signature does not verify with the release signing key" in err

    # A wider base of the same family: the adapter's A/B shapes do not fit its layers.
    torch.manual_seed(1)
    wide = LlamaConfig(hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)  # fmt: skip
    save_folder(LlamaForCausalLM(wide), p.work / "wide")
    rel = publish(_upload(s3, p.work / "wide", "llama-wide", "model"), ROOT, BASE, team=TEAM,
                  now=datetime(2027, 1, 1, tzinfo=UTC))  # fmt: skip
    code, _, err = _publish(capsys, "--from", adapter_from, "--model-name", ADAPTER, "--base",
                            f"{BASE}@{rel.version}")  # fmt: skip
    assert code == 2 and err.startswith(
        "error: adapter_model.safetensors: model.layers.0.mlp.down_proj: lora_A [4, 48] and lora_B [32, 4] "
        "do not fit the base's layer (48 in, 64 out features, weight [64, 48]): the adapter was trained on "
        "another size of model"
    ), err

    # The fetch tool: the adapter on the folder of another base (its newer version) is refused.
    _replicate(s3, BASE)
    _replicate(s3, ADAPTER)
    node = p.work / "node-mismatch"
    node.mkdir()
    assert _fetch(BASE, rel.version, node / "model") == 0
    capsys.readouterr()
    assert _fetch(ADAPTER, p.adapter_version, node / "adapter", "--base-dir", str(node / "model")) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"release {ADAPTER}/{p.adapter_version}: --base-dir {node / 'model'} holds "
                          f"{BASE}/{rel.version} (manifest sha256 ")  # fmt: skip
    assert f"the adapter was published for {BASE}/{p.base_version} (sha256 " in err
    assert not (node / "adapter").exists() and [c.name for c in node.iterdir()] == ["model"]
