"""IAM policy evaluation over a plan, for the principals the platform creates or names, in one account.

The logic of AWS's evaluation for requests within one account
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
an explicit Deny in any applicable policy (identity, bucket, key) wins; S3: an Allow in the identity policy
or in the bucket policy naming the principal; KMS: the key policy must allow the principal itself, or the
account (the root statement, which then delegates to IAM) and the identity policy must allow too
(https://docs.aws.amazon.com/kms/latest/developerguide/determining-access-key-policy.html); everything else:
the identity policy. Conditions follow the condition operators' reference
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html): a
key missing from the request fails a positive operator and satisfies a negated one (``StringNotEquals``,
``ArnNotEquals``, ...); ``...IfExists`` holds when the key is missing; ``Null`` tests presence;
``ForAnyValue:``/``ForAllValues:`` for multi-valued keys. Principals: ``*``, a role ARN, or the account
(``arn:aws:iam::<account>:root`` or the bare id: it delegates to the identity policy, it grants nothing by
itself). Permission boundaries, SCPs and session policies are not modelled: the platform sets none.

This is the tests' own model of AWS's documented logic, not AWS's engine: it is used to assert who may do
what with the documents the plans deploy.
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan, RecordedResource

ADMIN = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]


def _list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, list | tuple) else [v]


def _glob(pattern: str, value: str, *, case: bool = True) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _match(base: str, pattern: Any, value: Any) -> bool:
    p, v = str(pattern), str(value)
    if base in ("StringEquals", "ArnEquals"):
        return p == v if base == "StringEquals" else _glob(p, v)
    if base == "StringEqualsIgnoreCase":
        return p.lower() == v.lower()
    if base in ("StringLike", "ArnLike"):
        return _glob(p, v)
    if base == "Bool":
        return p.lower() == v.lower()
    if base.startswith("Numeric"):
        a, b = _num(value), _num(pattern)
        if a is None or b is None:
            return False
        op = base.removeprefix("Numeric")
        return {
            "Equals": a == b,
            "LessThan": a < b,
            "LessThanEquals": a <= b,
            "GreaterThan": a > b,
            "GreaterThanEquals": a >= b,
        }[op]
    raise NotImplementedError(f"condition operator {base}")


_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
    "NumericNotEquals": "NumericEquals",
}


def condition_holds(condition: Mapping[str, Mapping[str, Any]] | None, context: Mapping[str, Any]) -> bool:
    """Whether every operator block of ``condition`` holds for the request ``context`` (keys compared
    case-insensitively, as IAM does)."""
    ctx = {k.lower(): v for k, v in context.items()}
    for operator, block in (condition or {}).items():
        qualifier, _, op = operator.rpartition(":")
        if_exists = op.endswith("IfExists")
        op = op.removesuffix("IfExists")
        for key, patterns in block.items():
            present = key.lower() in ctx
            values = _list(ctx.get(key.lower()))
            patterns = _list(patterns)
            if op == "Null":
                (want,) = patterns
                if (str(want).lower() == "true") == present:
                    return False
                continue
            if not present:
                if if_exists or op in _NEGATED:
                    continue
                return False
            base = _NEGATED.get(op, op)

            def any_match(v: Any, base: str = base, patterns: list[Any] = patterns) -> bool:
                return any(_match(base, p, v) for p in patterns)

            if qualifier == "ForAllValues":
                hit = all(any_match(v) for v in values)
            else:  # single-valued keys, and ForAnyValue
                hit = any(any_match(v) for v in values)
            if op in _NEGATED:
                hit = not (any(any_match(v) for v in values))
            if not hit:
                return False
    return True


def _action_in(stmt: Mapping[str, Any], action: str) -> bool:
    if "NotAction" in stmt:
        return not any(_glob(a, action, case=False) for a in _list(stmt["NotAction"]))
    return any(_glob(a, action, case=False) for a in _list(stmt.get("Action")))


def _resource_in(stmt: Mapping[str, Any], resource: str) -> bool:
    if "NotResource" in stmt:
        return not any(_glob(r, resource) for r in _list(stmt["NotResource"]))
    return any(_glob(r, resource) for r in _list(stmt.get("Resource", "*")))


def _account_principal(value: str, account: str) -> bool:
    return value in (account, f"arn:aws:iam::{account}:root")


def _principal_in(stmt: Mapping[str, Any], principal: Principal, *, direct: bool) -> bool:
    """Whether a resource-policy statement names ``principal``: ``direct`` only by itself or ``*`` (a grant
    to the account delegates and is not direct)."""
    p = stmt.get("Principal")
    if p == "*":
        return True
    if not isinstance(p, Mapping):
        return False
    if principal.service:
        return principal.arn in _list(p.get("Service"))
    for value in _list(p.get("AWS")):
        if value in ("*", principal.arn):
            return True
        if not direct and _account_principal(value, principal.account):
            return True
    return False


@dataclass(frozen=True)
class Principal:
    """Who asks: a role (``arn``, its identity statements) or a service principal; ``context``: the
    request keys its sessions carry (aws:MultiFactorAuthPresent for an MFA session)."""

    name: str
    arn: str
    statements: tuple[Mapping[str, Any], ...] = ()
    account: str = ACCOUNT_ID
    service: bool = False
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """What is asked for: a resource ARN, its resource policy statements (a bucket's or a key's), its
    tags, and which evaluation applies (``s3``, ``kms`` or identity only)."""

    arn: str
    kind: str  # "s3" | "kms" | "iam"
    policy: tuple[Mapping[str, Any], ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


def _applies(stmt: Mapping[str, Any], action: str, resource: str, ctx: Mapping[str, Any]) -> bool:
    return (
        _action_in(stmt, action)
        and _resource_in(stmt, resource)
        and condition_holds(stmt.get("Condition"), ctx)
    )


def decide(
    principal: Principal, action: str, target: Target, context: Mapping[str, Any] | None = None
) -> str:
    """``"allow"``, ``"deny"`` (an explicit Deny) or ``"implicit"`` (nothing allows it)."""
    ctx: dict[str, Any] = {
        "aws:PrincipalArn": principal.arn,
        "aws:PrincipalAccount": principal.account,
        "aws:SecureTransport": "true",
        **{f"aws:ResourceTag/{k}": v for k, v in target.tags.items()},
        **principal.context,
        **(context or {}),
    }
    identity = [] if principal.service else list(principal.statements)
    resource = [s for s in target.policy if _principal_in(s, principal, direct=False)]
    for s in [*identity, *resource]:
        if s.get("Effect") == "Deny" and _applies(s, action, target.arn, ctx):
            return "deny"
    identity_allows = any(
        s.get("Effect") == "Allow" and _applies(s, action, target.arn, ctx) for s in identity
    )
    direct = any(
        s.get("Effect") == "Allow"
        and _principal_in(s, principal, direct=True)
        and _applies(s, action, target.arn, ctx)
        for s in target.policy
    )
    if target.kind == "kms":
        delegated = any(
            s.get("Effect") == "Allow"
            and any(
                _account_principal(v, principal.account) for v in _list((s.get("Principal") or {}).get("AWS"))
            )
            and _applies(s, action, target.arn, ctx)
            for s in target.policy
            if isinstance(s.get("Principal"), Mapping)
        )
        return "allow" if direct or (delegated and identity_allows) else "implicit"
    if target.kind == "s3":
        return "allow" if direct or identity_allows else "implicit"
    return "allow" if identity_allows else "implicit"


# -- reading a plan ----------------------------------------------------------------------------------------


def _doc(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = json.loads(value)
    if not isinstance(value, Mapping):
        return []
    return [s for s in _list(value.get("Statement")) if isinstance(s, Mapping)]


def _region_of(plan: Plan, r: RecordedResource, providers: Mapping[str, RecordedResource]) -> str:
    """The region of ``r``: its own input, else its provider's (a reference is ``<provider urn>::<id>``)."""
    if r.inputs.get("region"):
        return r.inputs["region"]
    provider = providers.get((r.provider or "").rsplit("::", 1)[0])
    return (provider.inputs.get("region") if provider else None) or plan.region


