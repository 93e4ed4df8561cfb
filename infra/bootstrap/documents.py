"""The deployer role's least-privilege policy, built from a stack's plan. Pure: no AWS, no files.

For each resource type the plan registers, the actions of ``actions.ACTIONS`` (create, read, update,
delete), and for each data call the program makes, ``actions.INVOKES``. Each action is looked up in the
Service Authorization Reference (SAR, the ``iam-definition.json`` ``infra/io/iam_reference.py`` reads): an
action that is not there is refused, and the resource types it supports decide its ``Resource``: the ARNs of
the stack's own names where every resource type the action acts on is named by the plan (``NAME_SCOPES``),
``*`` where AWS supports no resource-level permission for it or the plan does not name it (IDs that AWS
chooses: VPCs, keys, certificates). Statements are packed into managed policies within IAM's size quota
(``infra/core/policy_quotas.py``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.bootstrap.actions import ACTIONS, INVOKES, STACK_REFERENCE, no_aws_api
from infra.bootstrap.scopes import FSX_S3_ROLE, FSX_S3_ROLE_ACTIONS, NAME_SCOPES, SERVICE_LINKED_ROLES, SLR
from infra.core.errors import ConfigError
from infra.core.naming import partition_of
from infra.core.policy_quotas import MANAGED_POLICIES_PER_ROLE, MANAGED_POLICY_CHARS, iam_size

# the policy grammar: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_grammar.html
POLICY_VERSION = "2012-10-17"
_VARIABLE = re.compile(r"\$\{[^}]+\}")
# the most name patterns one resource type keeps before names that share a start are merged
_MAX_PATTERNS = 4


@dataclass(frozen=True)
class Resource:
    """What the policy needs of one registered resource: its type token, logical name and inputs."""

    type: str
    name: str
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    """The Pulumi state bucket (and key prefix) and the secrets key's alias every stack uses."""

    bucket: str
    prefix: str
    secrets_alias: str | None
    secrets_region: str | None


@dataclass(frozen=True)
class DeployerPolicy:
    """The managed policies of a stack's deployer, and which actions each planned type needs."""

    documents: list[dict[str, Any]]
    actions_by_type: dict[str, tuple[str, ...]]
    no_actions: dict[str, str]  # type -> why the deployer needs no IAM action for it
    source: str

    @property
    def actions(self) -> set[str]:
        return {a for d in self.documents for s in d["Statement"] for a in _as_list(s["Action"])}


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _merge(names: set[str]) -> list[str]:
    """At most a few patterns for ``names``: names that share their first two words merged into their
    common start and ``*`` (``aiplat-prod-train-use1-ebs-csi``, ``...-eks-node`` -> ``...-use1-e*``)."""
    if len(names) <= _MAX_PATTERNS:
        return sorted(names)
    groups: dict[str, list[str]] = {}
    for n in sorted(names):
        key = "".join(re.split(r"([-/])", n)[:3])
        groups.setdefault(key, []).append(n)
    out = []
    for members in groups.values():
        out.append(members[0] if len(members) == 1 else os.path.commonprefix(members).rstrip("*") + "*")
    return sorted(set(out))


def name_patterns(resources: Iterable[Resource]) -> dict[tuple[str, str], tuple[str, list[str]] | None]:
    """(service, SAR resource type) -> (ARN variable, name patterns) the plan names; None where a resource
    of that type has a name the plan does not know (then the ARN keeps ``*``)."""
    names: dict[tuple[str, str], set[str] | None] = {}
    var: dict[tuple[str, str], str] = {}
    for r in resources:
        scope = NAME_SCOPES.get(r.type)
        if scope is None:
            continue
        key = (scope.service, scope.resource)
        var[key] = scope.var
        value = r.inputs.get(scope.input)
        if isinstance(value, str) and value and "*" not in value:
            name = value.removeprefix(scope.strip)
        elif value is None and scope.autoname:
            name = f"{r.name}-*"  # Pulumi's auto-name: the logical name and a random suffix
        else:
            names[key] = None  # unknown until deployed: no scope for this type
            continue
        if key not in names:
            names[key] = set()
        bucket = names[key]
        if bucket is not None:
            bucket.add(name)
    return {k: (var[k], _merge(v)) if v else None for k, v in names.items()}


