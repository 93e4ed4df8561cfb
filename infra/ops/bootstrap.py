"""``aiplat bootstrap``: create or check what a stack's first ``pulumi up`` needs: the state bucket, the
secrets key and the deployer role with its generated policies (boto3; read-only unless ``create``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from botocore.exceptions import ClientError

from infra.core.errors import ConfigError
from infra.core.policy_quotas import MANAGED_POLICIES_PER_ROLE
from infra.io.aws_live import Clients

# IAM keeps at most five versions of a managed policy
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/access_policies_managed-versioning.html)
POLICY_VERSIONS_MAX = 5


@dataclass(frozen=True)
class Step:
    """One thing bootstrap looked at: ``ok``, ``created``/``updated`` (create mode) or ``missing`` (check)."""

    what: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class StateBackend:
    bucket: str
    prefix: str
    region: str


@dataclass(frozen=True)
class SecretsKey:
    alias: str
    region: str


def state_backend(url: str) -> StateBackend:
    """The bucket, key prefix and region of an ``s3://`` backend URL (rollout.yaml ``backend_url``)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3":
        raise ConfigError(
            "rollout.yaml: backend_url",
            f"{url!r} is not an s3:// backend; bootstrap creates only an S3 state bucket",
            "use s3://<bucket>/<prefix>?region=<region>, or create your backend yourself",
        )
    region = parse_qs(parsed.query).get("region", ["us-east-1"])[0]
    return StateBackend(parsed.netloc, parsed.path.strip("/"), region)


def secrets_key(provider: str) -> SecretsKey:
    """The alias and region of an ``awskms://alias/<name>?region=`` secrets provider."""
    rest, _, query = provider.removeprefix("awskms://").partition("?")
    if not provider.startswith("awskms://") or not rest.startswith("alias/"):
        raise ConfigError(
            "rollout.yaml: secrets_provider",
            f"{provider!r} does not name a KMS alias; bootstrap creates the key behind an alias",
            "use awskms://alias/<name>?region=<region>",
        )
    return SecretsKey(rest, parse_qs(query).get("region", ["us-east-1"])[0])


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def ensure_secrets_key(clients: Clients, key: SecretsKey, *, create: bool) -> tuple[list[Step], str | None]:
    """The KMS key behind the alias: enabled, with rotation. Returns the steps and the key's ARN."""
    kms = clients("kms", key.region)
    what = f"secrets key {key.alias} ({key.region})"
    try:
        meta = kms.describe_key(KeyId=key.alias)["KeyMetadata"]
    except ClientError as exc:
        if _code(exc) != "NotFoundException":
            raise
        if not create:
            return [Step(what, "missing", "no key has this alias")], None
        meta = kms.create_key(Description="Pulumi secrets provider of aiplat (aiplat bootstrap)")[
            "KeyMetadata"
        ]
        kms.create_alias(AliasName=key.alias, TargetKeyId=meta["KeyId"])
        kms.enable_key_rotation(KeyId=meta["KeyId"])
        return [Step(what, "created", f"key {meta['KeyId']}, rotation on")], meta["Arn"]
    steps = [Step(what, "ok" if meta["KeyState"] == "Enabled" else "missing", f"key is {meta['KeyState']}")]
    if not kms.get_key_rotation_status(KeyId=meta["KeyId"])["KeyRotationEnabled"]:
        if create:
            kms.enable_key_rotation(KeyId=meta["KeyId"])
        steps.append(Step(f"{what} rotation", "updated" if create else "missing", "yearly key rotation"))
    return steps, meta["Arn"]


_BLOCK_ALL = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}


def ensure_state_bucket(
    clients: Clients, b: StateBackend, key_arn: str | None, *, create: bool
) -> list[Step]:
    """The state bucket: exists, versioned (every state write is recoverable), SSE-KMS with the secrets key,
    public access blocked."""
    s3 = clients("s3", b.region)
    what = f"state bucket {b.bucket}"
    steps: list[Step] = []
    try:
        s3.head_bucket(Bucket=b.bucket)
    except ClientError as exc:
        if _code(exc) not in ("404", "NoSuchBucket", "NotFound"):
            raise
        if not create:
            return [Step(what, "missing", f"no bucket {b.bucket} in {b.region}")]
        extra = (
            {} if b.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": b.region}}
        )
        s3.create_bucket(Bucket=b.bucket, **extra)
        steps.append(Step(what, "created", b.region))
    else:
        steps.append(Step(what, "ok", b.region))

    def fix(name: str, good: bool, detail: str, apply: Any) -> None:
        if good:
            steps.append(Step(f"{what} {name}", "ok", detail))
        elif create:
            apply()
            steps.append(Step(f"{what} {name}", "updated", detail))
        else:
            steps.append(Step(f"{what} {name}", "missing", detail))

    versioned = s3.get_bucket_versioning(Bucket=b.bucket).get("Status") == "Enabled"
    fix(
        "versioning",
        versioned,
        "Enabled",
        lambda: s3.put_bucket_versioning(Bucket=b.bucket, VersioningConfiguration={"Status": "Enabled"}),
    )
    try:
        rules = s3.get_bucket_encryption(Bucket=b.bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    except ClientError:
        rules = []
    kms_rule = any(
        r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") == "aws:kms" for r in rules
    )
    default: dict[str, Any] = {"SSEAlgorithm": "aws:kms"}
    if key_arn:
        default["KMSMasterKeyID"] = key_arn
    fix(
        "encryption",
        kms_rule,
        "SSE-KMS" + (" with the secrets key" if key_arn else ""),
        lambda: s3.put_bucket_encryption(
            Bucket=b.bucket,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": default, "BucketKeyEnabled": True}]
            },
        ),
    )
    try:
        block = s3.get_public_access_block(Bucket=b.bucket)["PublicAccessBlockConfiguration"]
    except ClientError:
        block = {}
    fix(
        "public access block",
        all(block.get(k) for k in _BLOCK_ALL),
        "all four settings on",
        lambda: s3.put_public_access_block(Bucket=b.bucket, PublicAccessBlockConfiguration=_BLOCK_ALL),
    )
    return steps


