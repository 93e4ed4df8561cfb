"""Create-only uploads (trainer/storage/blobstore.py) over a moto S3 server: what the release path's bucket
policy
requires (If-None-Match on PutObject and on CompleteMultipartUpload). A second upload of the same key is
refused with BlobExists and leaves the first object as it was, for single and multipart uploads."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.errors import BlobExists
from trainer.storage import blobstore
from trainer.storage.blobstore import open_blobs
from trainer.tools.moto_server import MotoServer

PART = 5 << 20  # S3's smallest part size (all parts but the last)


@pytest.mark.parametrize("size", [1000, 2 * PART + 123], ids=["single", "multipart"])
def test_create_only_upload_never_replaces(
    moto_s3: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(blobstore, "MULTIPART_PART", PART)
    s3 = moto_s3.client()
    s3.create_bucket(Bucket="artifacts")
    calls: list[tuple[str, dict]] = []
    store = open_blobs("s3://artifacts/release/m/v1")
    store.client.meta.events.register(
        "provide-client-params.s3.*", lambda params, model, **_: calls.append((model.name, dict(params)))
    )
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_bytes(b"a" * size)
    second.write_bytes(b"b" * size)
    store.upload("model.safetensors", first, create_only=True)
    with pytest.raises(BlobExists):
        store.upload("model.safetensors", second, create_only=True)
    body = s3.get_object(Bucket="artifacts", Key="release/m/v1/model.safetensors")["Body"].read()
    assert body == first.read_bytes()
    creating = [
        (op, p.get("IfNoneMatch")) for op, p in calls if op in ("PutObject", "CompleteMultipartUpload")
    ]
    want = "PutObject" if size <= PART else "CompleteMultipartUpload"
    assert creating == [(want, "*"), (want, "*")]
    # the refused multipart upload was aborted, not left to the lifecycle rule
    assert s3.list_multipart_uploads(Bucket="artifacts").get("Uploads", []) == []


def test_local_create_only_upload_never_replaces(tmp_path: Path) -> None:
    store = open_blobs(str(tmp_path / "root"))
    src = tmp_path / "w"
    src.write_bytes(b"one")
    store.upload("w", src, create_only=True)
    src.write_bytes(b"two")
    with pytest.raises(BlobExists):
        store.upload("w", src, create_only=True)
    assert (tmp_path / "root" / "w").read_bytes() == b"one"
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["w"]  # no temporary file left
