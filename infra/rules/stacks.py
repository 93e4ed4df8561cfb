"""Rules across stacks: replication targets must be inference regions, and an infer stack's
``storage.source_stack`` must be a train stack that replicates to it.

"Inference regions" are the regions of the project's infer stacks: the stack files in the same folder as
the one being checked (``StackIndex``, read by ``infra/io/stackfiles.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.model.config.schema import Role
from infra.rules.base import Finding, Need, RuleContext, at, error, rule


@rule("replicate-to-inference-regions", needs=[Need.stacks])
def replicate_to_inference_regions(ctx: RuleContext) -> Iterator[Finding]:
    """Artifacts replicate only to regions that have an infer stack of this project."""
    assert ctx.stacks is not None
    infer = ctx.stacks.inference_regions()
    for i, region in enumerate(ctx.cfg.storage.replicate_to):
        if ctx.regions and region not in ctx.regions:
            continue  # not an AWS region at all: 'replication-regions-known' says so
        if region not in infer:
            known = ", ".join(sorted(infer)) or "none"
            yield error(
                at("storage", "replicate_to", str(i)),
                f"{region!r} is not an inference region (regions of this project's infer stacks: {known})",
                "replicate only to a region that has an infer stack, or add that stack first",
            )


@rule("source-stack-replicates-here", needs=[Need.stacks])
def source_stack_replicates_here(ctx: RuleContext) -> Iterator[Finding]:
    """An infer stack's source_stack is a train stack that replicates its artifacts to this region."""
    assert ctx.stacks is not None
    cfg, source = ctx.cfg, ctx.cfg.storage.source_stack
    if cfg.role != Role.infer or not source:
        return
    where = at("storage", "source_stack")
    stacks = ctx.stacks.stacks
    if source not in stacks:
        known = ", ".join(ctx.stacks.train_stacks()) or "none"
        yield error(where, f"no stack {source!r}", f"use one of the train stacks: {known}")
    elif stacks[source].role != "train":
        yield error(
            where, f"{source!r} is a {stacks[source].role or 'role-less'} stack", "name a train stack"
        )
    elif cfg.region not in stacks[source].replicate_to:
        yield error(
            where,
            f"{source!r} does not replicate to {cfg.region}",
            f"add {cfg.region} to storage.replicate_to of {source}",
        )
