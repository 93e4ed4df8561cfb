"""One small object-store interface over a local directory or ``s3://bucket/prefix`` (boto3).

Checkpoint listing and manifests, dataset downloads, run records and model releases all go through it, so
errors look the same everywhere: a missing key is :class:`BlobNotFound`, a refused request (no bucket,
access denied, no credentials) is :class:`BadInput`, and an endpoint that does not answer (connection
refused, timeouts, 5xx, throttling after boto3's own retries) is :class:`StoreUnavailable`.
boto3 honours ``AWS_ENDPOINT_URL`` (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html),
so the same code reaches MinIO or a local moto server.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from trainer.errors import BadInput, BlobExists, BlobNotFound, StoreUnavailable
from trainer.storage.hashing import MANIFEST, sha256_stream

log = logging.getLogger(__name__)
T = TypeVar("T")
LAST_TRY_S = 1.0  # what a bounded try gets at least (retry_unavailable)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")`` (prefix without leading/trailing slash)."""
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class _HashedReads:
    """Reads both stores serve the same way, on top of their streaming ``open``."""

    def open(self, key: str) -> contextlib.AbstractContextManager[BinaryIO]:
        raise NotImplementedError

    def download(self, key: str, dst: str | os.PathLike[str]) -> tuple[str, int]:
        """Copy ``key`` to a local path while hashing it; returns (sha256, size)."""
        with self.open(key) as src, open(dst, "wb") as out:
            return sha256_stream(src, out.write)

    def current_version(self, key: str) -> str | None:
        """The version id of ``key``'s current version (None: the store keeps no versions)."""
        return None

    def download_version(
        self, key: str, version_id: str | None, dst: str | os.PathLike[str]
    ) -> tuple[str, int]:
        """Copy version ``version_id`` of ``key`` (None: the current one) while hashing it."""
        if version_id is not None:
            raise ValueError(f"{key}: this store keeps no versions")
        return self.download(key, dst)

    def sha256(self, key: str) -> str:
        """Hex sha256 of one file or object, streamed."""
        with self.open(key) as f:
            return sha256_stream(f)[0]