def _fill(template: str, var: str | None, pattern: str, *, partition: str, account: str | None) -> str:
    arn = template.replace("${Partition}", partition).replace("${Account}", account or "*")
    arn = arn.replace("${Region}", "*")  # a stack also creates in its replica regions
    if var is not None:
        arn = arn.replace("${" + var + "}", pattern)
    return _VARIABLE.sub("*", arn)


def action_resources(
    action: str,
    sar: Mapping[str, Any],
    patterns: Mapping[tuple[str, str], tuple[str, list[str]] | None],
    *,
    needed_by: Iterable[str],
    partition: str,
    account: str | None,
) -> tuple[str, ...]:
    """The ``Resource`` of ``action`` (needed by the planned types ``needed_by``), ``*`` unless scoped:

    - an action with required resource types (SAR: marked ``*``) acts on those: their ARNs with the stack's
      names when the plan names every one (the optional types it lists, with any name);
    - an action whose resource types are all optional is scoped when each planned type that needs it is a
      named type (``scopes.NAME_SCOPES``) of a resource type the action lists: a type named by an ID AWS
      chooses (``ec2:CreateTags`` on a VPC) leaves it ``*``.
    """
    service, _, name = action.partition(":")
    privilege = sar[service]["privileges"][name]
    listed = {t: v["required"] for t, v in privilege["resource_types"].items() if t}
    if not listed:
        return ("*",)  # no resource-level permission (SAR: the resource types column is empty)
    required = [t for t, req in listed.items() if req]
    if required:
        targets = required
        if any(patterns.get((service, t)) is None for t in required):
            return ("*",)
        extra = [t for t in listed if t not in required]
    else:
        scopes = [NAME_SCOPES.get(t) for t in needed_by]
        if not all(s is not None and s.service == service and s.resource in listed for s in scopes):
            return ("*",)
        targets = sorted({s.resource for s in scopes if s is not None})
        if any(patterns.get((service, t)) is None for t in targets):
            return ("*",)
        extra = []
    arns: set[str] = set()
    for t in targets:
        var, names = patterns[(service, t)]  # type: ignore[misc]
        template = sar[service]["resources"][t]["arn"]
        arns.update(_fill(template, var, n, partition=partition, account=account) for n in names)
    for t in extra:  # a request may name one of these too (a web ACL's managed rule groups)
        arns.add(_fill(sar[service]["resources"][t]["arn"], None, "", partition=partition, account=None))
    return tuple(sorted(arns))


def check_actions(actions: Iterable[str], sar: Mapping[str, Any]) -> list[str]:
    """The actions the SAR does not list (exact spelling)."""
    missing = []
    for action in actions:
        service, _, name = action.partition(":")
        if name not in sar.get(service, {}).get("privileges", {}):
            missing.append(action)
    return sorted(set(missing))


def backend_statements(backend: Backend, *, partition: str, account: str | None) -> list[dict[str, Any]]:
    """Read and write the stack state under the backend's prefix; encrypt and decrypt with the secrets key
    (the S3 backend: https://www.pulumi.com/docs/iac/concepts/state-and-backends/#aws-s3; SSE-KMS objects
    need kms:GenerateDataKey and kms:Decrypt of the writer)."""
    bucket = f"arn:{partition}:s3:::{backend.bucket}"
    prefix = f"{backend.prefix.strip('/')}/" if backend.prefix.strip("/") else ""
    out: list[dict[str, Any]] = [
        {
            "Sid": "StateList",
            "Effect": "Allow",
            "Action": ["s3:GetBucketLocation", "s3:ListBucket"],
            "Resource": bucket,
        },
        {
            "Sid": "StateObjects",
            "Effect": "Allow",
            "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
            "Resource": f"{bucket}/{prefix}*",
        },
    ]
    if backend.secrets_alias:
        out.append(
            {
                "Sid": "SecretsKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"],
                "Resource": f"arn:{partition}:kms:{backend.secrets_region or '*'}:{account or '*'}:key/*",
                # https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-resource-aliases
                "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": backend.secrets_alias}},
            }
        )
    return out