@dataclass
class PlanIam:
    """The roles, buckets and keys of one plan, with their documents."""

    plan: Plan
    roles: dict[str, Principal]  # resource name -> principal
    buckets: dict[str, Target]  # bucket name -> target
    keys: dict[str, Target]  # resource name -> target

    @classmethod
    def of(cls, plan: Plan) -> PlanIam:
        by_urn = {r.urn: r for r in plan.resources}
        role_names: dict[str, str] = {}  # role urn -> physical name (as the mocks resolved it)
        statements: dict[str, list[Mapping[str, Any]]] = {}
        for r in plan.resources:
            if r.type == "aws:iam/role:Role":
                role_names.setdefault(r.urn, r.inputs.get("name") or r.name)
                statements.setdefault(r.urn, [])
                for p in _list(r.inputs.get("inlinePolicies")):
                    statements[r.urn] += _doc(p.get("policy"))
        for r in plan.resources:
            roles = [u for u in r.property_dependencies.get("role", []) if u in statements]
            if not roles:
                continue
            (role,) = roles
            if isinstance(r.inputs.get("role"), str) and not by_urn[role].inputs.get("name"):
                role_names[role] = r.inputs["role"]
            if r.type == "aws:iam/rolePolicy:RolePolicy":
                statements[role] += _doc(r.inputs.get("policy"))
            elif r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
                for urn in r.property_dependencies.get("policyArn", []):
                    if urn in by_urn and by_urn[urn].type == "aws:iam/policy:Policy":
                        statements[role] += _doc(by_urn[urn].inputs.get("policy"))
                # AWS managed policies (node, CNI, EBS CSI, cluster) grant nothing on our buckets or keys
        roles = {
            by_urn[u].name: Principal(
                name=by_urn[u].name,
                arn=f"arn:aws:iam::{ACCOUNT_ID}:role/{role_names[u]}",
                statements=tuple(statements[u]),
            )
            for u in statements
        }
        policies: dict[str, list[Mapping[str, Any]]] = {}
        for r in plan.by_type("aws:s3/bucketPolicy:BucketPolicy"):
            policies.setdefault(r.inputs["bucket"], []).extend(_doc(r.inputs.get("policy")))
        buckets = {
            r.inputs["bucket"]: Target(
                f"arn:aws:s3:::{r.inputs['bucket']}",
                "s3",
                tuple(policies.get(r.inputs["bucket"], [])),
                r.inputs.get("tags") or {},
            )
            for r in plan.by_type("aws:s3/bucket:Bucket")
            if isinstance(r.inputs.get("bucket"), str)
        }
        keys = {}
        for r in plan.by_type("aws:kms/key:Key"):
            region = _region_of(plan, r, by_urn)
            key_id = uuid.uuid5(
                uuid.NAMESPACE_URL, f"{region}/{r.name}"
            )  # the plan's mocks (infra/plan/mocks.py)
            keys[r.name] = Target(
                f"arn:aws:kms:{region}:{ACCOUNT_ID}:key/{key_id}",
                "kms",
                tuple(_doc(r.inputs.get("policy"))),
                r.inputs.get("tags") or {},
            )
        return cls(plan, roles, buckets, keys)

    def role(self, suffix: str) -> Principal:
        """The one role whose resource name ends with ``suffix``."""
        (found,) = [p for n, p in self.roles.items() if n.endswith(suffix)]
        return found

    def bucket(self, suffix: str) -> Target:
        (found,) = [t for n, t in self.buckets.items() if n.endswith(suffix)]
        return found

    def key(self, name: str) -> Target:
        return self.keys[name]


def named(name: str, arn: str, statements: Sequence[Mapping[str, Any]] = ADMIN, **context: Any) -> Principal:
    """A principal the platform names but does not create (the deployer, an account administrator): its
    identity policy is not ours, so it is taken to allow everything (the worst case for a guard)."""
    return Principal(name=name, arn=arn, statements=tuple(statements), context=context)


def exemptions(targets: Iterable[Target]) -> list[tuple[Target, Mapping[str, Any], str]]:
    """(target, Deny statement, exempted ARN) for every Deny of a resource policy that binds every principal
    but the ones its ``ArnNotEquals aws:PrincipalArn`` names."""
    out = []
    for t in targets:
        for s in t.policy:
            if s.get("Effect") != "Deny":
                continue
            cond = s.get("Condition") or {}
            for arn in _list((cond.get("ArnNotEquals") or {}).get("aws:PrincipalArn")):
                out.append((t, s, arn))
    return out
