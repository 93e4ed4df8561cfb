"""What changes between two offline plans of one stack: the resources added, removed, or whose inputs or
options differ, by URN (what ``pulumi preview`` would report as create, delete and update or replace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.plan.runner import Plan


@dataclass(frozen=True)
class Change:
    """One resource that a change of the stack file changes: ``op`` is create, delete or update, ``fields``
    the inputs (and options) that differ, as paths to the values (``spec.template.spec.containers.args[1]``;
    list items by their ``name`` where they have one)."""

    op: str
    urn: str
    type: str
    name: str
    fields: tuple[str, ...] = ()


DEPTH = 8  # deep enough for a pod template's container fields


def _differs(a: Any, b: Any, at: str, depth: int = DEPTH) -> list[str]:
    """The paths under ``at`` where ``a`` and ``b`` differ."""
    if a == b:
        return []
    if depth and isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(a.keys() | b.keys())
        return [p for k in keys for p in _differs(a.get(k), b.get(k), f"{at}.{k}" if at else k, depth - 1)]
    if depth and isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            label = x.get("name", i) if isinstance(x, dict) and isinstance(y, dict) else i
            out += _differs(x, y, f"{at}[{label}]", depth - 1)
        return out
    return [at]


def plan_changes(before: Plan, after: Plan) -> list[Change]:
    """The resources that differ between ``before`` and ``after``, in URN order."""
    old = {r.urn: r for r in before.resources}
    new = {r.urn: r for r in after.resources}
    out: list[Change] = []
    for urn in sorted(old.keys() | new.keys()):
        a, b = old.get(urn), new.get(urn)
        if a is None or b is None:
            r = b or a
            assert r is not None
            out.append(Change("create" if a is None else "delete", urn, r.type, r.name))
            continue
        fields = _differs(a.inputs, b.inputs, "") + _differs(a.options, b.options, "options", 1)
        if fields:
            out.append(Change("update", urn, b.type, b.name, tuple(fields)))
    return out