def _service_linked_statements(services: Sequence[str], *, partition: str, account: str | None) -> list[dict]:
    """Create the service-linked roles of ``services`` only (condition ``iam:AWSServiceName``:
    https://docs.aws.amazon.com/IAM/latest/UserGuide/using-service-linked-roles.html#service-linked-role-permissions)."""
    if not services:
        return []
    roles = f"arn:{partition}:iam::{account or '*'}:role/aws-service-role/"
    out: list[dict[str, Any]] = [
        {
            "Sid": "ServiceLinkedRoles",
            "Effect": "Allow",
            "Action": [SLR],
            "Resource": f"{roles}*",
            "Condition": {"StringEquals": {"iam:AWSServiceName": list(services)}},
        }
    ]
    if "s3.data-source.lustre.fsx.amazonaws.com" in services:
        out.append(
            {
                "Sid": "FsxS3DataRepositoryRole",
                "Effect": "Allow",
                "Action": list(FSX_S3_ROLE_ACTIONS),
                "Resource": f"arn:{partition}:iam::{account or '*'}:role/{FSX_S3_ROLE}",
            }
        )
    return out


def unknown_types(types: Iterable[str]) -> list[str]:
    """Types the tables neither map to actions nor explain."""
    return sorted(
        t for t in set(types) if t not in ACTIONS and t != STACK_REFERENCE and no_aws_api(t) is None
    )


