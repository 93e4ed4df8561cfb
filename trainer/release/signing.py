"""Signatures of release manifests: the publisher signs ``manifest.json`` with an asymmetric KMS key, the
fetch tool checks the signature against the key's public half before it reads any other file of a release.

The signature is ECDSA with SHA-256 over the manifest's bytes (KMS ``ECDSA_SHA_256``, key spec
``ECC_NIST_P256``, key usage ``SIGN_VERIFY``), DER-encoded as KMS returns it, stored as
``manifest.json.sig`` beside the manifest. KMS takes the manifest itself (``MessageType=RAW``) up to 4096
bytes, and its SHA-256 digest (``DIGEST``) above; both give the same signature of the same bytes.
https://docs.aws.amazon.com/kms/latest/APIReference/API_Sign.html

Verification needs only the public key (PEM, from ``kms:GetPublicKey``; the infer stacks mount it into the
init container), so the fetch tool needs no KMS access and no network besides S3. Only the publisher's role
may call ``kms:Sign`` on the key (infra/storage documents); a manifest written by anyone else, or changed
after signing, is refused.

Signers: :class:`KmsSigner` (the publisher job) and :class:`LocalSigner` (a PEM private key on disk: the
CPU end-to-end tests and local experiments). ``--signing-key`` / ``AIPLAT_RELEASE_SIGNING_KEY`` names one:
a KMS key ARN, alias or id, or ``file:<path>``. Whoever reads releases names the trusted public key with
``AIPLAT_RELEASE_PUBLIC_KEY`` (a PEM file path).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trainer.errors import BadInput

SIGNATURE_SUFFIX = ".sig"
ALGORITHM = "ECDSA_SHA_256"
KEY_SPEC = "ECC_NIST_P256"
SIGNING_KEY_ENV = "AIPLAT_RELEASE_SIGNING_KEY"
PUBLIC_KEY_ENV = "AIPLAT_RELEASE_PUBLIC_KEY"
FILE_PREFIX = "file:"
RAW_MESSAGE_MAX = 4096  # bytes KMS Sign takes as a RAW message


class BadSignature(Exception):
    """A signature that does not verify with the trusted key; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Signer(Protocol):
    """What the publisher needs: sign bytes, and a name of the key for the log."""

    key_id: str

    def sign(self, message: bytes) -> bytes:
        """A DER-encoded ECDSA P-256 / SHA-256 signature of ``message``."""
        ...

    def public_key(self) -> Any:
        """The public half of the signing key (cryptography's EllipticCurvePublicKey)."""
        ...


@dataclass
class KmsSigner:
    """Signs with an asymmetric KMS key (``kms:Sign`` on the digest). ``client``: a boto3 KMS client (the
    default chain, ``AWS_REGION``/``AWS_ENDPOINT_URL`` honoured, when None)."""

    key_id: str
    client: Any = None

    def sign(self, message: bytes) -> bytes:
        """Sign ``message`` with the KMS key (its SHA-256 digest when it is over 4096 bytes)."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self.client is None:
            self.client = _kms_client(self.key_id)

        raw = len(message) <= RAW_MESSAGE_MAX
        try:
            resp = self.client.sign(
                KeyId=self.key_id,
                Message=message if raw else hashlib.sha256(message).digest(),
                MessageType="RAW" if raw else "DIGEST",
                SigningAlgorithm=ALGORITHM,
            )
        except (ClientError, BotoCoreError) as exc:
            raise BadInput(f"cannot sign the manifest with KMS key {self.key_id}: {exc}") from None
        return bytes(resp["Signature"])

    def public_key(self) -> Any:
        """The key's public half (``kms:GetPublicKey``), to verify what it signed (a base release)."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self.client is None:
            self.client = _kms_client(self.key_id)
        try:
            der = self.client.get_public_key(KeyId=self.key_id)["PublicKey"]
        except (ClientError, BotoCoreError) as exc:
            raise BadInput(f"cannot read the public key of KMS key {self.key_id}: {exc}") from None
        return load_public_key(bytes(der))


