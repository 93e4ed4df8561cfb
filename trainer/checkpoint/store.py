"""Where checkpoints live: a local directory or ``s3://bucket/prefix``.

Each checkpoint is a folder ``step_XXXXXXXXX/`` holding our ``manifest.json`` and one folder per training
attempt with DCP's files (``__<rank>_<n>.distcp``, ``.metadata``; see ``trainer/checkpoint/manifest.py``).
DCP data goes through ``torch.distributed.checkpoint`` storage writers/readers (``FileSystemWriter`` or
``s3torchconnector.dcp.S3StorageWriter``); listing, small objects and deletes go through
:mod:`trainer.storage.blobstore`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterator
from typing import Any

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter, StorageReader, StorageWriter

from trainer.storage.blobstore import Blobs, LocalBlobs, S3Blobs

STEP_RE = re.compile(r"^step_(\d{9})$")


def step_dir_name(step: int) -> str:
    """Folder name of the checkpoint taken after ``step`` optimizer steps."""
    return f"step_{step:09d}"


def data_dir(step: int, attempt: str = "") -> str:
    """Key prefix of DCP's files of one attempt (format v1: the step folder itself)."""
    return f"{step_dir_name(step)}/{attempt}" if attempt else step_dir_name(step)


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


class _StepStore:
    """Checkpoint folders ``step_XXXXXXXXX/`` under a root; small files, listing and deletes go through
    :mod:`trainer.storage.blobstore`, DCP data through the subclass's storage writer and reader."""

    blobs: Blobs

    @property
    def root(self) -> str:
        """The checkpoint root (``checkpoint.uri``)."""
        return self.blobs.uri

    def uri(self, step: int, attempt: str = "") -> str:
        """Location of one checkpoint (or of one attempt's files in it)."""
        return self.blobs.url(data_dir(step, attempt))

    def list_steps(self) -> list[int]:
        """Steps that have a checkpoint folder (committed or not), ascending."""
        return sorted(int(m.group(1)) for d in self.blobs.list_dirs() if (m := STEP_RE.match(d)))

    def list_files(self, step: int, attempt: str = "") -> dict[str, int]:
        """``{file name: size}`` of the files one attempt wrote (``attempt=""``: the step folder's own)."""
        return {k: v for k, v in self.blobs.list(data_dir(step, attempt)).items() if "/" not in k}

    def read_bytes(self, step: int, name: str, attempt: str = "") -> bytes:
        """Whole small file (manifest)."""
        return self.blobs.read(f"{data_dir(step, attempt)}/{name}")

    def sha256(self, step: int, name: str, attempt: str = "") -> str:
        """Hex sha256 of one file, streamed."""
        return self.blobs.sha256(f"{data_dir(step, attempt)}/{name}")

    def write_bytes(self, step: int, name: str, data: bytes, *, create_only: bool = False) -> None:
        """Atomic write of a small file in the step folder: a crash never leaves half a manifest;
        ``create_only`` refuses to replace an existing one (:class:`~trainer.errors.BlobExists`)."""
        self.blobs.write(f"{step_dir_name(step)}/{name}", data, create_only=create_only)

    def delete_file(self, step: int, name: str) -> None:
        """Remove one file of the step folder."""
        self.blobs.delete(f"{step_dir_name(step)}/{name}")

    def delete(self, step: int) -> None:
        """Remove one checkpoint folder (the manifest first on S3, so it stops counting at once)."""
        self.blobs.delete_prefix(step_dir_name(step))


class LocalStore(_StepStore):
    """Checkpoints in a local or shared directory (FSx for Lustre, EFS, NVMe for tests)."""

    def __init__(self, root: str) -> None:
        self.blobs = LocalBlobs(root)

    def writer(self, step: int, attempt: str) -> tuple[StorageWriter, HashingFS]:
        """DCP writer for one attempt's files of ``step`` plus the hashing wrapper recording what it wrote."""
        w = FileSystemWriter(self.uri(step, attempt), sync_files=True, thread_count=1)
        hfs = HashingFS(w.fs)
        w.fs = hfs  # type: ignore[assignment]
        return w, hfs

    def reader(self, step: int, attempt: str) -> StorageReader:
        """DCP reader for one attempt's files of ``step``."""
        return FileSystemReader(self.uri(step, attempt))


class S3Store(_StepStore):
    """Checkpoints in S3 through the S3 connector for PyTorch (AWS CRT client), which reaches MinIO or
    moto when an endpoint is set; path-style addressing is forced then because such endpoints have no
    per-bucket DNS names (https://github.com/awslabs/s3-connector-for-pytorch)."""

    def __init__(self, root: str, region: str = "", endpoint: str = "", max_attempts: int = 10) -> None:
        from s3torchconnector import S3ClientConfig

        self.blobs = S3Blobs(root, region=region, endpoint=endpoint, max_attempts=max_attempts)
        self.region = self.blobs.region
        self.endpoint = self.blobs.endpoint
        self.client_config = S3ClientConfig(force_path_style=bool(self.endpoint), max_attempts=max_attempts)

    def _client(self) -> Any:
        from s3torchconnector._s3client import S3Client

        return S3Client(self.region, endpoint=self.endpoint or None, s3client_config=self.client_config)

    def writer(self, step: int, attempt: str) -> tuple[StorageWriter, HashingFS]:
        """``S3StorageWriter`` whose filesystem uses our endpoint and hashes what it writes."""
        from s3torchconnector.dcp import S3StorageWriter
        from s3torchconnector.dcp.s3_file_system import S3FileSystem

        w = S3StorageWriter(self.region, self.uri(step, attempt), s3client_config=self.client_config)
        # S3StorageWriter builds its client without an endpoint argument; rebuild the filesystem with one so
        # an explicit checkpoint.s3_endpoint works even when AWS_ENDPOINT_URL is not exported.
        hfs = HashingFS(S3FileSystem(self.region, s3_client=self._client()))
        w.fs = hfs  # type: ignore[assignment]
        return w, hfs

    def reader(self, step: int, attempt: str) -> StorageReader:
        """``S3StorageReader`` on our endpoint."""
        from s3torchconnector import S3ReaderConstructor
        from s3torchconnector.dcp import S3StorageReader
        from s3torchconnector.dcp.s3_file_system import S3FileSystem

        r = S3StorageReader(self.region, self.uri(step, attempt), s3client_config=self.client_config)
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
