"""``python -m trainer.release.publish --from <HF folder>``: a team's folder from its output prefix over S3,
the
source recorded, refusals that write nothing under release/, and the publish path run with torch unimportable
and pickle's loaders booby-trapped (the import-linter contract in pyproject.toml is the static half)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from datetime import datetime
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tests.support.hf_folders import CHAT_TEMPLATE, save_folder
from tests.trainer._support import PY, REPO, base_env
from trainer.errors import BadInput
from trainer.release.manifest import MANIFEST, verify
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

DIGEST = "sha256:" + "ab" * 32
LLAMA = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)  # fmt: skip


@pytest.fixture(scope="module")
def folder(trainer_tmp_root: Path) -> Path:
    torch.manual_seed(0)
    return save_folder(
        LlamaForCausalLM(LLAMA), trainer_tmp_root / "llama-folder", chat_template=CHAT_TEMPLATE
    )


def upload(s3, folder: Path, bucket: str, prefix: str) -> None:
    for p in folder.iterdir():
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{p.name}", Body=p.read_bytes())


def released(s3, bucket: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="release/").get("Contents", [])]


def record(
    s3, key: str, *, job: str, code: int = 0, image: str = DIGEST, ended: str = "2026-12-01T10:00:00Z"
):
    """A run record as the bundled trainer writes one (trainer/run/runrecord.py), created once."""
    doc = {
        "format": "aiplat-run-record-v1",
        "status": "finished",
        "ended_utc": ended,
        "exit": {"code": code, "name": "ok" if code == 0 else "failed", "reason": ""},
        "image_digest": image,
        "workload": {"trainjob": job, "namespace": "team-research"},
    }
    s3.put_object(Bucket="ckpt", Key=key, Body=json.dumps(doc).encode(), IfNoneMatch="*")


def test_a_teams_folder_publishes_with_its_source(moto_s3: MotoServer, folder: Path) -> None:
    s3 = moto_s3.client()
    for b in ("ckpt", "artifacts"):
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    upload(s3, folder, "ckpt", "research/outputs/llama-7/model")
    records = "research/checkpoints/llama-7/run-records"
    other = "sha256:" + "cd" * 32
    record(s3, f"{records}/0-a.end.json", job="llama-7", image=other, ended="2026-12-01T09:00:00Z")
    record(s3, f"{records}/1-b.end.json", job="llama-7", ended="2026-12-01T10:00:00Z")  # the newest success
    record(s3, f"{records}/2-c.end.json", job="llama-7", code=3, ended="2026-12-01T11:00:00Z")  # failed
    record(s3, f"{records}/3-d.end.json", job="someone-else", ended="2026-12-01T12:00:00Z")
    rel = publish(
        "s3://ckpt/research/outputs/llama-7/model/", "s3://artifacts", "llama", team="research", step=12
    )
    assert rel.version.endswith("-step12")
    got = verify("s3://artifacts", "llama", rel.version)
    # the job and image are the run record's, not anything given on the command line
    assert (got.source.team, got.source.job, got.source.image_digest) == ("research", "llama-7", DIGEST)
    head = s3.head_object(Bucket="ckpt", Key=f"{records}/1-b.end.json")
    assert got.source.run_record == f"s3://ckpt/{records}/1-b.end.json?versionId={head['VersionId']}"
    # every file by the version it was read at, beside the sha256 the manifest records
    assert got.source.versions is not None and set(got.source.versions) == set(got.files)
    for name, version in got.source.versions.items():
        key = f"research/outputs/llama-7/model/{name}"
        assert s3.head_object(Bucket="ckpt", Key=key)["VersionId"] == version
    assert got.serving is not None and got.serving.chat_template is True
    assert (got.serving.architecture, got.serving.kv_heads, got.serving.head_dim) == (
        "LlamaForCausalLM",
        2,
        8,
    )
    assert sorted(got.files) == sorted(p.name for p in folder.iterdir())
    # a named record is checked the same way: the job's, finished, with exit code 0
    named = publish(
        "s3://ckpt/research/outputs/llama-7/model/",
        "s3://artifacts",
        "llama",
        team="research",
        run_record=f"s3://ckpt/{records}/0-a.end.json",
        now=datetime(2026, 12, 2, 1, 2, 3),
    )
    assert named.source.image_digest == other

    # A team's release must come from that team's job output and a finished run of that job; each refusal
    # writes nothing under release/.
    before = released(s3, "artifacts")
    upload(s3, folder, "ckpt", "production/outputs/prod-1/model")
    upload(s3, folder, "ckpt", "research/outputs/no-record/model")
    for kwargs, why in (
        ({"team": "research", "from_uri": "s3://ckpt/production/outputs/prod-1/model"},
         "not under research/outputs/"),
        ({"team": "Research", "from_uri": "s3://ckpt/research/outputs/llama-7/model"}, "--team='Research'"),
        ({"team": "research", "from_uri": "s3://ckpt/research/outputs/no-record/model"},
         "no run record of TrainJob 'no-record' with status finished and exit code 0"),
        ({"team": "research", "from_uri": "s3://ckpt/research/outputs/llama-7/model",
          "run_record": f"s3://ckpt/{records}/2-c.end.json"}, "no run record of TrainJob 'llama-7'"),
        ({"team": "research", "from_uri": "s3://ckpt/research/outputs/llama-7/model",
          "run_record": f"s3://ckpt/{records}/3-d.end.json"}, "no run record of TrainJob 'llama-7'"),
        ({"team": "research", "from_uri": "s3://ckpt/research/outputs/llama-7/model",
          "run_record": "s3://ckpt/production/checkpoints/prod-1/run-records/x.json"},
         "is not a run record of team research"),
        ({"from_uri": f"s3://artifacts/release/llama/{rel.version}"}, "is a release already"),
        ({"from_uri": "s3://ckpt/research/outputs/none/model"}, "no files there"),
    ):  # fmt: skip
        uri = kwargs.pop("from_uri")
        with pytest.raises(BadInput, match=why):
            publish(uri, "s3://artifacts", "llama", **kwargs)
    assert released(s3, "artifacts") == before


def test_a_pickle_in_the_folder_writes_nothing(folder: Path, work_dir: Path) -> None:
    bad = work_dir / "bad"
    bad.mkdir()
    for p in folder.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "pytorch_model.bin").write_bytes(b"\x80\x04\x95")
    with pytest.raises(BadInput, match=r"^pytorch_model.bin: a pickle-bearing file \(.bin\)"):
        publish(str(bad), str(work_dir / "rel"), "llama")
    assert not (work_dir / "rel").exists()


# Run in a fresh interpreter before trainer.release.publish is imported: torch (and the other libraries that
# unpickle) cannot be imported, and every pickle loader ends the process with a marker.
TRAPS = textwrap.dedent(
    """
    import importlib.abc, os, sys
    FORBIDDEN = {"torch", "safetensors", "numpy", "transformers", "dill", "cloudpickle", "joblib"}

    class Trap(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in FORBIDDEN:
                os.write(2, f"TRAP import {name}\\n".encode())
                os._exit(97)
            return None

    sys.meta_path.insert(0, Trap())
    import pickle, _pickle

    def boom(*args, **kwargs):
        os.write(2, b"TRAP unpickle\\n")
        os._exit(98)

    class Unpickler:
        def __init__(self, *args, **kwargs):
            boom()

    for module in (pickle, _pickle):
        module.load, module.loads, module.Unpickler = boom, boom, Unpickler
    from trainer.release.publish import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


def trapped_publish(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-c", TRAPS, *args], cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=120
    )


def test_publishing_never_imports_torch_or_unpickles(folder: Path, work_dir: Path) -> None:
    # The traps work: a process that loads a pickle, or imports torch, under them is stopped.
    probe = subprocess.run(
        [PY, "-c", TRAPS.replace("from trainer.release.publish import main",
                                 "pickle.loads(pickle.dumps(1))")],
        cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.returncode == 98 and "TRAP unpickle" in probe.stderr
    probe = subprocess.run(
        [PY, "-c", TRAPS.replace("from trainer.release.publish import main", "import torch")],
        cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.returncode == 97 and "TRAP import torch" in probe.stderr

    ok = trapped_publish(
        "--from", str(folder), "--release-root", str(work_dir / "rel"), "--model-name", "llama"
    )
    assert ok.returncode == 0, ok.stderr
    version = json.loads(ok.stdout)["version"]
    assert (work_dir / "rel" / "release" / "llama" / version / MANIFEST).exists()
    # A folder with a crafted DCP checkpoint next to the weights: refused, still without a trap firing.
    crafted = work_dir / "crafted"
    crafted.mkdir()
    for p in folder.iterdir():
        (crafted / p.name).write_bytes(p.read_bytes())
    (crafted / ".metadata").write_bytes(b"\x80\x04cos\nsystem\n(S'touch /tmp/pwned'\ntR.")
    bad = trapped_publish(
        "--from", str(crafted), "--release-root", str(work_dir / "rel"), "--model-name", "x"
    )
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.splitlines() == [
        "error: .metadata: part of a torch.distributed.checkpoint (its .metadata is a pickle); a release is "
        "an HF folder of safetensors: convert the checkpoint with python -m trainer.export.hf"
    ]
    assert not (work_dir / "rel" / "release" / "x").exists()


def test_a_phi3_folder_one_tensor_short_is_refused_in_the_publishers_own_path(work_dir: Path) -> None:
    """The publisher (torch unimportable in its process) asks a process of its own what Phi-3's model holds,
    and refuses the folder that lacks one tensor, naming it (transformers would load it, randomly filled)."""
    from safetensors.torch import load_file, save_file
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(3)
    folder = save_folder(
        Phi3ForCausalLM(
            Phi3Config(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, vocab_size=300, max_position_embeddings=64, pad_token_id=0)
        ),
        work_dir / "phi3",
    )  # fmt: skip
    weights = load_file(folder / "model.safetensors")
    victim = "model.layers.1.mlp.down_proj.weight"
    save_file({k: v for k, v in weights.items() if k != victim}, folder / "model.safetensors")
    bad = trapped_publish(
        "--from", str(folder), "--release-root", str(work_dir / "rel"), "--model-name", "phi"
    )
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.splitlines() == [
        f"error: the weights do not match config.json (Phi3ForCausalLM's own model): missing [{victim!r}]"
    ]
    assert not (work_dir / "rel" / "release" / "phi").exists()