def _document(value: Any) -> Any:
    """A policy document as IAM returns it (URL-encoded JSON text, or already parsed by boto3)."""
    return json.loads(unquote(value)) if isinstance(value, str) else value


def ensure_deployer(
    clients: Clients,
    *,
    role: str,
    trust: dict[str, Any],
    policies: Sequence[tuple[str, dict[str, Any]]],
    partition: str,
    create: bool,
) -> list[Step]:
    """The deployer role, each generated managed policy (its default version equal to the document), each
    attached to the role, and the role within the managed-policies-per-role quota."""
    iam = clients("iam", "us-east-1")
    account = clients("sts", "us-east-1").get_caller_identity()["Account"]
    steps: list[Step] = []
    what = f"deployer role {role}"
    try:
        iam.get_role(RoleName=role)
        steps.append(Step(what, "ok"))
    except ClientError as exc:
        if _code(exc) != "NoSuchEntity":
            raise
        if not create:
            steps.append(Step(what, "missing", "no role of this name"))
        else:
            iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
            steps.append(Step(what, "created", f"trusts {', '.join(_principals(trust))}"))
    attached: set[str] = set()
    if create or steps[0].status == "ok":
        pages = iam.get_paginator("list_attached_role_policies").paginate(RoleName=role)
        attached = {p["PolicyArn"] for page in pages for p in page["AttachedPolicies"]}
    for name, doc in policies:
        arn = f"arn:{partition}:iam::{account}:policy/{name}"
        steps.append(_ensure_policy(iam, arn, name, doc, create=create))
        if arn in attached:
            steps.append(Step(f"policy {name} attached", "ok"))
        elif create:
            iam.attach_role_policy(RoleName=role, PolicyArn=arn)
            attached.add(arn)
            steps.append(Step(f"policy {name} attached", "created", role))
        else:
            steps.append(Step(f"policy {name} attached", "missing", f"not attached to {role}"))
    count = len(attached | {f"arn:{partition}:iam::{account}:policy/{n}" for n, _ in policies})
    steps.append(
        Step(
            f"{what} managed policies",
            "ok" if count <= MANAGED_POLICIES_PER_ROLE else "missing",
            f"{count} attached; IAM allows {MANAGED_POLICIES_PER_ROLE} by default, 20 after a quota increase "
            "('Managed policies per role', Service Quotas)",
        )
    )
    return steps


def _principals(trust: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for s in trust.get("Statement", []):
        aws = s.get("Principal", {}).get("AWS", [])
        out.extend([aws] if isinstance(aws, str) else aws)
    return out


def _ensure_policy(iam: Any, arn: str, name: str, doc: dict[str, Any], *, create: bool) -> Step:
    what = f"policy {name}"
    try:
        policy = iam.get_policy(PolicyArn=arn)["Policy"]
    except ClientError as exc:
        if _code(exc) != "NoSuchEntity":
            raise
        if not create:
            return Step(what, "missing", "not created yet")
        iam.create_policy(
            PolicyName=name, PolicyDocument=json.dumps(doc), Description="aiplat deployer (aiplat bootstrap)"
        )
        return Step(what, "created", f"{len(doc['Statement'])} statements")
    version = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])["PolicyVersion"]
    if _document(version["Document"]) == doc:
        return Step(what, "ok", f"version {policy['DefaultVersionId']} is the generated document")
    if not create:
        return Step(what, "missing", "its default version differs from the generated document")
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    if len(versions) >= POLICY_VERSIONS_MAX:
        oldest = min((v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"])
        iam.delete_policy_version(PolicyArn=arn, VersionId=oldest["VersionId"])
    iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(doc), SetAsDefault=True)
    return Step(what, "updated", "a new default version with the generated document")
