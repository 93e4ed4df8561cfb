"""IAM: no full admin, no iam:PassRole on every role, trust policies scoped to who may assume."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import iamdoc
from .core import (
    ADVISORY,
    CRITICAL,
    HIGH,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Violation,
    as_list,
    deferred_unknowns,
    dig,
    resource_rule,
    violation,
)

ROLE = "aws:iam/role:Role"
# Identity policies: resource type -> the property holding the document.
IDENTITY_POLICIES = {
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/policy:Policy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
}
ATTACHMENTS = (
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment",
    "aws:iam/policyAttachment:PolicyAttachment",
)
# AWS managed policies that grant every action (or every IAM action).
ADMIN_MANAGED = ("AdministratorAccess", "PowerUserAccess", "IAMFullAccess")


def identity_documents(r: Res) -> list[tuple[str, Any]]:
    """(where, statements) of every identity policy document a resource carries."""
    if r.type in IDENTITY_POLICIES:
        prop = IDENTITY_POLICIES[r.type]
        return [(prop, iamdoc.statements(r.get(prop)))]
    if r.type == ROLE:
        return [
            (f"inlinePolicies[{i}]", iamdoc.statements(dig(p, "policy")))
            for i, p in enumerate(as_list(r.get("inlinePolicies")))
        ]
    return []


def _unknown(where: str) -> Violation:
    """An unknown document outside a preview: nothing will review it, so it is refused."""
    return violation(
        f"{where} is unknown outside a preview and cannot be reviewed", "build the document from known values"
    )


def unknown_identity_documents(r: Res) -> list[str]:
    """Where the identity policy documents of ``r`` that are unknown are (deferred at preview)."""
    return [where for where, stmts in identity_documents(r) if stmts is UNKNOWN]


def unknown_identity_documents_or_arns(r: Res) -> list[str]:
    """As ``unknown_identity_documents``, plus an attachment's unknown policy ARN (a policy of this
    update)."""
    arn = ["policyArn"] if r.type in ATTACHMENTS and r.get("policyArn") is UNKNOWN else []
    return unknown_identity_documents(r) + arn


def unknown_trust_policy(r: Res) -> list[str]:
    """``["assumeRolePolicy"]`` when a role's trust policy is unknown (deferred at preview)."""
    if r.type == ROLE and iamdoc.statements(r.get("assumeRolePolicy")) is UNKNOWN:
        return ["assumeRolePolicy"]
    return []


