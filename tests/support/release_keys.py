"""A release signing key pair for the tests: a software P-256 key in PEM files, named through the same
environment variables the publisher job and the fetch container read (trainer/release/signing.py), so every
release
a test publishes is signed and every reader checks it. The KMS path is tested against moto
(tests/trainer/test_signing.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainer.release.signing import FILE_PREFIX, PUBLIC_KEY_ENV, SIGNING_KEY_ENV


def write_key_pair(folder: Path, name: str = "release") -> tuple[Path, Path]:
    """A new P-256 key pair as ``(<name>.key.pem, <name>.pub.pem)`` in ``folder``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    folder.mkdir(parents=True, exist_ok=True)
    private, public = folder / f"{name}.key.pem", folder / f"{name}.pub.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@contextmanager
def release_keys(folder: Path) -> Iterator[tuple[Path, Path]]:
    """Set ``AIPLAT_RELEASE_SIGNING_KEY`` (``file:<private pem>``) and ``AIPLAT_RELEASE_PUBLIC_KEY`` to a
    new key pair for the duration; child processes inherit them."""
    private, public = write_key_pair(folder)
    saved = {k: os.environ.get(k) for k in (SIGNING_KEY_ENV, PUBLIC_KEY_ENV)}
    os.environ[SIGNING_KEY_ENV] = f"{FILE_PREFIX}{private}"
    os.environ[PUBLIC_KEY_ENV] = str(public)
    try:
        yield private, public
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
