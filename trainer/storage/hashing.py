"""The one sha256 helper and the one manifest file name (checkpoints, releases)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import BinaryIO

# Written last into a checkpoint or release folder; its presence is what makes the folder count.
MANIFEST = "manifest.json"
CHUNK = 1 << 22  # 4 MiB reads
SHA256_HEX_LEN = 64


def sha256_stream(f: BinaryIO, sink: Callable[[bytes], object] | None = None) -> tuple[str, int]:
    """Hex sha256 and byte count of everything left in ``f``; each block also goes to ``sink`` (a copy)."""
    h = hashlib.sha256()
    size = 0
    while block := f.read(CHUNK):
        h.update(block)
        size += len(block)
        if sink is not None:
            sink(block)
    return h.hexdigest(), size


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes in memory."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a local file."""
    with open(path, "rb") as f:
        return sha256_stream(f)[0]


def is_sha256_hex(value: object) -> bool:
    """True for a 64-character lowercase hex string."""
    return (
        isinstance(value, str)
        and len(value) == SHA256_HEX_LEN
        and all(c in "0123456789abcdef" for c in value)
    )
