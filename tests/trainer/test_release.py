"""Model releases of the bundled trainer's checkpoints (python -m trainer.export.hf, then python -m
trainer.release.publish --from that folder; trainer/release/manifest.py): local directories and S3 over HTTP.
That
transformers loads them and computes the trainer's logits: tests/trainer/test_hf_release.py. Folders of any
architecture: tests/trainer/test_hf_folder.py, tests/trainer/test_publish.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from tests.trainer._support import PY, REPO, Job, base_env
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.config import ModelConfig
from trainer.errors import BadInput, StoreUnavailable
from trainer.export.gpt2 import tensor_rules
from trainer.export.hf import export
from trainer.export.hf import main as export_main
from trainer.release.manifest import (
    CONFIG,
    FILES,
    FORMAT,
    MANIFEST,
    SIGNATURE,
    TOKENIZER,
    WEIGHTS,
    Release,
    ReleaseError,
    download,
    list_versions,
    newest_valid,
    verify,
)
from trainer.release.publish import main as publish_main
from trainer.release.publish import publish
from trainer.release.signing import signer_for
from trainer.tools.moto_server import MotoServer
from trainer.training.distributed import DistInfo
from trainer.training.loop import Trainer

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


def at(minute: int) -> datetime:
    return T0.replace(minute=minute)


def train_and_save(info: DistInfo, uri: str, steps: list[int], seed: int = 0) -> dict[int, dict]:
    """Checkpoints at ``steps``; returns the model parameters at each of them."""
    job = Job(seed)
    ck = job.ckpt(uri, info, keep=10, async_save=False)
    params = {}
    done = 0
    for s in steps:
        job.step(s - done)
        done = s
        res = ck.save(s, blocking=True, metrics={"step": s, "loss": 1.5 + s})
        assert res is not None and res.committed, res
        params[s] = job.params()
    ck.close()
    return params


def version_dir(root: Path, version: str) -> Path:
    return root / "release" / "gpt-debug" / version


def export_publish(ckpt: str, step: int | None, root: str, minute: int) -> Release:
    """What the two jobs do: export the checkpoint (trainer identity) into a new folder of the trainer's
    outputs, then publish that folder (publisher identity) with the step it exported."""
    out = f"{ckpt.rstrip('/')}-outputs/m{minute}/model"
    done = export(ckpt, step, out)
    return publish(out, root, "gpt-debug", step=done["step"], now=at(minute))


def assert_holds(folder: Path, params: dict[str, torch.Tensor], vocab: int = 257) -> None:
    """The release's weights are the trainer's ``params``: every GPT-2 tensor, transposed back where the
    mapping transposed it, equals its trainer tensor (the embedding's first ``vocab`` rows)."""
    hf = load_file(folder / WEIGHTS)
    assert set(hf) == {r.hf for r in tensor_rules(2)}
    for r in tensor_rules(2):
        got = hf[r.hf].t() if r.transpose else hf[r.hf]
        want = params[r.trainer][:vocab] if r.vocab_rows else params[r.trainer]
        assert torch.equal(got, want), r


def test_local_roundtrip_publish_verify_download_load(info: DistInfo, work_dir: Path) -> None:
    params = train_and_save(info, str(work_dir / "ckpt"), [2, 4])
    rel = export_publish(str(work_dir / "ckpt"), None, str(work_dir / "rel"), 1)
    assert rel.version == "20261130T100100Z-step4" and rel.step == 4  # newest committed by default
    assert list_versions(str(work_dir / "rel"), "gpt-debug") == [rel.version]
    d = version_dir(work_dir / "rel", rel.version)
    assert sorted(p.name for p in d.iterdir()) == sorted([*FILES, MANIFEST, SIGNATURE])
    manifest = json.loads((d / MANIFEST).read_text())
    assert manifest["format"] == FORMAT
    assert manifest["source"] == {
        "uri": f"{work_dir}/ckpt-outputs/m1/model/",
        "step": 4,
        "team": None,
        "job": None,
        "image_digest": None,
    }
    # What serving needs, read from the folder: the trainer's model (ModelConfig's defaults, the debug size)
    # over the byte tokenizer's 257 ids.
    m = ModelConfig()
    stored = load_file(d / WEIGHTS)
    assert manifest["serving"] == {
        "architecture": "GPT2LMHeadModel",
        "model_type": "gpt2",
        "dtype": "float32",
        "parameters": sum(t.numel() for t in stored.values()),
        "weight_bytes": 4 * sum(t.numel() for t in stored.values()),
        "layers": m.n_layer,
        "hidden_size": m.d_model,
        "attention_heads": m.n_head,
        "kv_heads": m.n_head,
        "head_dim": m.d_model // m.n_head,
        "vocab_size": 257,
        "max_positions": m.seq_len,
        "chat_template": False,
        "shape_check": "full",
    }
    assert {n: e["size"] for n, e in manifest["files"].items()} == {n: (d / n).stat().st_size for n in FILES}
    # Weights only, in safetensors (no pickle); the tied lm_head is not stored (GPT-2's wte is the head).
    assert_holds(d, params[4])

    got = verify(str(work_dir / "rel"), "gpt-debug", rel.version)
    assert got.config == rel.config and got.files == rel.files and got.source.step == 4
    assert got.serving == rel.serving
    assert got.config["n_embd"] == 32 and got.config["vocab_size"] == 257
    dl = download(str(work_dir / "rel"), "gpt-debug", rel.version, work_dir / "dl")
    assert dl.version == rel.version
    assert sorted(p.name for p in (work_dir / "dl").iterdir()) == sorted([*FILES, MANIFEST, SIGNATURE])
    for name in (*FILES, MANIFEST):
        assert (work_dir / "dl" / name).read_bytes() == (d / name).read_bytes(), name

    older = export_publish(str(work_dir / "ckpt"), 2, str(work_dir / "rel"), 2)
    assert older.step == 2
    assert list_versions(str(work_dir / "rel"), "gpt-debug") == [rel.version, older.version]
    best, skipped = newest_valid(str(work_dir / "rel"), "gpt-debug")
    assert best is not None and best.version == older.version and skipped == []


def test_s3_roundtrip_and_partial_replication(
    info: DistInfo, moto_s3: MotoServer, work_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = moto_s3.client()
    for b in ("ckpt", "artifacts", "replica"):
        s3.create_bucket(Bucket=b)
    params = train_and_save(info, "s3://ckpt/trainer/runs/r1", [3])
    exported = export("s3://ckpt/trainer/runs/r1", 3, "s3://ckpt/trainer/outputs/r1/model")
    assert exported["checkpoint"] == "s3://ckpt/trainer/runs/r1/step_000000003"
    rel = publish("s3://ckpt/trainer/outputs/r1/model", "s3://artifacts", "gpt-debug", step=3, now=at(5))
    assert rel.uri == f"s3://artifacts/release/gpt-debug/{rel.version}"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="artifacts")["Contents"]}
    assert keys == {f"release/gpt-debug/{rel.version}/{n}" for n in (*FILES, MANIFEST, SIGNATURE)}
    assert (
        verify("s3://artifacts", "gpt-debug", rel.version).source.uri == "s3://ckpt/trainer/outputs/r1/model/"
    )
    download("s3://artifacts", "gpt-debug", rel.version, work_dir / "dl")
    assert_holds(work_dir / "dl", params[3])

    # Replication copies objects one by one, in any order: the manifest can arrive first.
    prefix = f"release/gpt-debug/{rel.version}/"

    def copy(name: str, body: bytes | None = None) -> None:
        if body is None:
            body = s3.get_object(Bucket="artifacts", Key=prefix + name)["Body"].read()
        s3.put_object(Bucket="replica", Key=prefix + name, Body=body)

    copy(MANIFEST)
    with pytest.raises(ReleaseError, match=r"no manifest.json.sig: unsigned release"):
        verify("s3://replica", "gpt-debug", rel.version)
    copy(SIGNATURE)
    with pytest.raises(ReleaseError, match=r"incomplete: .* missing"):
        verify("s3://replica", "gpt-debug", rel.version)
    for name in FILES:
        if name != WEIGHTS:
            copy(name)
    weights = s3.get_object(Bucket="artifacts", Key=prefix + WEIGHTS)["Body"].read()
    copy(WEIGHTS, weights[: len(weights) // 2])
    with pytest.raises(ReleaseError, match=rf"incomplete: {WEIGHTS} has \d+ bytes, manifest.json says"):
        verify("s3://replica", "gpt-debug", rel.version)
    assert newest_valid("s3://replica", "gpt-debug")[0] is None
    copy(WEIGHTS)
    assert verify("s3://replica", "gpt-debug", rel.version).version == rel.version

    # An outage is not a broken release: it is reported as such, and newest_valid does not skip past it.
    moto_s3.stop()
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto3's retries would only make this slower
    with pytest.raises(StoreUnavailable, match="did not answer"):
        newest_valid("s3://replica", "gpt-debug")


@pytest.fixture()
def published(info: DistInfo, work_dir: Path) -> tuple[Path, str]:
    train_and_save(info, str(work_dir / "ckpt"), [2])
    rel = export_publish(str(work_dir / "ckpt"), None, str(work_dir / "rel"), 1)
    return work_dir / "rel", rel.version


def rewrite_manifest(d: Path, change: Any, *, sign: bool = True) -> None:
    """Change the manifest; ``sign``: sign it again with the release key (what a publisher with a bug would
    write, so the checks after the signature's are reached), else leave the old signature."""
    m = json.loads((d / MANIFEST).read_text())
    raw = json.dumps(change(m)).encode()
    (d / MANIFEST).write_bytes(raw)
    if sign:
        (d / SIGNATURE).write_bytes(signer_for(None).sign(raw))


def test_manifest_changed_after_signing_is_refused_before_any_file_is_read(
    published: tuple[Path, str],
) -> None:
    root, version = published
    d = version_dir(root, version)
    # Right hashes, different content: only the signature tells.
    rewrite_manifest(d, lambda m: {**m, "source": {**m["source"], "team": "someone"}}, sign=False)
    (d / WEIGHTS).unlink()  # never reached: the signature is checked first
    with pytest.raises(
        ReleaseError, match="manifest.json: signature does not verify with the release signing"
    ):
        verify(str(root), "gpt-debug", version)
    (d / SIGNATURE).write_bytes(b"not a signature")
    with pytest.raises(ReleaseError, match="signature does not verify|signature is malformed"):
        verify(str(root), "gpt-debug", version)
    (d / SIGNATURE).unlink()
    with pytest.raises(ReleaseError, match="no manifest.json.sig: unsigned release"):
        verify(str(root), "gpt-debug", version)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: [m], "must be a JSON object"),
        (lambda m: {**m, "files": list(m["files"])}, "files must be an object"),
        (lambda m: {**m, "files": {**m["files"], WEIGHTS: "abc"}}, f"files.{WEIGHTS} must be an object"),
        (lambda m: {**m, "files": {**m["files"], CONFIG: {"size": "1", "sha256": "0" * 64}}}, "size must"),
        (lambda m: {**m, "files": {**m["files"], CONFIG: {"size": 1, "sha256": "xyz"}}}, "64 hex digits"),
        (lambda m: {**m, "files": {CONFIG: m["files"][CONFIG]}}, r"files: no \*.safetensors weights"),
        (lambda m: {**m, "files": {**m["files"], "x.bin": m["files"][CONFIG]}}, "x.bin: a pickle-bearing"),
        (lambda m: {**m, "source": {**m["source"], "step": "2"}}, "source.step must be"),
        (lambda m: {**m, "source": {**m["source"], "step": 7}}, "not the version's step"),
        (lambda m: {**m, "source": {**m["source"], "team": "Bad Team"}}, "source.team must be null or"),
        (lambda m: {**m, "source": None}, "source must be an object"),
        (lambda m: {**m, "format": "v0"}, "format 'v0'"),
        (lambda m: {**m, "version": "20260101T000000Z-step2"}, "not the folder's"),
        (lambda m: {**m, "serving": {**m["serving"], "layers": "2"}}, "serving.layers must be a positive"),
        (lambda m: {**m, "serving": None}, "serving must be an object"),
    ],
    ids=["list", "files-list", "entry-str", "size-str", "sha-bad", "no-weights", "pickle", "step-str",
         "step-other", "team", "source-null", "format", "version", "serving-layers", "serving-null"],
)  # fmt: skip
def test_manifest_with_wrong_types_is_a_reason_not_a_crash(
    published: tuple[Path, str], change: Any, reason: str
) -> None:
    root, version = published
    rewrite_manifest(version_dir(root, version), change)
    with pytest.raises(ReleaseError, match=reason):
        verify(str(root), "gpt-debug", version)


