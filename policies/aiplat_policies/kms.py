"""KMS keys: rotation, deletion window, and resource policies without wildcard principals."""

from __future__ import annotations

from collections.abc import Iterator

from . import iamdoc
from .core import (
    CRITICAL,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Violation,
    deferred_unknowns,
    number,
    resource_rule,
    truthy,
    violation,
)

KEY = "aws:kms/key:Key"


@resource_rule(
    "kms-key-rotation",
    description="Symmetric customer managed keys rotate their key material at least yearly.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/kms/latest/developerguide/rotate-keys.html",
    types=(KEY,),
    unknowns="An unknown rotation flag or key spec is a violation (both are literals in this program).",
)
def kms_key_rotation(r: Res, ctx: Ctx) -> Iterator[Violation]:
    spec = r.get("customerMasterKeySpec") or r.get("keySpec") or "SYMMETRIC_DEFAULT"
    usage = r.get("keyUsage") or "ENCRYPT_DECRYPT"
    if spec != "SYMMETRIC_DEFAULT" or usage != "ENCRYPT_DECRYPT":
        if spec is UNKNOWN or usage is UNKNOWN:
            yield violation("the key spec/usage is unknown at preview", "set them as literals")
        return  # AWS rotates only symmetric encryption keys
    if truthy(r.get("enableKeyRotation")) is not True:
        yield violation(
            f"automatic rotation is off (enable_key_rotation={r.get('enableKeyRotation')})",
            "set enable_key_rotation: true",
        )
    period = number(r.get("rotationPeriodInDays"))
    if period is UNKNOWN or (period is not None and period > 365):
        yield violation(
            f"rotation period {period} days is longer than a year", "set rotation_period_in_days <= 365"
        )


@resource_rule(
    "kms-key-deletion-window",
    description="Keys wait the longest window before deletion, so a mistaken delete can be cancelled.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html#deleting-keys-scheduling-key-deletion",
    types=(KEY, "aws:kms/replicaKey:ReplicaKey"),
    unknowns="An unknown window is a violation (it is a literal in this program).",
    config={
        "minDays": {
            "type": "number",
            "minimum": 7,
            "maximum": 30,
            "default": 30,
            "description": "Shortest deletion window accepted (days; AWS allows 7 to 30, default 30).",
        }
    },
)
def kms_key_deletion_window(r: Res, ctx: Ctx) -> Iterator[Violation]:
    days = number(r.get("deletionWindowInDays"))
    if days is None:
        return  # AWS default: 30 days
    if days is UNKNOWN or days < ctx.config["minDays"]:
        yield violation(
            f"deletion window {days} days is shorter than {ctx.config['minDays']}",
            f"set deletion_window_in_days to {int(ctx.config['minDays'])} (or leave it unset: AWS uses 30)",
        )


POLICY_PROPS = {
    KEY: "policy",
    "aws:kms/keyPolicy:KeyPolicy": "policy",
    "aws:s3/bucketPolicy:BucketPolicy": "policy",
    "aws:ecr/repositoryPolicy:RepositoryPolicy": "policy",
    "aws:ecr/registryPolicy:RegistryPolicy": "policy",
    "aws:sns/topicPolicy:TopicPolicy": "policy",
    "aws:sqs/queuePolicy:QueuePolicy": "policy",
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": "policyDocument",
}


def unknown_resource_policy(r: Res) -> list[str]:
    """``[<property>]`` when a resource policy's document is unknown (deferred at preview)."""
    prop = POLICY_PROPS.get(r.type)
    if prop is not None and iamdoc.statements(r.get(prop)) is UNKNOWN:
        return [prop]
    return []


@resource_rule(
    "no-wildcard-principal",
    description="Resource policies (KMS keys, buckets, repositories, topics, queues, log groups) allow no "
    "wildcard principal unless a condition limits it to our account, organization or VPC endpoint.",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html",
    types=tuple(POLICY_PROPS),
    unknowns=deferred_unknowns("policy document"),
    defers=unknown_resource_policy,
)
def no_wildcard_principal(r: Res, ctx: Ctx) -> Iterator[Violation]:
    prop = POLICY_PROPS[r.type]
    stmts = iamdoc.statements(r.get(prop))
    if stmts is UNKNOWN:
        if not ctx.at_preview:
            yield violation(
                f"the {prop} document is unknown outside a preview and cannot be reviewed",
                "build it from known values",
            )
        return
    for i, stmt in enumerate(stmts):
        if not iamdoc.allows(stmt):
            continue
        wild = [p for p in iamdoc.principals(stmt) if iamdoc.is_wildcard_principal(*p)]
        if wild and not iamdoc.wildcard_scoped(stmt):
            sid = stmt.get("Sid") or f"#{i}"
            yield violation(
                f"statement {sid} allows {iamdoc.actions(stmt)} to any principal ('*')",
                "name the principals, or add a condition on aws:PrincipalAccount / aws:PrincipalOrgID / "
                "kms:CallerAccount",
            )
