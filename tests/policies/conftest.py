"""Build small plans in the shape ``aiplat plan`` records (engine property names, camelCase) and review them
through the real pack and the engine's analyzer calls (``infra.review.review_plan``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from infra.review import StackReview, review_plan

PROJECT = "aiplat"
TAGS = {
    "CostCenter": "ml",
    "Project": "aiplat",
    "Owner": "team@example.com",
    "Environment": "prod",
    "Workload": "training",
}
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0b921ae7-774e-5b1c-9c0f-81e3f8c5ded3"
# what the engine sends for a string unknown at preview
UNKNOWN = UNKNOWN_STRING_VALUE


@dataclass
class R:
    """One resource of a synthetic plan; ``deps``: input -> names of the resources it came from."""

    type: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    deps: dict[str, list[str]] = field(default_factory=dict)
    protect: bool = False
    provider: bool = True  # on the stack's AWS provider (AWS types only)


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def make_plan(
    resources: Iterable[R],
    *,
    stack: str = "prod-us-train",
    role: str = "train",
    environment: str = "prod",
    region: str = "us-east-1",
    default_tags: dict[str, str] | None = TAGS,
    provider_inputs: dict[str, Any] | None = None,
    platform: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A plan document: an AWS provider (region, default tags as the SDK sends them: a JSON string) and
    ``resources``, with URNs, provider references, dependencies and property dependencies; ``platform``:
    more of the stack's ``aiplat:platform`` config."""
    resources = list(resources)
    names = {r.name: urn(stack, r.type, r.name) for r in resources}
    prov_inputs = {"region": region, "skipCredentialsValidation": "false"}
    if default_tags is not None:
        prov_inputs["defaultTags"] = json.dumps({"tags": default_tags})
    prov_inputs.update(provider_inputs or {})
    prov_urn = urn(stack, "pulumi:providers:aws", "aws")
    root = urn(stack, "pulumi:pulumi:Stack", f"{PROJECT}-{stack}")
    docs = [
        {
            "urn": prov_urn,
            "type": "pulumi:providers:aws",
            "name": "aws",
            "parent": root,
            "provider": None,
            "inputs": prov_inputs,
            "dependencies": [],
            "propertyDependencies": {},
            "options": {"protect": False},
        }
    ]
    for r in resources:
        prop_deps = {k: [names[n] for n in v] for k, v in r.deps.items()}
        docs.append(
            {
                "urn": names[r.name],
                "type": r.type,
                "name": r.name,
                "parent": root,
                "provider": f"{prov_urn}::provider-id" if r.provider and r.type.startswith("aws:") else None,
                "inputs": r.inputs,
                "dependencies": sorted({u for v in prop_deps.values() for u in v}),
                "propertyDependencies": prop_deps,
                "options": {"protect": r.protect},
            }
        )
    config = {"role": role, "environment": environment, "region": region, **(platform or {})}
    return {
        "stack": stack,
        "project": PROJECT,
        "region": region,
        "config": config,
        "resources": docs,
        "outputs": {},
    }


def review(
    resources: Iterable[R], pack_config: dict | None = None, *, dry_run: bool = True, **plan_kw: Any
) -> StackReview:
    """Review a synthetic plan as a preview (``dry_run``, the default) or as the update's own run does."""
    return review_plan(make_plan(resources, **plan_kw), pack_config=pack_config, dry_run=dry_run)


def messages(result: StackReview, policy: str) -> list[str]:
    return [d.message for d in result.diagnostics if d.policy == policy]


@pytest.fixture
def check():
    """``check(policy, resources, expected)``: ``expected`` None means the policy reports nothing; a string
    means it reports a violation containing it (with a fix and the rule's doc link). ``dry_run=False``
    reviews as the pack the update loads does (``PULUMI_DRY_RUN=false``)."""
    from aiplat_policies.pack import rules

    docs = {r.name: r.doc for r in rules()}

    def run(
        policy: str, resources: Iterable[R], expected: str | None, pack_config=None, **kw: Any
    ) -> StackReview:
        assert policy in docs, f"no rule {policy}"
        result = review(resources, pack_config, **kw)
        found = messages(result, policy)
        if expected is None:
            assert found == [], found
        else:
            assert any(expected in m for m in found), (expected, found)
            assert all("; fix: " in m and m.endswith(f"; see {docs[policy]}") for m in found), found
        return result

    return run