def _fitting(s: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    """``s``, or its actions halved into statements of at most ``limit`` characters each."""
    if iam_size(s) <= limit:
        return [dict(s)]
    actions = _as_list(s["Action"])
    half = len(actions) // 2
    if half == 0:
        raise ValueError(f"statement {s.get('Sid')} alone is over {limit} characters")
    return [
        p
        for i, part in enumerate((actions[:half], actions[half:]))
        for p in _fitting({**s, "Sid": f"{s['Sid']}{i}", "Action": part}, limit)
    ]


def pack(statements: Sequence[Mapping[str, Any]], limit: int = MANAGED_POLICY_CHARS) -> list[dict[str, Any]]:
    """Statements packed into as few policy documents as fit ``limit`` (IAM's count, no white space);
    a statement too large alone is split by its actions."""
    envelope = iam_size({"Version": POLICY_VERSION, "Statement": []})
    pieces = [p for s in statements for p in _fitting(s, limit - envelope)]
    docs: list[dict[str, Any]] = []
    for p in sorted(pieces, key=iam_size, reverse=True):  # first fit, largest first
        for d in docs:
            if iam_size({**d, "Statement": [*d["Statement"], p]}) <= limit:
                d["Statement"].append(p)
                break
        else:
            docs.append({"Version": POLICY_VERSION, "Statement": [p]})
    for d in docs:
        d["Statement"].sort(key=lambda s: s["Sid"])
    return sorted(docs, key=lambda d: d["Statement"][0]["Sid"])


def deployer_policy(
    resources: Sequence[Resource],
    invokes: Iterable[str],
    sar: Mapping[str, Any],
    *,
    region: str,
    account: str | None,
    backend: Backend | None,
    source: str,
    field: str = "plan",
) -> DeployerPolicy:
    """The deployer's managed policies for what a plan registers and the data calls it makes.

    Raises ConfigError for a type the tables do not know, and ValueError for an action the SAR lacks (a
    mistake in ``actions.py``, caught by the tests)."""
    types = sorted({r.type for r in resources})
    invokes = sorted(set(invokes))
    unknown = unknown_types(types) + [t for t in invokes if t not in INVOKES]
    if unknown:
        raise ConfigError(
            field,
            f"registers or calls {', '.join(unknown)}, whose IAM actions the deployer policy does not know",
            "add each type to ACTIONS (or NO_AWS_API), each data call to INVOKES, in "
            "infra/bootstrap/actions.py, its actions from the provider's page and the Service Authorization "
            "Reference",
        )
    partition = partition_of(region)
    by_type: dict[str, tuple[str, ...]] = {t: ACTIONS[t].all for t in types if t in ACTIONS}
    no_actions = {t: why for t in types if (why := no_aws_api(t)) is not None}
    called = sorted({a for token in invokes for a in INVOKES.get(token, ())})
    wanted = sorted({a for acts in by_type.values() for a in acts} | set(called))
    missing = check_actions(wanted, sar)
    if missing:
        raise ValueError(f"not in the Service Authorization Reference ({source}): {', '.join(missing)}")
    slr_services = sorted({s for t in by_type for s in SERVICE_LINKED_ROLES.get(t, ())})
    if lacking := [t for t, acts in by_type.items() if SLR in acts and t not in SERVICE_LINKED_ROLES]:
        raise ValueError(f"{', '.join(lacking)} need {SLR} but name no service (SERVICE_LINKED_ROLES)")
    wanted = [a for a in wanted if a != SLR]
    patterns = name_patterns(resources)
    grouped: dict[tuple[str, ...], list[str]] = {}
    needed_by: dict[str, list[str]] = {}
    for t, acts in by_type.items():
        for a in acts:
            needed_by.setdefault(a, []).append(t)
    for action in wanted:
        arns = action_resources(
            action,
            sar,
            patterns,
            needed_by=needed_by.get(action, ["(data call)"]),
            partition=partition,
            account=account,
        )
        grouped.setdefault(arns, []).append(action)
    statements: list[dict[str, Any]] = []
    for i, (arns, actions) in enumerate(sorted(grouped.items(), key=lambda kv: (kv[0] != ("*",), kv[0]))):
        service = re.sub(r"[^A-Za-z0-9]", "", actions[0].split(":")[0])
        statements.append(
            {
                "Sid": f"{'Any' if arns == ('*',) else 'Scoped'}{i:02d}{service}",
                "Effect": "Allow",
                "Action": actions,
                "Resource": arns[0] if len(arns) == 1 else list(arns),
            }
        )
    statements.extend(_service_linked_statements(slr_services, partition=partition, account=account))
    if backend is not None:
        statements.extend(backend_statements(backend, partition=partition, account=account))
        if STACK_REFERENCE in types:
            by_type[STACK_REFERENCE] = ("s3:GetObject",)  # the backend statements grant it
    return DeployerPolicy(pack(statements), by_type, no_actions, source)


def policies_fit(policy: DeployerPolicy, per_role: int = MANAGED_POLICIES_PER_ROLE) -> list[str]:
    """Problems with the quotas: a document over IAM's managed-policy size, more documents than a role may
    have attached (the default quota; 20 with an increase)."""
    problems = [
        f"policy {i + 1} is {size:,} characters; IAM allows {MANAGED_POLICY_CHARS:,}"
        for i, d in enumerate(policy.documents)
        if (size := iam_size(d)) > MANAGED_POLICY_CHARS
    ]
    if len(policy.documents) > per_role:
        problems.append(
            f"{len(policy.documents)} managed policies; a role may have {per_role} attached (raise the "
            "'Managed policies per role' quota, up to 20, first)"
        )
    return problems


def as_json(policy: DeployerPolicy) -> str:
    return json.dumps(policy.documents, indent=2)
