"""The publisher's check of a Hugging Face folder, without publishing: what ``aiplat release check --from``
runs, so a researcher learns before anyone signs it whether the folder would be refused (and why, by
tensor name). The same steps as ``trainer/release/publish.py``: the files by name (a refused file is never
opened), each copied to a local temporary directory while hashed, then checked there from JSON and
safetensors headers only, every tensor against the architecture's own model (in a process of its own)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer.errors import BadInput
from trainer.release.architecture import expected_tensors
from trainer.release.hf_folder import Serving, check_folder, plan_folder, read_header
from trainer.storage.blobstore import open_blobs


def check_source(
    from_uri: str, expected: Callable[[bytes], dict[str, Any]] | None = None
) -> tuple[Serving, dict[str, int]]:
    """The serving facts of the folder at ``from_uri`` (a directory or ``s3://``) and its published files'
    sizes; :class:`~trainer.errors.BadInput` (``FolderError``) with the one-line reason otherwise."""
    src = open_blobs(from_uri)
    listing = src.list()
    if not listing:
        raise BadInput(f"--from={from_uri}: no files there")
    plan = plan_folder(listing)
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        local = Path(tmp)
        sizes: dict[str, int] = {}
        for name in plan.publish:
            _, sizes[name] = src.download(name, local / name)

        def head(name: str) -> bytes:
            with open(local / name, "rb") as f:
                return read_header(f, name, sizes[name])

        serving = check_folder(
            plan.publish,
            sizes,
            lambda n: (local / n).read_bytes(),
            head,
            expected=expected or expected_tensors,
        )
    return serving, sizes
