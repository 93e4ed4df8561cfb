"""Where checkpoints live: a local directory or ``s3://bucket/prefix``.

Each checkpoint is a folder ``step_XXXXXXXXX/`` with DCP's files (``__<rank>_<n>.distcp``, ``.metadata``)
and our ``manifest.json``. DCP data goes through ``torch.distributed.checkpoint`` storage writers/readers
(``FileSystemWriter`` or ``s3torchconnector.dcp.S3StorageWriter``); listing, small objects and deletes go
through the filesystem or boto3.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter, StorageReader, StorageWriter

from trainer.data import split_s3_uri

STEP_RE = re.compile(r"^step_(\d{9})$")


def step_dir_name(step: int) -> str:
    """Folder name of the checkpoint taken after ``step`` optimizer steps."""
    return f"step_{step:09d}"


class _HashingStream:
    """Write-through proxy that hashes and counts the bytes DCP writes (read back never needed)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._h = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        mv = memoryview(data).cast("B")
        self._h.update(mv)
        self.size += mv.nbytes
        n = self._inner.write(data)
        return mv.nbytes if n is None else n

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:  # tell, flush, close, fileno, ...
        return getattr(self._inner, name)


class HashingFS:
    """Wraps a DCP filesystem (``FileSystem`` or ``S3FileSystem``) and records ``{file: (size, sha256)}``
    for every file written, so the manifest gets checksums without reading the checkpoint back."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.files: dict[str, tuple[int, str]] = {}

    @contextlib.contextmanager
    def create_stream(self, path: Any, mode: str) -> Iterator[Any]:
        if mode != "wb":
            with self._inner.create_stream(path, mode) as s:
                yield s
            return
        with self._inner.create_stream(path, mode) as s:
            hs = _HashingStream(s)
            yield hs
        # Recorded only after the inner stream closed without error (for S3: the upload completed).
        with self._lock:
            self.files[_basename(path)] = (hs.size, hs.hexdigest())

    def rename(self, path: Any, new_path: Any) -> None:
        self._inner.rename(path, new_path)
        with self._lock:
            if _basename(path) in self.files:
                self.files[_basename(new_path)] = self.files.pop(_basename(path))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _basename(path: Any) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1]


class LocalStore:
    """Checkpoints in a local or shared directory (FSx for Lustre, EFS, NVMe for tests)."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def uri(self, step: int) -> str:
        """Location of one checkpoint."""
        return str(self.root / step_dir_name(step))

    def list_steps(self) -> list[int]:
        """Steps that have a checkpoint folder (committed or not), ascending."""
        if not self.root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.root.iterdir() if (m := STEP_RE.match(p.name)))

    def list_files(self, step: int) -> dict[str, int]:
        """``{file name: size}`` inside one checkpoint."""
        d = self.root / step_dir_name(step)
        return {p.name: p.stat().st_size for p in d.iterdir() if p.is_file()} if d.is_dir() else {}

    def read_bytes(self, step: int, name: str) -> bytes:
        """Whole small file (manifest)."""
        return (self.root / step_dir_name(step) / name).read_bytes()

    def sha256(self, step: int, name: str) -> str:
        """Hex sha256 of one file, streamed."""
        h = hashlib.sha256()
        with open(self.root / step_dir_name(step) / name, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
        return h.hexdigest()

    def write_bytes(self, step: int, name: str, data: bytes) -> None:
        """Atomic write: temp file, fsync, rename, so a crash never leaves half a manifest."""
        d = self.root / step_dir_name(step)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{name}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / name)

    def delete(self, step: int) -> None:
        """Remove one checkpoint folder."""
        shutil.rmtree(self.root / step_dir_name(step), ignore_errors=True)

    def writer(self, step: int) -> tuple[StorageWriter, HashingFS]:
        """DCP writer for ``step`` plus the hashing wrapper that records what it wrote."""
        w = FileSystemWriter(self.uri(step), sync_files=True, thread_count=1)
        hfs = HashingFS(w.fs)
        w.fs = hfs  # type: ignore[assignment]
        return w, hfs

    def reader(self, step: int) -> StorageReader:
        """DCP reader for ``step``."""
        return FileSystemReader(self.uri(step))