class LocalBlobs(_HashedReads):
    """Keys are paths under a local or shared directory (NVMe, FSx for Lustre, EFS)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def uri(self) -> str:
        """The root this store reads and writes."""
        return str(self.root)

    def url(self, key: str = "") -> str:
        """Location of ``key`` for messages."""
        return str(self.root / key) if key else str(self.root)

    def child(self, prefix: str) -> LocalBlobs:
        """The store rooted at ``prefix`` below this one."""
        return LocalBlobs(self.root / prefix)

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        try:
            yield
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise BlobNotFound(self.url(key)) from exc
        except FileExistsError:
            raise
        except PermissionError as exc:
            raise BadInput(f"{self.url(key)}: permission denied ({exc.strerror})") from exc
        except OSError as exc:  # EIO, ESTALE, ENOSPC...: the filesystem, not the input
            raise StoreUnavailable(f"{self.url(key)}: {exc.strerror or exc}") from exc

    def check(self) -> None:
        """Raise if the store cannot be used (a missing root is fine: it is created on first write)."""
        with self._errors(""):
            if self.root.exists() and not self.root.is_dir():
                raise BadInput(f"{self.root} is not a directory")

    def read(self, key: str) -> bytes:
        """Whole small file."""
        with self._errors(key):
            return (self.root / key).read_bytes()

    def write(self, key: str, data: bytes, *, create_only: bool = False) -> None:
        """Atomic write (temp file, fsync, rename); ``create_only`` fails with :class:`BlobExists` instead of
        replacing (``link`` is atomic and refuses an existing name)."""
        path = self.root / key
        with self._errors(key):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                if create_only:
                    try:
                        os.link(tmp, path)
                    except FileExistsError:
                        raise BlobExists(self.url(key)) from None
                else:
                    os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)

    def upload(self, key: str, path: str | os.PathLike[str], *, create_only: bool = False) -> None:
        """Copy a local file in (temp file, then rename; ``create_only``: link, refusing an existing name)."""
        dst = self.root / key
        with self._errors(key):
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.parent / f".{dst.name}.{os.getpid()}.tmp"
            shutil.copyfile(path, tmp)
            try:
                if create_only:
                    try:
                        os.link(tmp, dst)
                    except FileExistsError:
                        raise BlobExists(self.url(key)) from None
                else:
                    os.replace(tmp, dst)
            finally:
                tmp.unlink(missing_ok=True)

    @contextlib.contextmanager
    def open(self, key: str) -> Iterator[BinaryIO]:
        """Streaming read."""
        with self._errors(key):
            f = open(self.root / key, "rb")  # noqa: SIM115 - closed below
        with f:
            yield f

    def list(self, prefix: str = "") -> dict[str, int]:
        """``{key relative to prefix: size}`` of every file below ``prefix`` (recursive)."""
        base = self.root / prefix
        with self._errors(prefix):
            if not base.is_dir():
                return {}
            return {
                p.relative_to(base).as_posix(): p.stat().st_size
                for p in base.rglob("*")
                if p.is_file() and not p.name.endswith(".tmp")
            }

    def list_dirs(self, prefix: str = "") -> list[str]:
        """Names of the folders directly below ``prefix``, sorted."""
        base = self.root / prefix
        with self._errors(prefix):
            if not base.is_dir():
                return []
            return sorted(p.name for p in base.iterdir() if p.is_dir())

    def delete_prefix(self, prefix: str) -> None:
        """Remove a folder and everything in it (no error if it is gone)."""
        folder = self.root / prefix
        with self._errors(prefix):
            if folder.exists():
                (folder / MANIFEST).unlink(missing_ok=True)  # stops counting first, as on S3
                shutil.rmtree(folder)

    def delete(self, key: str) -> None:
        """Remove one file (no error if it is gone)."""
        with self._errors(key):
            (self.root / key).unlink(missing_ok=True)


# botocore error codes, by what they mean for us.
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
MULTIPART_PART = 64 << 20  # bytes per part of a create-only multipart upload (S3: 5 MiB to 5 GiB)
_EXISTS = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_TRANSIENT = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
              "ServiceUnavailable", "503", "500"}  # fmt: skip


class S3Blobs(_HashedReads):
    """Keys below ``s3://bucket/prefix`` through boto3 (standard retry mode; ``max_attempts`` tries per
    request, 0 = boto3's default or ``AWS_MAX_ATTEMPTS``)."""

    def __init__(
        self, uri: str, *, region: str = "", endpoint: str = "", max_attempts: int = 0, client: Any = None
    ) -> None:
        self.bucket, self.prefix = split_s3_uri(uri)
        self.region = (
            region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        )
        self.endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL", "")
        self.max_attempts = max_attempts
        self._client = client

    @property
    def client(self) -> Any:
        """The boto3 S3 client (created on first use, shared with :meth:`child` stores)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3",
                region_name=self.region,
                endpoint_url=self.endpoint or None,
                config=Config(
                    retries={
                        "mode": "standard",
                        **({"max_attempts": self.max_attempts} if self.max_attempts else {}),
                    },
                    connect_timeout=5,
                    read_timeout=60,
                    # MinIO/moto endpoints have no per-bucket DNS names.
                    s3={"addressing_style": "path"} if self.endpoint else None,
                ),
            )
        return self._client

    @property
    def uri(self) -> str:
        """The root this store reads and writes."""
        return f"s3://{_join(self.bucket, self.prefix)}"

    def url(self, key: str = "") -> str:
        """Location of ``key`` for messages."""
        return f"s3://{_join(self.bucket, self.prefix, key)}"

    def child(self, prefix: str) -> S3Blobs:
        """The store rooted at ``prefix`` below this one (same client)."""
        return S3Blobs(
            f"s3://{_join(self.bucket, self.prefix, prefix)}",
            region=self.region,
            endpoint=self.endpoint,
            max_attempts=self.max_attempts,
            client=self._client,
        )

    def _key(self, key: str) -> str:
        return _join(self.prefix, key)

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, NoCredentialsError

        where = self.url(key)
        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if code in _NOT_FOUND:
                raise BlobNotFound(where) from exc
            if code in _EXISTS:
                raise BlobExists(where) from exc
            if code == "NoSuchBucket":
                raise BadInput(f"{where}: bucket {self.bucket!r} does not exist") from exc
            if code in _TRANSIENT or status >= 500:
                raise StoreUnavailable(f"{where}: {code} {err.get('Message', '')}".strip()) from exc
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
                raise BadInput(
                    f"{where}: {code} (check the pod role / AWS credentials and the bucket policy)"
                ) from exc
            raise BadInput(f"{where}: {code} {err.get('Message', '')}".strip()) from exc
        except NoCredentialsError as exc:
            raise BadInput(
                f"{where}: no AWS credentials (IRSA / Pod Identity, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY)"
            ) from exc
        except (ConnectionError, HTTPClientError) as exc:
            endpoint = self.endpoint or "the AWS S3 endpoint"
            raise StoreUnavailable(f"{where}: {endpoint} did not answer ({type(exc).__name__})") from exc
        except S3UploadFailedError as exc:  # upload_file wraps the ClientError in text only
            text = str(exc)
            if "AccessDenied" in text or "NoSuchBucket" in text:
                raise BadInput(f"{where}: {text}") from exc
            raise StoreUnavailable(f"{where}: {text}") from exc

    def check(self) -> None:
        """One LIST request: raises :class:`BadInput` (no bucket, denied) or :class:`StoreUnavailable`."""
        self._list_page(self.prefix)

    def _list_page(self, prefix: str) -> list[Any]:
        with self._errors(""):
            resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        return resp.get("Contents", [])

    def read(self, key: str) -> bytes:
        """Whole small object."""
        with self._errors(key):
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()

    def write(self, key: str, data: bytes, *, create_only: bool = False) -> None:
        """Single PUT (S3 shows an object only once complete); ``create_only`` sends ``If-None-Match: *``
        (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html)."""
        extra = {"IfNoneMatch": "*"} if create_only else {}
        with self._errors(key):
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=io.BytesIO(data), **extra)

    def upload(self, key: str, path: str | os.PathLike[str], *, create_only: bool = False) -> None:
        """Upload a local file (multipart above boto3's threshold). ``create_only``: ``If-None-Match: *`` on
        the request that creates the object (PutObject, or CompleteMultipartUpload: the part uploads take no
        condition), so an existing object is never replaced (:class:`BlobExists`)."""
        if create_only:
            self._upload_create_only(key, Path(path))
            return
        with self._errors(key):
            self.client.upload_file(str(path), self.bucket, self._key(key))

    def _upload_create_only(self, key: str, path: Path) -> None:
        # boto3's transfer manager does not pass IfNoneMatch to CompleteMultipartUpload (s3transfer's
        # COMPLETE_MULTIPART_ARGS), so the parts go up here, one at a time.
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
        size = path.stat().st_size
        if size <= MULTIPART_PART:
            self.write(key, path.read_bytes(), create_only=True)
            return
        k = self._key(key)
        with self._errors(key):
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=k)["UploadId"]
        try:
            parts = []
            with open(path, "rb") as f:
                for number in range(1, size // MULTIPART_PART + 2):
                    block = f.read(MULTIPART_PART)
                    if not block:
                        break
                    with self._errors(key):
                        etag = self.client.upload_part(
                            Bucket=self.bucket, Key=k, UploadId=upload_id, PartNumber=number, Body=block
                        )["ETag"]
                    parts.append({"PartNumber": number, "ETag": etag})
            with self._errors(key):
                self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=k,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                    IfNoneMatch="*",
                )
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=k, UploadId=upload_id)
            raise

    @contextlib.contextmanager
    def open(self, key: str) -> Iterator[BinaryIO]:
        """Streaming read of one object."""
        with self._errors(key):
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        try:
            with self._errors(key):
                yield body
        finally:
            body.close()

    def current_version(self, key: str) -> str | None:
        """The version id of ``key``'s current version (HeadObject; None on an unversioned bucket)."""
        with self._errors(key):
            version = self.client.head_object(Bucket=self.bucket, Key=self._key(key)).get("VersionId")
        return None if version in (None, "null") else str(version)

    def download_version(
        self, key: str, version_id: str | None, dst: str | os.PathLike[str]
    ) -> tuple[str, int]:
        """Copy version ``version_id`` of ``key`` (GetObject with VersionId; None: the current one) to a local
        path while hashing it; returns (sha256, size)."""
        if version_id is None:
            return self.download(key, dst)
        with self._errors(key):
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key), VersionId=version_id)[
                "Body"
            ]
        try:
            with self._errors(key), open(dst, "wb") as out:
                return sha256_stream(body, out.write)
        finally:
            body.close()

    def list(self, prefix: str = "") -> dict[str, int]:
        """``{key relative to prefix: size}`` of every object below ``prefix``."""
        base = self._key(prefix)
        base = f"{base}/" if base else ""
        out: dict[str, int] = {}
        with self._errors(prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base
            ):
                for obj in page.get("Contents", []):
                    out[obj["Key"][len(base) :]] = int(obj["Size"])
        return out

    def list_dirs(self, prefix: str = "") -> list[str]:
        """Names of the "folders" (common prefixes) directly below ``prefix``, sorted."""
        base = self._key(prefix)
        base = f"{base}/" if base else ""
        names = []
        with self._errors(prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base, Delimiter="/"
            ):
                names += [cp["Prefix"][len(base) :].rstrip("/") for cp in page.get("CommonPrefixes", [])]
        return sorted(names)

    def delete_prefix(self, prefix: str) -> None:
        """Delete every object below ``prefix`` (a manifest first, so the folder stops counting at once)."""
        keys = sorted(self.list(prefix), key=lambda k: not k.endswith(MANIFEST))
        with self._errors(prefix):
            for i in range(0, len(keys), 1000):
                self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": self._key(_join(prefix, k))} for k in keys[i : i + 1000]]},
                )

    def delete(self, key: str) -> None:
        """Delete one object (no error if it is gone)."""
        with self._errors(key):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))


