"""What changes between two offline plans of one stack: the resources added, removed, or whose inputs or
options differ, by URN (what ``pulumi preview`` would report as create, delete and update or replace)."""

from __future__ import annotations

from dataclasses import dataclass

from infra.plan.runner import Plan


@dataclass(frozen=True)
class Change:
    """One resource that a change of the stack file changes: ``op`` is create, delete or update, ``fields``
    the top-level inputs (and options) that differ."""

    op: str
    urn: str
    type: str
    name: str
    fields: tuple[str, ...] = ()


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
        fields = sorted(k for k in a.inputs.keys() | b.inputs.keys() if a.inputs.get(k) != b.inputs.get(k))
        fields += [f"options.{k}" for k in sorted(a.options.keys() | b.options.keys())
                   if a.options.get(k) != b.options.get(k)]  # fmt: skip
        if fields:
            out.append(Change("update", urn, b.type, b.name, tuple(fields)))
    return out