class S3Store:
    """Checkpoints in S3 through the S3 connector for PyTorch (AWS CRT client), which reaches MinIO or
    moto when an endpoint is set; path-style addressing is forced then because such endpoints have no
    per-bucket DNS names (https://github.com/awslabs/s3-connector-for-pytorch)."""

    def __init__(self, root: str, region: str = "", endpoint: str = "", max_attempts: int = 10) -> None:
        from s3torchconnector import S3ClientConfig

        self.root = root.rstrip("/")
        self.bucket, self.prefix = split_s3_uri(self.root)
        self.region = (
            region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        )
        self.endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL", "")
        self.client_config = S3ClientConfig(force_path_style=bool(self.endpoint), max_attempts=max_attempts)
        self.max_attempts = max_attempts
        self._boto = None

    @property
    def boto(self) -> Any:
        """boto3 S3 client for listing, small objects and deletes (same endpoint and retry budget)."""
        if self._boto is None:
            import boto3
            from botocore.config import Config

            self._boto = boto3.client(
                "s3",
                region_name=self.region,
                endpoint_url=self.endpoint or None,
                config=Config(
                    retries={"max_attempts": self.max_attempts, "mode": "standard"},
                    connect_timeout=5,
                    read_timeout=60,
                ),
            )
        return self._boto

    def _key(self, step: int, name: str = "") -> str:
        parts = [p for p in (self.prefix, step_dir_name(step), name) if p]
        return "/".join(parts)

    def uri(self, step: int) -> str:
        """Location of one checkpoint."""
        return f"s3://{self.bucket}/{self._key(step)}"

    def list_steps(self) -> list[int]:
        """Steps that have objects under ``prefix/step_*/``, ascending."""
        base = f"{self.prefix}/" if self.prefix else ""
        steps = set()
        for page in self.boto.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=base, Delimiter="/"
        ):
            for cp in page.get("CommonPrefixes", []):
                if m := STEP_RE.match(cp["Prefix"][len(base) :].rstrip("/")):
                    steps.add(int(m.group(1)))
        return sorted(steps)

    def list_files(self, step: int) -> dict[str, int]:
        """``{file name: size}`` inside one checkpoint."""
        base = self._key(step) + "/"
        out = {}
        for page in self.boto.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            for obj in page.get("Contents", []):
                out[obj["Key"][len(base) :]] = int(obj["Size"])
        return out

    def read_bytes(self, step: int, name: str) -> bytes:
        """Whole small object (manifest)."""
        return self.boto.get_object(Bucket=self.bucket, Key=self._key(step, name))["Body"].read()

    def sha256(self, step: int, name: str) -> str:
        """Hex sha256 of one object, streamed."""
        h = hashlib.sha256()
        body = self.boto.get_object(Bucket=self.bucket, Key=self._key(step, name))["Body"]
        for block in iter(lambda: body.read(1 << 22), b""):
            h.update(block)
        return h.hexdigest()

    def write_bytes(self, step: int, name: str, data: bytes) -> None:
        """Single PUT; S3 makes the object visible only once it is complete."""
        self.boto.put_object(Bucket=self.bucket, Key=self._key(step, name), Body=io.BytesIO(data))

    def delete(self, step: int) -> None:
        """Delete every object of one checkpoint (manifest first, so it stops counting at once)."""
        files = self.list_files(step)
        keys = sorted(files, key=lambda n: n != "manifest.json")
        for i in range(0, len(keys), 1000):
            self.boto.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self._key(step, k)} for k in keys[i : i + 1000]], "Quiet": True},
            )

    def _client(self) -> Any:
        from s3torchconnector._s3client import S3Client

        return S3Client(self.region, endpoint=self.endpoint or None, s3client_config=self.client_config)

    def writer(self, step: int) -> tuple[StorageWriter, HashingFS]:
        """``S3StorageWriter`` whose filesystem uses our endpoint and hashes what it writes."""
        from s3torchconnector.dcp import S3StorageWriter
        from s3torchconnector.dcp.s3_file_system import S3FileSystem

        w = S3StorageWriter(self.region, self.uri(step), s3client_config=self.client_config)
        # S3StorageWriter builds its client without an endpoint argument; rebuild the filesystem with one so
        # an explicit checkpoint.s3_endpoint works even when AWS_ENDPOINT_URL is not exported.
        hfs = HashingFS(S3FileSystem(self.region, s3_client=self._client()))
        w.fs = hfs  # type: ignore[assignment]
        return w, hfs

    def reader(self, step: int) -> StorageReader:
        """``S3StorageReader`` on our endpoint."""
        from s3torchconnector import S3ReaderConstructor
        from s3torchconnector.dcp import S3StorageReader
        from s3torchconnector.dcp.s3_file_system import S3FileSystem

        r = S3StorageReader(self.region, self.uri(step), s3client_config=self.client_config)
        r.fs = S3FileSystem(
            self.region, s3_client=self._client(), reader_constructor=S3ReaderConstructor.default()
        )
        r._reader_constructor = S3ReaderConstructor.default()  # plain ranged reads; no range injection needed
        return r


def make_store(
    uri: str, region: str = "", endpoint: str = "", max_attempts: int = 10
) -> LocalStore | S3Store:
    """Store for a checkpoint root URI."""
    if uri.startswith("s3://"):
        return S3Store(uri, region=region, endpoint=endpoint, max_attempts=max_attempts)
    return LocalStore(uri)