Blobs = LocalBlobs | S3Blobs


def open_blobs(uri: str, *, region: str = "", endpoint: str = "", max_attempts: int = 0) -> Blobs:
    """Store for a local directory or an ``s3://bucket/prefix`` URI."""
    if uri.startswith("s3://"):
        return S3Blobs(uri, region=region, endpoint=endpoint, max_attempts=max_attempts)
    return LocalBlobs(uri)


def call_within(fn: Callable[[], T], timeout_s: float) -> T:
    """``fn()`` on a daemon thread, waited for at most ``timeout_s``; raises :class:`StoreUnavailable` when
    it has not returned by then (its own errors pass through). A store that holds a request answers nothing
    until boto3's read timeout, times its retries (minutes); this bounds the caller, and the thread left
    blocked in a socket does not keep the process alive."""
    box: list[Any] = []
    done = threading.Event()

    def target() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller's thread
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="store-call").start()
    if not done.wait(timeout_s):
        raise StoreUnavailable(f"no answer within {timeout_s:.1f}s (the store holds the request)")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def retry_unavailable(
    fn: Callable[[], T], wait_s: float, what: str, knob: str = "store_wait_s", *, bounded: bool = True
) -> T:
    """Call ``fn``; while it raises :class:`StoreUnavailable`, retry with exponential backoff (0.5 s doubling,
    at most 15 s apart) for up to ``wait_s`` seconds, then raise one :class:`StoreUnavailable` naming
    ``what`` (e.g. ``"data.source=s3://..."``), the time waited and the setting that sets it (``knob``).
    Other errors pass through at once.

    With ``bounded`` (small requests: reads, listings, checks) a try that hangs is cut off at the deadline
    (:func:`call_within`), so the whole call takes about ``wait_s`` however the store fails; streaming
    transfers of any size (shard downloads, hashing checkpoint files) pass ``bounded=False`` and rely on the
    client's read timeout, which fires when the stream stalls. ``wait_s=0`` is one unbounded try."""
    deadline = time.monotonic() + wait_s
    delay = 0.5
    attempt = 0
    while True:
        attempt += 1
        left = deadline - time.monotonic()
        try:
            # The last try, after a backoff that used up the time, still gets a moment to answer.
            return call_within(fn, max(left, LAST_TRY_S)) if bounded and wait_s > 0 else fn()
        except StoreUnavailable as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreUnavailable(
                    f"{what}: unreachable for {wait_s:.0f}s ({attempt} tries, {knob}): {exc}"
                ) from exc
            log.warning("%s: %s; retrying in %.1fs", what, exc, min(delay, left))
            time.sleep(min(delay, left))
            delay = min(delay * 2, 15.0)
