"""KMS keys: rotation, deletion window, key policies only break-glass and the deployer change, and
resource policies without wildcard principals."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infra.core.naming import StackNames

from . import iamdoc
from .core import (
    CRITICAL,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Violation,
    as_list,
    deferred_unknowns,
    dig,
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


def _policy_changers(platform: Mapping[str, Any]) -> tuple[str, str | None]:
    """The break-glass role's name (derived as the program derives it) and the deployer role's name
    (``security.account.deployer_role``) of the stack under review."""
    names = StackNames(
        str(platform.get("name_prefix") or "aiplat"),
        str(platform.get("environment") or ""),
        str(platform.get("role") or ""),
        str(platform.get("region") or ""),
    )
    deployer = dig(platform, "security", "account", "deployer_role")
    return names.role_name("break-glass"), deployer if isinstance(deployer, str) else None


def _stack_protected(platform: Mapping[str, Any]) -> bool:
    protect = dig(platform, "security", "protect")
    return protect if isinstance(protect, bool) else platform.get("environment") == "prod"


def _guards_policy_changes(stmt: dict[str, Any]) -> list[str] | None:
    """For a Deny of ``kms:PutKeyPolicy`` to every principal but those of an ``ArnNotEquals`` /
    ``ArnNotLike`` on ``aws:PrincipalArn``: the role names it exempts (None: not such a statement)."""
    if stmt.get("Effect") != "Deny" or ("AWS", "*") not in iamdoc.principals(stmt):
        return None
    if not any(iamdoc.action_matches(a, "kms:PutKeyPolicy") for a in iamdoc.actions(stmt)):
        return None
    keys = iamdoc.condition_keys(stmt)
    if set(keys) != {"aws:principalarn"}:
        return None  # any other condition narrows the deny: not a guard for everyone else
    exempt: list[str] = []
    for operator, value in keys["aws:principalarn"]:
        if operator not in ("ArnNotEquals", "ArnNotLike"):
            return None
        exempt += [str(v) for v in as_list(value)]
    return [e.rsplit(":role/", 1)[-1] if ":role/" in e else e for e in exempt]


@resource_rule(
    "kms-key-policy-change-guarded",
    description="In protected stacks, each key policy denies kms:PutKeyPolicy to every principal but the "
    "break-glass role and the deployer role: whoever rewrites a key policy can grant itself decrypt or "
    "deletion.",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#prevent-unmanageable-key",
    types=(KEY,),
    unknowns=deferred_unknowns("key policy"),
    defers=lambda r: unknown_resource_policy(r) if r.type == KEY else [],
)
def kms_key_policy_change_guarded(r: Res, ctx: Ctx) -> Iterator[Violation]:
    platform = ctx.stack.platform or {}
    if not _stack_protected(platform):
        return
    stmts = iamdoc.statements(r.get("policy"))
    if stmts is UNKNOWN:
        if not ctx.at_preview:
            yield violation("the key policy is unknown outside a preview", "build it from known values")
        return
    glass, deployer = _policy_changers(platform)
    allowed = {glass} | ({deployer} if deployer else set())
    guards = [g for g in (_guards_policy_changes(s) for s in stmts) if g is not None]
    if not guards:
        yield violation(
            f"{r.label}'s policy lets any principal with kms:PutKeyPolicy (e.g. an account admin) rewrite it",
            f"add a Deny of kms:PutKeyPolicy to Principal '*' with ArnNotEquals aws:PrincipalArn [the "
            f"break-glass role {glass}, the deployer role]",
        )
        return
    if not any(set(g) <= allowed for g in guards):
        others = sorted({name for g in guards for name in g} - allowed)
        yield violation(
            f"{r.label}'s policy lets {others} change it besides break-glass ({glass}) and the deployer "
            f"({deployer or 'security.account.deployer_role unset'})",
            "exempt only the break-glass role and the deployer role from the kms:PutKeyPolicy deny",
        )
