"""Building bad variants of a real stack config and asserting where the plan refuses them.

The refusal tests (the rules tests under ``tests/infra/<capability>/``) start from a shipped stack file,
change one thing with a *mutation* (a function that edits the ``aiplat:platform`` dict in place) and run the
real program under mocks. ``assert_refused`` checks the message and that nothing was created before it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from infra.core.errors import ConfigErrors
from infra.io.stackfiles import read_stack_index
from infra.plan import runner
from infra.schema.parse import parse_platform_config

Mutation = Callable[[dict], None]

# Where a case is refused: by the schema (the program never runs), by a rule that needs no AWS facts (before
# the provider exists) or by a rule on the AWS facts (after the provider, before any cloud resource).
SCHEMA, RULES, FACTS = "schema", "rules", "facts"
_REGISTERED = {RULES: [], FACTS: ["pulumi:providers:aws"]}


def set_at(path: str, value: object) -> Mutation:
    """Set the dotted ``path`` to ``value`` (missing parents are created)."""

    def mutate(c: dict) -> None:
        node = c
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return mutate


def drop_at(path: str) -> Mutation:
    """Remove the dotted ``path`` (its parents must exist)."""

    def mutate(c: dict) -> None:
        node = c
        *parents, last = path.split(".")
        for p in parents:
            node = node[p]
        del node[last]

    return mutate


def all_of(*mutations: Mutation) -> Mutation:
    """The mutations one after the other."""

    def mutate(c: dict) -> None:
        for m in mutations:
            m(c)

    return mutate


def update_pool(pool: str, **changes: object) -> Mutation:
    """Update node pool ``pool`` with ``changes``; a change to None removes that key."""

    def mutate(c: dict) -> None:
        fields = c["node_pools"][pool]
        fields.update(changes)
        for key in [k for k, v in fields.items() if v is None]:
            del fields[key]

    return mutate


def variant_name(raw: dict) -> str:
    """The shipped stack a variant was made from (the one with its region and VPC range), so that it plans
    as that stack beside the others; a new name would overlap its own original (rule
    ``vpc-cidrs-disjoint``). ``bad`` where the variant changed those."""
    network = raw.get("network") or {}
    for name, summary in read_stack_index().stacks.items():
        if summary.region == raw.get("region") and summary.vpc_cidr == network.get("vpc_cidr"):
            return name
    return "bad"


def assert_refused(raw: dict, expected: str, monitors: list, stage: str | None = None) -> str:
    """Planning ``raw`` fails with ``expected`` in the message, every line naming its ``aiplat:platform``
    field, and before any cloud resource: at ``stage`` (SCHEMA: the program never ran; RULES: nothing
    registered; FACTS: only the provider, which is configuration), or, with no stage, nothing but the
    provider in any run. Infer stacks plan their source stack first (StackReference): the last run is the
    refused one. Returns the message."""
    with pytest.raises(ConfigErrors) as info:
        runner.run_plan(variant_name(raw), parse_platform_config(raw))
    message = str(info.value)
    assert expected in message, message
    assert all(line.startswith("aiplat:platform") for line in message.splitlines()), message
    if stage is None:
        for monitor in monitors:
            assert {r.type for r in monitor.recorded} <= {"pulumi:providers:aws"}
    elif stage == SCHEMA:
        assert monitors == []
    else:
        assert [r.type for r in monitors[-1].recorded] == _REGISTERED[stage]
    return message


def without_teams(c: dict) -> None:
    """No ``teams`` (and no run naming one): for variants the teams do not support, e.g. the MinIO backend
    (a team's pods get an IAM role on its bucket prefixes)."""
    c.pop("teams", None)
    for run in (c.get("training") or {}).get("runs", {}).values():
        run.pop("team", None)
        run.pop("priority", None)