def test_corrupt_missing_and_mismatched_files(published: tuple[Path, str]) -> None:
    root, version = published
    d = version_dir(root, version)
    raw = bytearray((d / WEIGHTS).read_bytes())
    raw[-5] ^= 0x01  # one bit in the last tensor, same size
    (d / WEIGHTS).write_bytes(bytes(raw))
    with pytest.raises(ReleaseError, match=f"{WEIGHTS}: sha256 does not match"):
        verify(str(root), "gpt-debug", version)
    raw[-5] ^= 0x01
    (d / WEIGHTS).write_bytes(bytes(raw))
    assert verify(str(root), "gpt-debug", version)

    # A config.json that does not describe the weights, with a manifest that agrees with the bytes.
    original = (d / CONFIG).read_bytes()
    cfg = json.loads(original)
    cfg["n_embd"] = 64
    (d / CONFIG).write_text(json.dumps(cfg))
    import hashlib

    def refile(name: str) -> Callable[[dict], dict]:
        """A manifest that agrees with the bytes now in ``name``."""

        def change(m: dict) -> dict:
            body = (d / name).read_bytes()
            m["files"][name] = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
            return m

        return change

    rewrite_manifest(d, refile(CONFIG))
    with pytest.raises(
        ReleaseError,
        # the reader's generic check (the full one is the publisher's, before it signs)
        match=r"config.json \(GPT2LMHeadModel\): no embedding of shape \[257, 64\]",
    ):
        verify(str(root), "gpt-debug", version)
    cfg["architectures"] = ["FooForCausalLM"]
    (d / CONFIG).write_text(json.dumps(cfg))
    rewrite_manifest(d, refile(CONFIG))
    with pytest.raises(ReleaseError, match=r"config.json: architectures: 'FooForCausalLM' is not an"):
        verify(str(root), "gpt-debug", version)
    # Files that pass but are not what the manifest signed (a publisher with a bug, or a swapped config).
    (d / CONFIG).write_bytes(original)
    rewrite_manifest(d, lambda m: {**refile(CONFIG)(m), "serving": {**m["serving"], "chat_template": True}})
    with pytest.raises(
        ReleaseError, match=r"do not give the serving facts manifest.json signed \(chat_template\)"
    ):
        verify(str(root), "gpt-debug", version)
    rewrite_manifest(d, lambda m: {**m, "serving": {**m["serving"], "chat_template": False}})
    # Every JSON file is parsed once its bytes matched the manifest.
    (d / CONFIG).write_bytes(original)
    (d / TOKENIZER).write_text("[]")
    rewrite_manifest(d, refile(CONFIG))
    rewrite_manifest(d, refile(TOKENIZER))
    with pytest.raises(ReleaseError, match=f"{TOKENIZER} must be a JSON object"):
        verify(str(root), "gpt-debug", version)

    (d / CONFIG).unlink()
    with pytest.raises(ReleaseError, match=f"incomplete: {CONFIG} missing"):
        verify(str(root), "gpt-debug", version)
    (d / MANIFEST).unlink()
    with pytest.raises(ReleaseError, match="no manifest.json"):
        verify(str(root), "gpt-debug", version)


