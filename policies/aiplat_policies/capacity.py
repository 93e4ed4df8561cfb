"""What a stack may buy: an instance-type allowlist and a GPU budget (the stack's pack config,
``stacks/policy-pack/<stack>.json``; the defaults suit a stack without one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.core import instance_types
from infra.pools.documents.nodes import GPU_RESOURCE
from infra.stack.allowlists import DEFAULT_GPU_BUDGET, INSTANCE_TYPES, type_allowed

from .aws import INSTANCE, LAUNCH_TEMPLATE, NODE_GROUP
from .core import (
    HIGH,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    dig,
    number,
    resource_rule,
    stack_rule,
    violation,
)
from .nodes import (
    INSTANCE_FAMILY_KEY,
    INSTANCE_TYPE_KEY,
    NODE_POOL,
    karpenter_allowed,
    karpenter_is_gpu,
    node_group_types,
)
from .training import templates_of


@resource_rule(
    "instance-type-allowlist",
    description="Node groups, launch templates, instances and Karpenter NodePools use only the instance "
    "types allowed for the stack (config allowedInstanceTypes).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-types.html",
    types=(NODE_GROUP, LAUNCH_TEMPLATE, INSTANCE, NODE_POOL),
    unknowns="An unknown instance type is a violation (types are literals). A NodePool without an "
    "instance-type or instance-family requirement may launch anything and is a violation.",
    config={
        "allowedInstanceTypes": {
            "type": "array",
            "items": {"type": "string"},
            "default": list(INSTANCE_TYPES),
            "description": "The instance types the stack may use (shell patterns).",
        }
    },
)
def instance_type_allowlist(r: Res, ctx: Ctx) -> Iterator[Violation]:
    patterns = list(ctx.config["allowedInstanceTypes"])
    fix = f"use one of {patterns} or add the type to allowedInstanceTypes in the stack's pack config"
    if r.type == NODE_POOL:
        types = karpenter_allowed(r, INSTANCE_TYPE_KEY)
        families = karpenter_allowed(r, INSTANCE_FAMILY_KEY)
        if not types and not families:
            yield violation(
                "the NodePool does not limit instance types or families",
                "add an 'In' requirement on "
                "node.kubernetes.io/instance-type or karpenter.k8s.aws/instance-family",
            )
        bad = [t for t in types if not type_allowed(t, patterns)]
        bad += [f for f in families if not type_allowed(f"{f}.x", [p.split(".")[0] + ".x" for p in patterns])]
    elif r.type == NODE_GROUP:
        bad = [t for t in node_group_types(r) if t is UNKNOWN or not type_allowed(str(t), patterns)]
    else:
        itype = r.get("instanceType")
        bad = (
            [itype]
            if itype is not None and (itype is UNKNOWN or not type_allowed(str(itype), patterns))
            else []
        )
    if bad:
        yield violation(
            f"instance types {[str(b) for b in bad]} are not allowed in stack {ctx.stack.name!r}", fix
        )


def _pool_gpus(itypes: list[Any]) -> tuple[float | None, list[str]]:
    """GPUs per node (the largest of the allowed types) and the types whose GPU count is unknown."""
    counts, unknown = [], []
    for t in itypes:
        n = instance_types.gpus(t) if isinstance(t, str) else None
        if n is None:
            unknown.append(str(t))
        else:
            counts.append(n)
    return (max(counts) if counts else 0), unknown


@stack_rule(
    "gpu-budget",
    description="The GPUs a stack can run (node groups at max size, Karpenter GPU limits, instances) stay "
    "within its budget (config maxGpus).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html",
    unknowns="An unknown max size, instance type or GPU limit is a violation: the budget cannot be proven.",
    config={
        "maxGpus": {
            "type": "number",
            "default": DEFAULT_GPU_BUDGET,
            "description": "The most GPUs the stack may run.",
        }
    },
)
def gpu_budget(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    budget = float(ctx.config["maxGpus"])
    total, parts, problems = 0.0, [], []
    for group in stack.of_type(NODE_GROUP):
        per_node, unknown = _pool_gpus(node_group_types(group, templates_of(group, stack)))
        size = number(group.get("scalingConfig", "maxSize"))
        if unknown or not isinstance(size, float):
            problems.append(
                (group, f"node group {group.name!r}: GPU count unknown (types {unknown}, max size {size})")
            )
            continue
        if per_node:
            total += per_node * size
            parts.append(f"{group.name} {size:g}x{per_node}")
    for pool in stack.of_type(NODE_POOL):
        if not karpenter_is_gpu(pool):
            continue
        limit = number(dig(pool.props, "spec", "limits", GPU_RESOURCE))
        if not isinstance(limit, float):
            problems.append(
                (pool, f"GPU NodePool {pool.name!r} sets no spec.limits['{GPU_RESOURCE}'] ({limit})")
            )
            continue
        total += limit
        parts.append(f"{pool.name} limit {limit:g}")
    for inst in stack.of_type(INSTANCE):
        per_node, unknown = _pool_gpus([inst.get("instanceType")])
        if unknown:
            problems.append((inst, f"instance {inst.name!r}: GPU count of {unknown} unknown"))
        elif per_node:
            total += per_node
            parts.append(f"{inst.name} {per_node}")
    for res, problem in problems:
        yield violation(
            problem,
            "set the max size / limit as a literal and use a type listed in infra/core/instance_types.py",
            res.urn,
        )
    if total > budget:
        yield violation(
            f"stack {ctx.stack.name!r} can run {total:g} GPUs ({', '.join(parts)}), "
            f"over its budget of {budget:g}",
            "lower max sizes / NodePool limits, or raise gpu-budget.maxGpus in the stack's pack config "
            f"(stacks/policy-pack/{ctx.stack.name}.json)",
        )