def _kms_client(key_id: str) -> Any:
    """A KMS client in the key's region: the ARN's own, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``
    (botocore reads only the latter, and pods given an identity by EKS get only the former)."""
    import boto3

    arn = key_id.split(":")
    region = (
        (arn[3] if len(arn) > 3 and arn[0] == "arn" else "")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    if not region:
        raise BadInput(
            f"cannot sign the manifest with KMS key {key_id}: no AWS region; "
            "fix: set AWS_REGION or give the key's full ARN"
        )
    return boto3.client("kms", region_name=region)


@dataclass
class LocalSigner:
    """Signs with a P-256 private key held in memory (tests, local runs); never the production path."""

    key_id: str
    private_key: Any  # cryptography's EllipticCurvePrivateKey

    @classmethod
    def from_pem_file(cls, path: str | Path) -> LocalSigner:
        """The private key of a PEM file (unencrypted PKCS#8 or SEC1)."""
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(Path(path).read_bytes(), password=None)
        except (OSError, ValueError) as exc:
            raise BadInput(f"signing key file {path}: {exc}") from None
        return cls(key_id=f"{FILE_PREFIX}{path}", private_key=key)

    def sign(self, message: bytes) -> bytes:
        """ECDSA P-256 / SHA-256, DER-encoded (what KMS returns for ``ECDSA_SHA_256``)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return bytes(self.private_key.sign(message, ec.ECDSA(hashes.SHA256())))

    def public_key(self) -> Any:
        """The key's public half."""
        return self.private_key.public_key()


def signer_for(spec: str | None) -> Signer:
    """The signer ``spec`` names (``file:<pem path>`` or a KMS key ARN/alias/id); ``None``: the
    ``AIPLAT_RELEASE_SIGNING_KEY`` environment variable. Raises :class:`BadInput` when none is given."""
    spec = spec if spec is not None else os.environ.get(SIGNING_KEY_ENV, "")
    if not spec:
        raise BadInput(
            f"no release signing key: pass --signing-key <KMS key ARN or alias> (or set {SIGNING_KEY_ENV}); "
            "the stack output releaseSigningKeyArn names it"
        )
    if spec.startswith(FILE_PREFIX):
        return LocalSigner.from_pem_file(spec[len(FILE_PREFIX) :])
    return KmsSigner(key_id=spec)


def load_public_key(pem: bytes) -> Any:
    """A P-256 public key from PEM (``SubjectPublicKeyInfo``, as ``kms:GetPublicKey`` returns in DER)."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

    try:
        key = load_pem_public_key(pem) if pem.lstrip().startswith(b"-----") else load_der_public_key(pem)
    except ValueError as exc:
        raise BadInput(f"release public key: not a PEM or DER public key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise BadInput(f"release public key: must be an {KEY_SPEC} (secp256r1) key")
    return key


def trusted_key(path: str | Path | None = None) -> Any:
    """The public key releases must be signed with: the PEM file ``path``, or the one
    ``AIPLAT_RELEASE_PUBLIC_KEY`` names. Raises :class:`BadInput` when neither is set or readable."""
    where = str(path) if path is not None else os.environ.get(PUBLIC_KEY_ENV, "")
    if not where:
        raise BadInput(
            f"no release public key: set {PUBLIC_KEY_ENV} to the PEM file of the stack's release signing "
            "key (the infer stacks mount it into the fetch container)"
        )
    try:
        return load_public_key(Path(where).read_bytes())
    except OSError as exc:
        raise BadInput(f"release public key {where}: {exc.strerror or exc}") from None


def verify_signature(message: bytes, signature: bytes, public_key: Any) -> None:
    """Raise :class:`BadSignature` unless ``signature`` is ``public_key``'s signature of ``message``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise BadSignature(
            "signature does not verify with the release signing key (changed after signing, or signed by "
            "another key)"
        ) from None
    except ValueError as exc:  # not even a DER signature
        raise BadSignature(f"signature is malformed ({exc})") from None