def test_newest_valid_skips_broken_newer_versions(info: DistInfo, work_dir: Path) -> None:
    train_and_save(info, str(work_dir / "ckpt"), [1, 2, 3])
    root = str(work_dir / "rel")
    good = export_publish(str(work_dir / "ckpt"), 1, root, 1)
    short = export_publish(str(work_dir / "ckpt"), 2, root, 2)
    flipped = export_publish(str(work_dir / "ckpt"), 3, root, 3)
    w = version_dir(work_dir / "rel", short.version) / WEIGHTS
    w.write_bytes(w.read_bytes()[:100])
    w = version_dir(work_dir / "rel", flipped.version) / WEIGHTS
    raw = bytearray(w.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    w.write_bytes(bytes(raw))
    unfinished = version_dir(work_dir / "rel", "20261130T100400Z-step9")
    unfinished.mkdir()
    (unfinished / CONFIG).write_text("{}")
    (work_dir / "rel/release/gpt-debug/not-a-version").mkdir()

    assert list_versions(root, "gpt-debug") == [
        good.version,
        short.version,
        flipped.version,
        "20261130T100400Z-step9",
    ]
    best, skipped = newest_valid(root, "gpt-debug")
    assert best is not None and best.version == good.version and best.step == 1
    assert [v for v, _ in skipped] == ["20261130T100400Z-step9", flipped.version, short.version]
    assert "no manifest.json" in skipped[0][1]
    assert "sha256 does not match" in skipped[1][1]
    assert "incomplete" in skipped[2][1]
    assert newest_valid(root, "other-model") == (None, [])


def test_export_refuses_uncommitted_checkpoints_and_used_folders(info: DistInfo, work_dir: Path) -> None:
    train_and_save(info, str(work_dir / "ckpt"), [2])
    leftover = work_dir / "ckpt" / step_dir_name(5)
    leftover.mkdir()
    (leftover / "__0_0.distcp").write_bytes(b"partial")
    out = str(work_dir / "out")
    with pytest.raises(BadInput, match="step_000000005 is not a committed checkpoint: no manifest.json"):
        export(str(work_dir / "ckpt"), 5, out)
    with pytest.raises(BadInput, match="no checkpoint for step 7"):
        export(str(work_dir / "ckpt"), 7, out)
    with pytest.raises(BadInput, match="no committed checkpoint"):
        export(str(work_dir / "empty"), None, out)
    with pytest.raises(BadInput, match="not under release/"):
        export(str(work_dir / "ckpt"), None, str(work_dir / "rel" / "release" / "x"))
    # The newest folder is partial: exporting without --step falls back to the newest committed one.
    assert export(str(work_dir / "ckpt"), None, out)["step"] == 2
    with pytest.raises(BadInput, match=r"already holds \['config.json', 'generation_config.json'"):
        export(str(work_dir / "ckpt"), None, out)
    with pytest.raises(BadInput, match="--model-name='GPT/x'"):
        publish(out, str(work_dir / "rel"), "GPT/x")
    # A checkpoint is not a release input: the publisher refuses it by its file names alone.
    with pytest.raises(BadInput, match=r"/.metadata: part of a torch.distributed.checkpoint"):
        publish(str(work_dir / "ckpt" / step_dir_name(2)), str(work_dir / "rel"), "gpt-debug")
    assert not (work_dir / "rel").exists()


def test_export_reads_and_lists_the_checkpoint_once(
    info: DistInfo, work_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validating the checkpoint yields the manifest the export uses: no second read and listing of it."""
    train_and_save(info, str(work_dir / "ckpt"), [2])
    calls: list[tuple[str, int]] = []
    for method in ("read_bytes", "list_files"):
        real = getattr(LocalStore, method)

        def counted(self: LocalStore, *a: Any, _m: str = method, _real: Any = real, **kw: Any) -> Any:
            calls.append((_m, a[0]))  # (method, step)
            return _real(self, *a, **kw)

        monkeypatch.setattr(LocalStore, method, counted)
    assert export(str(work_dir / "ckpt"), None, str(work_dir / "out"))["step"] == 2
    assert sorted(calls) == [("list_files", 2), ("read_bytes", 2)]


def test_export_and_publish_cli_exit_codes(
    info: DistInfo, work_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train_and_save(info, str(work_dir / "ckpt"), [2])

    def cli(module: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", module, *args],
            cwd=REPO,
            env=base_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = str(work_dir / "out")
    ok = cli("trainer.export.hf", "--checkpoint", str(work_dir / "ckpt"), "--output", out)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["step"] == 2
    ok = cli("trainer.release.publish", "--from", out, "--step", "2", "--release-root", str(work_dir / "rel"),
             "--model-name", "gpt-debug")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    published = json.loads(ok.stdout)
    assert published["step"] == 2 and published["published"].endswith(published["version"])
    assert (published["architecture"], published["dtype"]) == ("GPT2LMHeadModel", "float32")
    assert verify(str(work_dir / "rel"), "gpt-debug", published["version"])
    # Refusals, through the same entry points in this process: exit 2, one line, no traceback.
    for main, args, first in (
        (export_main, ["--checkpoint", str(work_dir / "ckpt"), "--step", "9", "--output", out + "2"],
         "error: no checkpoint for step 9"),
        (publish_main, ["--from", str(work_dir / "ckpt"), "--release-root", str(work_dir / "rel"),
                        "--model-name", "gpt-debug"], "/.metadata: part of a torch.distributed"),
    ):  # fmt: skip
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [err.strip()], err
        assert err.startswith("error: ") and first in err, err


def test_publish_from_a_trainer_checkpoint(
    make_trainer: Callable[..., Trainer], work_dir: Path, shards_dir: Path
) -> None:
    """The trainer's own checkpoint (full state, run id, metrics, tokenizer) exports, publishes and loads
    back."""
    t = make_trainer(train__steps=3, checkpoint__interval=3, train__run_id="gpt-run-7")
    assert t.run() == 0
    done = export(str(work_dir / "ckpt"), None, str(work_dir / "out"))
    assert (done["run_id"], done["step"]) == ("gpt-run-7", 3)
    rel = publish(str(work_dir / "out"), str(work_dir / "rel"), "gpt-debug", step=3, now=at(9))
    assert rel.step == 3 and rel.serving is not None and rel.serving.vocab_size == 257
    download(str(work_dir / "rel"), "gpt-debug", rel.version, work_dir / "dl")
    assert_holds(work_dir / "dl", t.raw_model.state_dict())


def test_releases_of_the_gpt2_format_stay_readable(published: tuple[Path, str]) -> None:
    """A release as the GPT-2-only publisher wrote it (format aiplat-release-v2: the five files, source =
    run id, checkpoint URI, step, the trainer's metrics) still verifies and downloads; its serving facts
    come from its files."""
    root, version = published
    d = version_dir(root, version)

    def as_v2(m: dict) -> dict:
        return {
            "format": "aiplat-release-v2",
            "model_name": m["model_name"],
            "version": m["version"],
            "created_utc": m["created_utc"],
            "files": m["files"],
            "source": {"run_id": "job-test", "checkpoint_uri": "/ckpt/step_000000002", "step": 2},
            "metrics": {"step": 2, "loss": 3.5},
            "tokenizer": {"tokenizer": "bytes", "vocab_size": 257, "eot_token": 256},
        }

    rewrite_manifest(d, as_v2)
    rel = verify(str(root), "gpt-debug", version)
    assert (rel.format, rel.source.run_id, rel.metrics) == (
        "aiplat-release-v2",
        "job-test",
        {"step": 2, "loss": 3.5},
    )
    assert rel.serving is not None and rel.serving.architecture == "GPT2LMHeadModel"
    rewrite_manifest(d, lambda m: {**m, "files": {**m["files"], "vocab.json": m["files"][CONFIG]}})
    with pytest.raises(ReleaseError, match="files must be exactly config.json"):
        verify(str(root), "gpt-debug", version)
