"""The size quotas AWS puts on policy documents, measured on what a stack deploys. Pure: no Pulumi, no AWS.

A document over its quota is refused at create time (IAM ``LimitExceeded``, KMS
``MalformedPolicyDocumentException``, S3 ``PolicyTooLarge``...), after everything before it was created: the
offline plan and the policy pack measure the documents the program registered, so the first ``pulumi up``
never meets the limit. One source for the numbers: the pack's ``policy-documents-within-quotas`` and
``aiplat plan`` both read them here.

Sources (checked 2026-12-02):
- IAM: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html ("IAM and AWS STS quotas":
  managed policy 6,144 characters; the inline policies of a role together 10,240 characters; role trust
  policy 2,048 characters by default, adjustable to 4,096; 10 managed policies per role by default,
  adjustable to 20; "IAM doesn't count white space when calculating the size of a policy").
- KMS: https://docs.aws.amazon.com/kms/latest/developerguide/resource-limits.html ("Key policy document
  size": 32 KB, 32,768 bytes).
- S3: https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html ("Bucket policies are
  limited to 20 KB in size").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MANAGED_POLICY_CHARS = 6144
ROLE_INLINE_POLICIES_CHARS = 10240
ROLE_TRUST_POLICY_CHARS = 2048  # the default; a quota increase allows up to 4,096
MANAGED_POLICIES_PER_ROLE = 10  # the default; a quota increase allows up to 20
KEY_POLICY_BYTES = 32 * 1024
BUCKET_POLICY_BYTES = 20 * 1024

ROLE = "aws:iam/role:Role"
MANAGED_POLICY = "aws:iam/policy:Policy"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
KEY_POLICY_TYPES = {"aws:kms/key:Key": "policy", "aws:kms/keyPolicy:KeyPolicy": "policy"}
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"


def iam_size(document: str | Mapping[str, Any]) -> int:
    """A document's size as IAM counts it: characters other than white space."""
    text = document if isinstance(document, str) else json.dumps(document)
    return sum(1 for c in text if not c.isspace())


def byte_size(document: str | Mapping[str, Any]) -> int:
    """A document's size in bytes as sent (UTF-8), as KMS and S3 count it."""
    text = document if isinstance(document, str) else json.dumps(document)
    return len(text.encode())


@dataclass(frozen=True)
class Registered:
    """What a check needs of one registered resource: its URN, type, name, inputs, and the URNs each input
    came from (the engine's property dependencies)."""

    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]
    property_dependencies: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """One document (or a role's documents together, or its count of managed policies) against its quota;
    ``resource``: its name."""

    urn: str
    resource: str
    what: str
    size: int
    limit: int
    unit: str
    fix: str

    @property
    def share(self) -> float:
        """The share of the quota it takes (1.0: at the quota)."""
        return self.size / self.limit

    def problem(self) -> str:
        return f"{self.what} is {self.size:,} {self.unit}; AWS allows at most {self.limit:,}"


IAM_CHARS = "characters without white space"


def _text(value: Any) -> str | None:
    """A known document as text (the plan holds JSON strings; unknown or secret values are skipped)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return value
    if isinstance(value, Mapping):
        return json.dumps(value)
    return None


def _role_of(r: Registered, by_urn: Mapping[str, Registered]) -> Registered | None:
    for urn in r.property_dependencies.get("role", ()):
        target = by_urn.get(urn)
        if target is not None and target.type == ROLE:
            return target
    return None


def measure(resources: Iterable[Registered]) -> list[Measured]:
    """Every document the resources carry with its size against its quota, every role's inline policies
    together and its count of managed policies (what ``aiplat`` measures to refuse a plan, and the scale
    benchmark to report how close a stack is)."""
    resources = list(resources)
    by_urn = {r.urn: r for r in resources}
    out: list[Measured] = []
    inline: dict[str, list[int]] = {}
    attached: dict[str, int] = {}
    for r in resources:
        if r.type == MANAGED_POLICY and (doc := _text(r.inputs.get("policy"))):
            out.append(
                Measured(
                    r.urn,
                    r.name,
                    "the managed policy document",
                    iam_size(doc),
                    MANAGED_POLICY_CHARS,
                    IAM_CHARS,
                    "split its statements into two managed policies attached to the same role",
                )
            )
        elif r.type == ROLE:
            if trust := _text(r.inputs.get("assumeRolePolicy")):
                out.append(
                    Measured(
                        r.urn,
                        r.name,
                        "the trust policy (assumeRolePolicy)",
                        iam_size(trust),
                        ROLE_TRUST_POLICY_CHARS,
                        IAM_CHARS,
                        "name fewer principals (one statement with a list) or ask for the 'Role trust policy "
                        "length' quota (up to 4,096) before deploying",
                    )
                )
            for p in r.inputs.get("inlinePolicies") or []:
                if isinstance(p, Mapping) and (doc := _text(p.get("policy"))):
                    inline.setdefault(r.urn, []).append(iam_size(doc))
            arns = r.inputs.get("managedPolicyArns") or []
            attached[r.urn] = attached.get(r.urn, 0) + len(arns)
        elif r.type == ROLE_POLICY and (doc := _text(r.inputs.get("policy"))):
            if (role := _role_of(r, by_urn)) is not None:
                inline.setdefault(role.urn, []).append(iam_size(doc))
        elif r.type == ROLE_POLICY_ATTACHMENT and (role := _role_of(r, by_urn)) is not None:
            attached[role.urn] = attached.get(role.urn, 0) + 1
        elif r.type in KEY_POLICY_TYPES and (doc := _text(r.inputs.get(KEY_POLICY_TYPES[r.type]))):
            out.append(
                Measured(
                    r.urn,
                    r.name,
                    "the key policy",
                    byte_size(doc),
                    KEY_POLICY_BYTES,
                    "bytes",
                    "move grants to IAM policies (the account root statement delegates to IAM)",
                )
            )
        elif r.type == BUCKET_POLICY and (doc := _text(r.inputs.get("policy"))):
            out.append(
                Measured(
                    r.urn,
                    r.name,
                    "the bucket policy",
                    byte_size(doc),
                    BUCKET_POLICY_BYTES,
                    "bytes",
                    "merge statements that share an effect and condition, or grant through IAM policies",
                )
            )
    for urn, sizes in inline.items():
        out.append(
            Measured(
                urn,
                by_urn[urn].name,
                f"the role's {len(sizes)} inline policies together",
                sum(sizes),
                ROLE_INLINE_POLICIES_CHARS,
                IAM_CHARS,
                "move statements into a managed policy attached to the role",
            )
        )
    for urn, count in attached.items():
        if count:
            out.append(
                Measured(
                    urn,
                    by_urn[urn].name,
                    "the managed policies attached to the role",
                    count,
                    MANAGED_POLICIES_PER_ROLE,
                    "policies",
                    "merge policies, or raise the 'Managed policies per role' quota (up to 20) first",
                )
            )
    return out


def over_quota(resources: Iterable[Registered]) -> list[Measured]:
    """Every document the resources carry that AWS would refuse for its size, and every role whose inline
    policies together, or whose count of managed policies, is over its quota."""
    return [m for m in measure(resources) if m.size > m.limit]
