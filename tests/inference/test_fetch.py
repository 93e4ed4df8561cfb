"""The release fetch tool (``python -m inference.fetch``, contract C1), run as the image runs it (no torch):
end to end on CPU, train, publish, replicate over moto, fetch into a folder and generate from it with
transformers the trainer model's greedy text; missing, partial and corrupt releases and an unreachable store
end it with one line and the right exit code, and never leave a folder behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel

from inference.fetch import LOCAL, RELEASE, STORE
from tests.inference.conftest import (
    MODEL,
    REPO,
    Publisher,
    child_env,
    corrupt_release,
    run_fetch,
    train,
    version_dir,
)
from tests.support.release_keys import write_key_pair
from trainer.checkpoint.checkpointer import open_committed
from trainer.config import ModelConfig
from trainer.release.manifest import FILES, MANIFEST, SIGNATURE, TOKENIZER, WEIGHTS
from trainer.release.signing import PUBLIC_KEY_ENV, LocalSigner
from trainer.tools.moto_server import MotoServer
from trainer.training.model import GPT

pytestmark = pytest.mark.slow  # child processes and a moto server: left out of `make test-fast`


def replicate(
    s3: Any, src: str, dst: str, version: str, only: tuple[str, ...] = (), corrupt: str = ""
) -> None:
    """What S3 replication of release/ does, one object at a time (the manifest last here); ``only`` copies
    just those files (a replication still under way), ``corrupt`` damages one file's bytes on the way."""
    prefix = f"release/{MODEL}/{version}/"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=src, Prefix=prefix)["Contents"])
    keys.sort(key=lambda k: k.endswith(MANIFEST))
    for key in keys:
        name = key.rsplit("/", 1)[1]
        if only and name not in only:
            continue
        body = bytearray(s3.get_object(Bucket=src, Key=key)["Body"].read())
        if corrupt and name == corrupt:
            body[len(body) // 2] ^= 0xFF
        s3.put_object(Bucket=dst, Key=key, Body=bytes(body))


def assert_failed(
    r: subprocess.CompletedProcess[str], code: int, version: str, reason: str, model: str = MODEL
) -> None:
    """Exit ``code``, exactly one stderr line naming the release and the reason, no traceback."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"release {model}/{version}: "), lines[0]
    assert reason in lines[0], lines[0]


def nothing_left(parent: Path) -> None:
    """No destination and no temporary folder: the parent is as empty as before."""
    assert sorted(p.name for p in parent.iterdir()) == []


def greedy(model: GPT, prompt: list[int], n: int, vocab: int, eot: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model.logits(torch.tensor([ids]))[0, -1, :vocab].argmax())
            ids.append(nxt)
            if nxt == eot:
                break
    return ids[len(prompt) :]


def export_and_publish(checkpoint: str, step: int, folder: str) -> str:
    """The two CLIs as their jobs run them; returns the version published."""
    for module, args in (
        ("trainer.export.hf", ["--checkpoint", checkpoint, "--step", str(step), "--output", folder]),
        ("trainer.release.publish", ["--from", folder, "--step", str(step), "--release-root", "s3://us-artifacts",
                             "--model-name", MODEL]),
    ):  # fmt: skip
        r = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["version"]


def test_train_publish_replicate_fetch_generate(moto_s3: MotoServer, work: Path, image_site: Path) -> None:
    s3 = moto_s3.client()
    for bucket in ("us-ckpt", "us-artifacts", "hk-models"):
        s3.create_bucket(Bucket=bucket)
    # 1. Train 4 steps in the "US" (checkpoints at steps 2 and 4, on S3); export step 2 with the trainer's
    #    CLI into its outputs, publish that folder with the publisher's.
    train(work, "s3://us-ckpt/trainer/runs/e2e", steps=4, interval=2)
    v1 = export_and_publish("s3://us-ckpt/trainer/runs/e2e", 2, "s3://us-ckpt/trainer/outputs/e2e-2/model")
    # 2. Replication brings release/ to the inference region; the tool reads only that bucket.
    replicate(s3, "us-artifacts", "hk-models", v1)
    models = work / "models"
    models.mkdir()
    dest = models / "current"
    r = run_fetch(
        image_site, "--root", "s3://hk-models", "--model", MODEL, "--version", v1, "--dest", str(dest)
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == v1 and r.stderr == ""
    assert sorted(p.name for p in models.iterdir()) == ["current"]  # no temporary folder beside it
    assert sorted(p.name for p in dest.iterdir()) == sorted([*FILES, MANIFEST, SIGNATURE])

    # 3. transformers generates from that folder the trainer model's greedy text (the weights of step 2).
    ck = open_committed("s3://us-ckpt/trainer/runs/e2e", 2)
    cfg = ModelConfig(**ck.manifest.config["model"])
    model = GPT(cfg)
    model.load_state_dict(ck.load_model_weights(model))
    model.eval()
    hf = GPT2LMHeadModel.from_pretrained(dest).eval()
    tok = AutoTokenizer.from_pretrained(dest)
    for prompt in ("the quick", "über 🎉"):
        ids = tok(prompt).input_ids
        want = greedy(model, ids, 16, hf.config.vocab_size, tok.eos_token_id)
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :].tolist()
        assert out == want, prompt
        assert tok.decode(out, skip_special_tokens=True) == tok.decode(want, skip_special_tokens=True)

    # 4. A newer release that arrives corrupt: asked for by name it fails with one line and leaves nothing;
    #    `latest` skips it and resolves to the newest version that verifies, replacing the folder.
    v2 = export_and_publish("s3://us-ckpt/trainer/runs/e2e", 4, "s3://us-ckpt/trainer/outputs/e2e-4/model")
    replicate(s3, "us-artifacts", "hk-models", v2, corrupt=WEIGHTS)
    empty = work / "empty"
    empty.mkdir()
    r = run_fetch(image_site, "--root", "s3://hk-models", "--model", MODEL, "--version", v2,
                  "--dest", str(empty / "m"))  # fmt: skip
    assert_failed(r, RELEASE, v2, f"{WEIGHTS}: sha256 does not match {MANIFEST}")
    nothing_left(empty)
    (dest / WEIGHTS).write_bytes(b"left from an earlier run")
    r = run_fetch(image_site, "--root", "s3://hk-models", "--model", MODEL, "--version", "latest",
                  "--dest", str(dest))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"skipped {MODEL}/{v2}: {WEIGHTS}: sha256 does not match" in r.stdout
    assert r.stdout.splitlines()[-1] == v1
    assert sorted(p.name for p in models.iterdir()) == ["current"]
    assert GPT2LMHeadModel.from_pretrained(dest).config.n_embd == cfg.d_model  # the whole release again

    # 5. Replication still under way (manifest and tokenizer copied, no weights yet): one line, nothing left.
    s3.create_bucket(Bucket="sg-models")
    replicate(s3, "us-artifacts", "sg-models", v1, only=(TOKENIZER, MANIFEST, SIGNATURE))
    r = run_fetch(image_site, "--root", "s3://sg-models", "--model", MODEL, "--version", v1,
                  "--dest", str(empty / "m"))  # fmt: skip
    assert_failed(r, RELEASE, v1, "incomplete: ")
    nothing_left(empty)
    never = "20260101T000000Z-step1"
    r = run_fetch(image_site, "--root", "s3://sg-models", "--model", MODEL, "--version", never,
                  "--dest", str(empty / "m"))  # fmt: skip
    assert_failed(r, RELEASE, never, f"no {MANIFEST}")
    nothing_left(empty)

    # 6. The store does not answer: exit 4, not a release defect.
    moto_s3.stop()
    r = run_fetch(image_site, "--root", "s3://hk-models", "--model", MODEL, "--version", v1,
                  "--dest", str(empty / "m"), env={"AWS_MAX_ATTEMPTS": "1"})  # fmt: skip
    assert_failed(r, STORE, v1, "release store unavailable")
    nothing_left(empty)


def test_local_root_latest_missing_and_bad_arguments(checkpoints: Path, work: Path, image_site: Path) -> None:
    """The same tool on a local release root: ``latest`` with nothing verifiable, a missing model, bad
    arguments and a missing parent folder each end with one line and leave nothing."""
    root = work / "rel"
    publish = Publisher(checkpoints, root)
    bad = publish(2)
    corrupt_release(root, bad.version)
    parent = work / "pod"
    parent.mkdir()
    dest = str(parent / "model")
    r = run_fetch(image_site, "--root", str(root), "--model", MODEL, "--version", "latest", "--dest", dest)
    assert_failed(r, RELEASE, "latest", f"none of the 1 versions verifies (newest {bad.version}: {WEIGHTS}")
    nothing_left(parent)
    good = publish(4)
    (version_dir(root, good.version) / MANIFEST).unlink()  # publishing did not finish
    r = run_fetch(image_site, "--root", str(root), "--model", "other", "--version", "latest", "--dest", dest)
    assert_failed(r, RELEASE, "latest", f"no version under {root}/release/other/", model="other")
    r = run_fetch(
        image_site, "--root", str(root), "--model", "Bad/Name", "--version", "latest", "--dest", dest
    )
    assert_failed(r, RELEASE, "latest", "--model must be", model="Bad/Name")
    r = run_fetch(image_site, "--root", str(root), "--model", MODEL, "--version", "v1", "--dest", dest)
    assert_failed(r, RELEASE, "v1", "--version must be latest or a version folder")
    r = run_fetch(image_site, "--root", str(root), "--model", MODEL, "--version", "latest",
                  "--dest", str(work / "no-such-mount" / "model"))  # fmt: skip
    assert_failed(r, LOCAL, "latest", "is not a directory (mount one)")
    nothing_left(parent)
    # A temporary folder a killed earlier run left is cleaned up; the good release arrives.
    (parent / ".model.fetch-abc123").mkdir()
    (parent / ".model.fetch-abc123" / WEIGHTS).write_bytes(b"half")
    fixed = publish(4)
    r = run_fetch(image_site, "--root", str(root), "--model", MODEL, "--version", "latest", "--dest", dest)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == fixed.version
    assert sorted(p.name for p in parent.iterdir()) == ["model"]
    # Readable by the serving container's user, whoever it is; written by no one else.
    assert (parent / "model").stat().st_mode & 0o777 == 0o755
    assert {(parent / "model" / n).stat().st_mode & 0o777 for n in (*FILES, MANIFEST)} == {0o644}


def test_tampered_or_foreign_signed_release_is_refused_before_any_download(
    checkpoints: Path, work: Path, image_site: Path
) -> None:
    """A manifest changed after signing (its hashes still right), or signed by another key, or not signed:
    exit 3, one line, nothing left; the weights are never fetched (removed here: reaching them would give
    another reason). Without a trusted public key the tool refuses to run (exit 2)."""
    root = work / "rel"
    rel = Publisher(checkpoints, root)(2)
    d = version_dir(root, rel.version)
    parent = work / "pod"
    parent.mkdir()
    dest = str(parent / "model")
    args = ("--root", str(root), "--model", MODEL, "--version", rel.version, "--dest", dest)
    refused = f"{MANIFEST}: signature does not verify with the release signing key"
    manifest = json.loads((d / MANIFEST).read_bytes())
    manifest["source"]["run_id"] = "someone-elses-run"  # every sha256 still matches the files
    tampered = json.dumps(manifest, indent=1).encode()
    (d / MANIFEST).write_bytes(tampered)
    (d / WEIGHTS).unlink()
    r = run_fetch(image_site, *args)
    assert_failed(r, RELEASE, rel.version, refused)
    assert "fetching" in r.stdout and "verified" not in r.stdout
    nothing_left(parent)

    foreign_key, _ = write_key_pair(work / "foreign")
    (d / SIGNATURE).write_bytes(LocalSigner.from_pem_file(foreign_key).sign(tampered))
    r = run_fetch(image_site, *args)
    assert_failed(r, RELEASE, rel.version, refused)
    nothing_left(parent)

    (d / SIGNATURE).unlink()
    r = run_fetch(image_site, *args)
    assert_failed(r, RELEASE, rel.version, f"no {SIGNATURE}: unsigned release")
    nothing_left(parent)

    r = run_fetch(image_site, *args, env={PUBLIC_KEY_ENV: str(work / "no-such-key.pem")})
    assert_failed(r, LOCAL, rel.version, "release public key")
    nothing_left(parent)


def test_sigterm_mid_download_leaves_nothing(
    checkpoints: Path, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kubelet stops an init container with SIGTERM: the half-written folder goes, one line, exit 2."""
    import os
    import signal

    from inference import fetch

    rel = Publisher(checkpoints, work / "rel")(2)
    real = fetch.download

    def interrupted(root: str, model: str, version: str, dest: Path, public_key: Any) -> Any:
        (Path(dest) / "model.safetensors").write_bytes(b"half")
        os.kill(os.getpid(), signal.SIGTERM)
        return real(root, model, version, dest, public_key)

    monkeypatch.setattr(fetch, "download", interrupted)
    parent = work / "pod"
    parent.mkdir()
    argv = [
        "--root",
        str(work / "rel"),
        "--model",
        MODEL,
        "--version",
        rel.version,
        "--dest",
        str(parent / "m"),
    ]
    assert fetch.main(argv) == LOCAL
    err = capsys.readouterr().err.splitlines()
    assert err == [f"release {MODEL}/{rel.version}: stopped by SIGTERM before the release was in place"]
    nothing_left(parent)
    assert signal.getsignal(signal.SIGTERM) is not fetch._on_sigterm  # the handler is put back
