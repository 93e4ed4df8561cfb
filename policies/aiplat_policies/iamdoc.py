"""Reading IAM policy documents (identity, trust and resource policies) as data."""

from __future__ import annotations

import fnmatch
from typing import Any

from .core import UNKNOWN, as_list, json_doc


def statements(policy: Any) -> list[dict[str, Any]] | Any:
    """The statements of a policy given as JSON text or object; ``UNKNOWN`` when the document is."""
    doc = json_doc(policy)
    if doc is UNKNOWN:
        return UNKNOWN
    if not isinstance(doc, dict):
        return []
    return [s for s in as_list(doc.get("Statement")) if isinstance(s, dict)]


def allows(stmt: dict[str, Any]) -> bool:
    return stmt.get("Effect") == "Allow"


def principals(stmt: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, value) of every principal: ``("*", "*")`` for ``"Principal": "*"``, else
    ``("AWS", arn)``, ``("Service", name)``, ``("Federated", arn)`` ..."""
    principal = stmt.get("Principal")
    if principal == "*":
        return [("*", "*")]
    if not isinstance(principal, dict):
        return []
    return [(kind, str(v)) for kind, values in principal.items() for v in as_list(values)]


def is_wildcard_principal(kind: str, value: str) -> bool:
    return value == "*" and kind in ("*", "AWS")


def actions(stmt: dict[str, Any]) -> list[str]:
    return [str(a) for a in as_list(stmt.get("Action"))]


def resources(stmt: dict[str, Any]) -> list[str]:
    return [str(r) for r in as_list(stmt.get("Resource"))]


def action_matches(pattern: str, action: str) -> bool:
    """Whether an IAM action pattern (``iam:Pass*``, ``*``) covers ``action`` (case-insensitive, as IAM)."""
    return fnmatch.fnmatchcase(action.lower(), pattern.lower())


def condition_keys(stmt: dict[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """condition key (lower case) -> [(operator, value)]."""
    out: dict[str, list[tuple[str, Any]]] = {}
    condition = stmt.get("Condition")
    if not isinstance(condition, dict):
        return out
    for operator, block in condition.items():
        if isinstance(block, dict):
            for key, value in block.items():
                out.setdefault(str(key).lower(), []).append((str(operator), value))
    return out


# Condition keys that limit a wildcard principal to one account or organization (or to a VPC endpoint).
SCOPING_KEYS = (
    "aws:principalaccount",
    "aws:principalorgid",
    "aws:sourceaccount",
    "aws:sourceorgid",
    "kms:calleraccount",
    "aws:sourcevpce",
)


def wildcard_scoped(stmt: dict[str, Any]) -> bool:
    """Whether a statement with a wildcard principal is limited by an account/org/endpoint condition."""
    keys = condition_keys(stmt)
    return any(k in keys for k in SCOPING_KEYS)