@resource_rule(
    "iam-no-admin",
    description="No identity policy allows every action ('*' or '*:*'), and no AdministratorAccess, "
    "PowerUserAccess or IAMFullAccess attachment.",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege",
    types=(*IDENTITY_POLICIES, ROLE, *ATTACHMENTS),
    unknowns=deferred_unknowns("document or attached policy ARN"),
    defers=unknown_identity_documents_or_arns,
)
def iam_no_admin(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if r.type in ATTACHMENTS:
        arn = r.get("policyArn")
        if arn is UNKNOWN and ctx.at_preview:
            return  # a policy of this update (AWS managed policy ARNs are literals): checked-at-update
        if arn is UNKNOWN or (isinstance(arn, str) and arn.rsplit("/", 1)[-1] in ADMIN_MANAGED):
            yield violation(f"attaches {arn}", "attach a policy with only the actions the role needs")
        return
    for where, stmts in identity_documents(r):
        if stmts is UNKNOWN:
            if not ctx.at_preview:
                yield _unknown(where)
            continue
        for stmt in stmts:
            if iamdoc.allows(stmt) and any(a in ("*", "*:*") for a in iamdoc.actions(stmt)):
                yield violation(
                    f"{where} statement {stmt.get('Sid', '')!r} allows every action "
                    f"on {iamdoc.resources(stmt)}",
                    "list the actions the principal needs",
                )


@resource_rule(
    "iam-no-passrole-wildcard",
    description="No identity policy allows iam:PassRole (directly or through a wildcard action) on every "
    "resource: that lets the holder hand any role, admin included, to a service.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html",
    types=(*IDENTITY_POLICIES, ROLE),
    unknowns=deferred_unknowns("document"),
    defers=unknown_identity_documents,
)
def iam_no_passrole_wildcard(r: Res, ctx: Ctx) -> Iterator[Violation]:
    for where, stmts in identity_documents(r):
        if stmts is UNKNOWN:
            if not ctx.at_preview:
                yield _unknown(where)
            continue
        for stmt in stmts:
            passes = any(iamdoc.action_matches(a, "iam:PassRole") for a in iamdoc.actions(stmt))
            if iamdoc.allows(stmt) and passes and "*" in iamdoc.resources(stmt):
                yield violation(
                    f"{where} statement {stmt.get('Sid', '')!r} allows iam:PassRole on '*'",
                    "list the role ARNs that may be passed, with an iam:PassedToService condition",
                )


def _has_condition(stmt: dict[str, Any], suffix: str, *, exact: bool) -> bool:
    """A condition on a key ending with ``suffix`` (``:sub``), with StringEquals when ``exact``."""
    for key, checks in iamdoc.condition_keys(stmt).items():
        if key.endswith(suffix):
            for op, value in checks:
                if not exact:
                    return True
                if op == "StringEquals" or (
                    op == "StringLike" and not any("*" in str(v) or "?" in str(v) for v in as_list(value))
                ):
                    return True
    return False


@resource_rule(
    "iam-trust-scoped",
    description="Role trust policies name who may assume the role: no wildcard principal without an "
    "account/organization condition, and web-identity (OIDC/IRSA) trust limited to one subject and "
    "audience.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html",
    types=(ROLE,),
    unknowns=deferred_unknowns("trust policy"),
    defers=unknown_trust_policy,
)
def iam_trust_scoped(r: Res, ctx: Ctx) -> Iterator[Violation]:
    stmts = iamdoc.statements(r.get("assumeRolePolicy"))
    if stmts is UNKNOWN:
        if not ctx.at_preview:
            yield _unknown("the trust policy")
        return
    for stmt in stmts:
        if not iamdoc.allows(stmt):
            continue
        sid = stmt.get("Sid", "")
        for kind, value in iamdoc.principals(stmt):
            if iamdoc.is_wildcard_principal(kind, value) and not iamdoc.wildcard_scoped(stmt):
                yield violation(
                    f"trust statement {sid!r} lets any principal assume the role", "name the principals"
                )
            if kind == "Federated" and ":oidc-provider/" in value:
                if not _has_condition(stmt, ":sub", exact=True):
                    yield violation(
                        f"trust statement {sid!r} lets any identity of {value.rsplit('/', 1)[-1]} "
                        "assume the role",
                        "add StringEquals <issuer>:sub system:serviceaccount:<namespace>:<name>",
                    )
                if not _has_condition(stmt, ":aud", exact=False):
                    yield violation(
                        f"trust statement {sid!r} does not check the token audience",
                        "add StringEquals <issuer>:aud sts.amazonaws.com",
                    )


# Service principals that send aws:SourceAccount / aws:SourceArn when they assume a role, so a trust policy
# can refuse a confused deputy acting for another account.
DEPUTY_SERVICES = [
    "vpc-flow-logs.amazonaws.com",
    "s3.amazonaws.com",
    "cloudtrail.amazonaws.com",
    "logs.amazonaws.com",
    "delivery.logs.amazonaws.com",
    "events.amazonaws.com",
    "sns.amazonaws.com",
    "ecr.amazonaws.com",
]


@resource_rule(
    "iam-trust-confused-deputy",
    description="Trust policies for AWS services that send the caller's account (flow logs, S3, CloudTrail, "
    "EventBridge ...) check aws:SourceAccount or aws:SourceArn.",
    severity=MEDIUM,
    enforcement=ADVISORY,
    doc="https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html",
    types=(ROLE,),
    unknowns=deferred_unknowns("trust policy"),
    defers=unknown_trust_policy,
    config={
        "services": {
            "type": "array",
            "items": {"type": "string"},
            "default": DEPUTY_SERVICES,
            "description": "Service principals whose trust must carry a source account/ARN condition.",
        }
    },
)
def iam_trust_confused_deputy(r: Res, ctx: Ctx) -> Iterator[Violation]:
    stmts = iamdoc.statements(r.get("assumeRolePolicy"))
    if stmts is UNKNOWN:
        if not ctx.at_preview:
            yield _unknown("the trust policy")
        return
    services = set(ctx.config["services"])
    for stmt in stmts:
        if not iamdoc.allows(stmt):
            continue
        named = [v for k, v in iamdoc.principals(stmt) if k == "Service" and v in services]
        keys = iamdoc.condition_keys(stmt)
        if named and not any(k in keys for k in ("aws:sourceaccount", "aws:sourcearn", "aws:sourceorgid")):
            yield violation(
                f"trust for {named} has no aws:SourceAccount/aws:SourceArn condition",
                "add StringEquals aws:SourceAccount <account> (and ArnLike aws:SourceArn where the service "
                "sends it)",
            )
