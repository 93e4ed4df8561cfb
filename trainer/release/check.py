"""The publisher's check of a Hugging Face folder: the files by name (a refused file is never opened), each
copied to a local directory while hashed, by the object version current then, and checked there from JSON
and safetensors headers only, every tensor against the architecture's own model (in a process of its own).
``trainer/release/publish.py`` publishes what ``copy_checked`` checked; ``aiplat release check --from`` runs
``check_source``, the same steps without publishing, so a researcher hears the refusal before anyone signs."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.errors import BadInput
from trainer.release.adapter import ADAPTER_CONFIG, Adapter, check_adapter, plan_adapter
from trainer.release.architecture import ExpectedError, expected_tensors
from trainer.release.hf_folder import FolderPlan, Serving, check_folder, plan_folder, read_header
from trainer.release.manifest import FileEntry
from trainer.storage.blobstore import open_blobs

Expected = Callable[[bytes], dict[str, Any]]


@dataclass(frozen=True)
class CheckedCopy:
    """A folder copied and checked: its plan, each published file's size and sha256, the object versions
    read (S3 with versioning), and the serving facts."""

    plan: FolderPlan
    files: dict[str, FileEntry]
    versions: dict[str, str]
    serving: Serving


def open_source(from_uri: str) -> tuple[Any, dict[str, int]]:
    """The folder's store and its listing (name -> size); :class:`BadInput` when it holds nothing."""
    src = open_blobs(from_uri)
    listing = src.list()
    if not listing:
        raise BadInput(f"--from={from_uri}: no files there")
    return src, listing


def _copy(src: Any, listing: dict[str, int], local: Path, plan: FolderPlan) -> tuple[dict, dict]:
    """Copy ``plan``'s files into ``local``, each by the version current now (so what is hashed, checked and
    signed is one version): their :class:`FileEntry` and object versions."""
    files: dict[str, FileEntry] = {}
    versions: dict[str, str] = {}
    for name in plan.publish:
        object_version = src.current_version(name)
        sha, size = src.download_version(name, object_version, local / name)
        if object_version is not None:
            versions[name] = object_version
        if size != listing[name]:
            raise BadInput(f"{src.url(name)} changed while copied ({listing[name]} -> {size} bytes)")
        files[name] = FileEntry(size, sha)
    return files, versions


def _head(local: Path, files: dict[str, FileEntry]) -> Callable[[str], bytes]:
    def head(name: str) -> bytes:
        with open(local / name, "rb") as f:
            return read_header(f, name, files[name].size)

    return head


def copy_checked(
    src: Any, listing: dict[str, int], local: Path, expected: Expected | None = None
) -> CheckedCopy:
    """Copy the folder's publishable files into ``local`` and check the copy; :class:`BadInput`
    (``FolderError``) with the one-line reason otherwise."""
    plan = plan_folder(listing)  # by name alone: a refused file is never opened
    files, versions = _copy(src, listing, local, plan)
    sizes = {n: e.size for n, e in files.items()}
    serving = check_folder(
        plan.publish,
        sizes,
        lambda n: (local / n).read_bytes(),
        _head(local, files),
        expected=expected or expected_tensors,
    )
    return CheckedCopy(plan, files, versions, serving)


def copy_checked_adapter(
    src: Any, listing: dict[str, int], local: Path, base_config: bytes, expected: Expected | None = None
) -> tuple[FolderPlan, dict[str, FileEntry], dict[str, str], Adapter]:
    """:func:`copy_checked` of a LoRA adapter folder (trainer/release/adapter.py), its modules and shapes
    checked against the tensors of the base whose ``config.json`` is ``base_config``."""
    plan = plan_adapter(listing)
    try:
        base = (expected or expected_tensors)(base_config)
    except ExpectedError as exc:
        raise BadInput(f"the base's config.json: {exc}") from None
    files, versions = _copy(src, listing, local, plan)
    sizes = {n: e.size for n, e in files.items()}
    read = lambda n: (local / n).read_bytes()  # noqa: E731
    adapter = check_adapter(plan.publish, sizes, read, _head(local, files), base)
    return plan, files, versions, adapter


def check_source(from_uri: str, expected: Expected | None = None) -> tuple[Serving, dict[str, int]]:
    """The serving facts of the folder at ``from_uri`` (a directory or ``s3://``) and its published files'
    sizes, as the publisher would decide them."""
    src, listing = open_source(from_uri)
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        checked = copy_checked(src, listing, Path(tmp), expected)
    return checked.serving, {n: e.size for n, e in checked.files.items()}


def is_adapter_folder(from_uri: str) -> bool:
    """Whether the folder at ``from_uri`` is a LoRA adapter (peft's ``adapter_config.json`` in it), which the
    publisher checks against a base release (``--base``)."""
    return ADAPTER_CONFIG in open_source(from_uri)[1]


def check_adapter_source(from_uri: str, base_config: bytes, expected: Expected | None = None) -> Adapter:
    """The adapter facts of the LoRA adapter folder at ``from_uri`` as the publisher would decide them
    against the base whose ``config.json`` is ``base_config`` (:func:`copy_checked_adapter`, unpublished)."""
    src, listing = open_source(from_uri)
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        return copy_checked_adapter(src, listing, Path(tmp), base_config, expected)[3]
