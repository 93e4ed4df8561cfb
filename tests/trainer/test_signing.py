"""Manifest signatures (trainer/release/signing.py): the KMS signer against moto's KMS (real Sign /
GetPublicKey
requests and responses, an ECC_NIST_P256 SIGN_VERIFY key), checked offline with the public key as the fetch
container does; the local signer and the key loading errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from tests.support.release_keys import write_key_pair
from trainer.errors import BadInput
from trainer.release.signing import (
    ALGORITHM,
    KEY_SPEC,
    BadSignature,
    KmsSigner,
    LocalSigner,
    load_public_key,
    signer_for,
    trusted_key,
    verify_signature,
)

MANIFEST = b'{"format": "aiplat-release-v2", "files": {}}' * 20  # a manifest's size (RAW)
LARGE = MANIFEST * 10  # over 4096 bytes: signed as a digest


def test_kms_signature_verifies_offline_with_the_public_key() -> None:
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        key = kms.create_key(KeySpec=KEY_SPEC, KeyUsage="SIGN_VERIFY")["KeyMetadata"]
        signer = KmsSigner(key_id=key["Arn"], client=kms)
        signature = signer.sign(MANIFEST)
        public = kms.get_public_key(KeyId=key["KeyId"])
        assert ALGORITHM in public["SigningAlgorithms"]
        der = public["PublicKey"]
        # the same signature checks out with KMS itself
        assert kms.verify(
            KeyId=key["KeyId"],
            Message=MANIFEST,
            MessageType="RAW",
            Signature=signature,
            SigningAlgorithm=ALGORITHM,
        )["SignatureValid"]
        # what the publisher checks a base release's signature with when no public key file is set
        signer_key = signer.public_key()
    verify_signature(MANIFEST, signature, load_public_key(der))
    verify_signature(MANIFEST, signature, signer_key)
    with pytest.raises(BadSignature, match="does not verify"):
        verify_signature(MANIFEST + b" ", signature, load_public_key(der))


def test_kms_signs_the_digest_of_a_large_manifest(tmp_path: Path) -> None:
    """moto 5.2.5 does not implement MessageType=DIGEST (moto/kms/models.py ``sign``): the request is checked
    against botocore's KMS model with a Stubber, and the signature a P-256 key makes of that digest verifies
    over the whole manifest offline."""
    from botocore.stub import Stubber
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    private, public = write_key_pair(tmp_path)
    key = LocalSigner.from_pem_file(private).private_key
    digest = hashlib.sha256(LARGE).digest()
    signature = key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))  # what KMS does with DIGEST
    kms = boto3.client("kms", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    with Stubber(kms) as stub:
        stub.add_response(
            "sign",
            {"KeyId": arn, "Signature": signature, "SigningAlgorithm": ALGORITHM},
            {"KeyId": arn, "Message": digest, "MessageType": "DIGEST", "SigningAlgorithm": ALGORITHM},
        )
        got = KmsSigner(key_id=arn, client=kms).sign(LARGE)
        stub.assert_no_pending_responses()
    verify_signature(LARGE, got, trusted_key(public))


def test_kms_refusal_names_the_key() -> None:
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        key = kms.create_key(KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]
        with pytest.raises(BadInput, match=f"cannot sign the manifest with KMS key {key['Arn']}"):
            KmsSigner(key_id=key["Arn"], client=kms).sign(MANIFEST)


def test_local_signer_and_foreign_key(tmp_path: Path) -> None:
    private, public = write_key_pair(tmp_path / "a")
    other_private, other_public = write_key_pair(tmp_path / "b")
    signature = signer_for(f"file:{private}").sign(MANIFEST)
    verify_signature(MANIFEST, signature, trusted_key(public))
    with pytest.raises(BadSignature, match="signed by another key"):
        verify_signature(MANIFEST, signature, trusted_key(other_public))
    with pytest.raises(BadSignature):
        verify_signature(MANIFEST, b"\x30\x02junk", trusted_key(public))
    assert isinstance(signer_for("arn:aws:kms:us-east-1:111122223333:key/abc"), KmsSigner)
    assert isinstance(signer_for(f"file:{other_private}"), LocalSigner)


def test_missing_or_wrong_keys_say_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIPLAT_RELEASE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("AIPLAT_RELEASE_PUBLIC_KEY", raising=False)
    with pytest.raises(BadInput, match="no release signing key: pass --signing-key"):
        signer_for(None)
    with pytest.raises(BadInput, match="no release public key: set AIPLAT_RELEASE_PUBLIC_KEY"):
        trusted_key()
    with pytest.raises(BadInput, match="not a PEM or DER public key"):
        load_public_key(b"-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    pem = p384.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(BadInput, match="must be an ECC_NIST_P256"):
        load_public_key(pem)


def test_kms_signer_finds_its_region_without_aws_default_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads only AWS_DEFAULT_REGION; a pod given an identity by EKS has AWS_REGION. The signer takes
    the key ARN's region, then AWS_REGION, and says what to set when it has neither."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    with mock_aws():
        kms = boto3.client("kms", region_name="eu-west-1")
        key = kms.create_key(KeySpec=KEY_SPEC, KeyUsage="SIGN_VERIFY")["KeyMetadata"]
        kms.create_alias(AliasName="alias/aiplat-release", TargetKeyId=key["KeyId"])
        by_arn = KmsSigner(key_id=key["Arn"])
        assert by_arn.sign(MANIFEST)
        assert by_arn.client.meta.region_name == "eu-west-1"
        with pytest.raises(BadInput, match="alias/aiplat-release: no AWS region; fix: set AWS_REGION"):
            KmsSigner(key_id="alias/aiplat-release").sign(MANIFEST)
        monkeypatch.setenv("AWS_REGION", "eu-west-1")
        by_alias = KmsSigner(key_id="alias/aiplat-release")
        assert by_alias.sign(MANIFEST)
        assert by_alias.client.meta.region_name == "eu-west-1"
