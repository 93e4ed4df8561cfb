"""The release path: only the publisher writes ``release/`` of the buckets that hold model releases, and
only by creating new objects (issue 24, docs/platform/security.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.core.naming import StackNames

from . import iamdoc
from .aws import BUCKET_TYPES
from .core import (
    CRITICAL,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    deferred_unknowns,
    stack_rule,
    violation,
)
from .s3 import _bucket_arns, _covers, _policy_statements, _unknown_policy, unknown_bucket_policy

RELEASE_PREFIX = "release"  # infra/storage/config/storage.py RELEASE_PREFIX
# The program's artifacts bucket ("storage-artifacts") and its replicas ("replication-<region>-artifacts").
RELEASE_BUCKET_SUFFIX = "-artifacts"
WRITES = ("s3:PutObject", "s3:DeleteObject")


def _release_writers(platform: dict[str, Any]) -> set[str] | None:
    """Role names that may write ``release/``: the publisher and break-glass, derived as the program
    derives them (``StackNames.role_name``); None without the stack's config to derive them from."""
    try:
        names = StackNames(
            str(platform.get("name_prefix") or "aiplat"),
            str(platform.get("environment") or ""),
            str(platform.get("role") or ""),
            str(platform.get("region") or ""),
        )
        return {names.role_name("publisher"), names.role_name("break-glass")}
    except ValueError:
        return None


def _denies_everyone(stmt: dict[str, Any]) -> bool:
    return stmt.get("Effect") == "Deny" and any(
        iamdoc.is_wildcard_principal(*p) for p in iamdoc.principals(stmt)
    )


def _exempt(stmt: dict[str, Any]) -> list[str] | None:
    """For a Deny to every principal whose only condition is ``ArnNotEquals``/``ArnNotLike`` on
    ``aws:PrincipalArn``: the role names it exempts (None: not such a statement)."""
    if not _denies_everyone(stmt):
        return None
    keys = iamdoc.condition_keys(stmt)
    if set(keys) != {"aws:principalarn"}:
        return None
    out: list[str] = []
    for operator, value in keys["aws:principalarn"]:
        if operator not in ("ArnNotEquals", "ArnNotLike"):
            return None
        out += [str(v).rsplit(":role/", 1)[-1] for v in as_list(value)]
    return out


def _guards(stmt: dict[str, Any], release_arn: str, action: str) -> bool:
    return any(iamdoc.action_matches(a, action) for a in iamdoc.actions(stmt)) and _covers(
        iamdoc.resources(stmt), release_arn
    )


def _create_only(stmt: dict[str, Any], release_arn: str) -> bool:
    """A Deny of s3:PutObject on release/ to every principal when the request has no If-None-Match."""
    if not _denies_everyone(stmt):
        return False
    if not _guards(stmt, release_arn, "s3:PutObject"):
        return False
    nulls = iamdoc.condition_keys(stmt).get("s3:if-none-match", [])
    return any(op == "Null" and str(v).lower() == "true" for op, v in nulls)


def _unknown_release_bucket_policy(r: Res) -> list[str]:
    """``["policy"]`` for an unknown policy of a release bucket (the program names it
    ``<bucket resource>-policy``); other buckets' policies are not this rule's."""
    if not r.name.endswith(f"{RELEASE_BUCKET_SUFFIX}-policy"):
        return []
    return unknown_bucket_policy(r)


@stack_rule(
    "s3-release-writers-only-publisher",
    description="A bucket holding model releases (the artifacts bucket, its replicas) denies s3:PutObject "
    "and s3:DeleteObject on release/* to every role but the publisher and break-glass, and every PutObject "
    "there without If-None-Match (create-only): what is under release/ is served in production.",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html",
    unknowns=deferred_unknowns("policy document", kind="stack")
    + " A bucket whose name is unknown is judged on a release/ resource of any bucket.",
    defers=_unknown_release_bucket_policy,
)
def s3_release_writers_only_publisher(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    platform = ctx.stack.platform or {}
    allowed = _release_writers(platform)
    who = sorted(allowed) if allowed is not None else "<prefix>-<region code>-publisher, -break-glass"
    fix = (
        "add a Deny for Principal '*' of s3:PutObject and s3:DeleteObject on <bucket>/release/* with "
        f"Condition ArnNotEquals aws:PrincipalArn [the publisher and break-glass roles: {who}], "
        "and a Deny of s3:PutObject there under Null s3:if-none-match 'true' "
        "(infra/storage/documents.py release_guard_statements)"
    )
    for bucket in stack.of_type(*BUCKET_TYPES):
        if not bucket.name.endswith(RELEASE_BUCKET_SUFFIX):
            continue
        stmts = _policy_statements(bucket, stack)
        if stmts is UNKNOWN:
            yield from _unknown_policy(bucket, ctx, fix)
            continue
        arns = _bucket_arns(bucket)
        release_arn = f"{arns[0]}/{RELEASE_PREFIX}/x" if arns else f"arn:aws:s3:::*/{RELEASE_PREFIX}/x"
        for action in WRITES:
            exempts = [e for s in stmts if _guards(s, release_arn, action) and (e := _exempt(s)) is not None]
            if not exempts:
                yield violation(
                    f"bucket {bucket.name!r} lets any role with {action} on it write {RELEASE_PREFIX}/",
                    fix,
                    bucket.urn,
                )
            elif allowed is not None and all(set(e) - allowed for e in exempts):
                others = sorted(set(exempts[0]) - allowed)
                yield violation(
                    f"bucket {bucket.name!r} lets {others} {action} under {RELEASE_PREFIX}/ besides the "
                    "publisher and break-glass",
                    fix,
                    bucket.urn,
                )
        if not any(_create_only(s, release_arn) for s in stmts):
            yield violation(
                f"bucket {bucket.name!r} lets a publisher overwrite a release (no If-None-Match required)",
                fix,
                bucket.urn,
            )
