"""Rules on region names: the stack's region and its replication targets must be AWS regions."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from infra.stack.registry import Finding, Need, RuleContext, at, error, rule


def region_hint(region: str, known: frozenset[str]) -> str | None:
    """A hint naming the region names closest to ``region``, if any."""
    close = difflib.get_close_matches(region, sorted(known), n=3)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else None


@rule("region-known", needs=[Need.regions])
def region_known(ctx: RuleContext) -> Iterator[Finding]:
    """The stack's region is an AWS region."""
    region = ctx.cfg.region
    if region not in ctx.regions:
        yield error(
            at("region"),
            f"{region!r} is not an AWS region",
            region_hint(region, ctx.regions) or "use an AWS region name such as 'us-east-1'",
        )


@rule("replication-regions-known", needs=[Need.regions])
def replication_regions_known(ctx: RuleContext) -> Iterator[Finding]:
    """Every storage.replicate_to entry is an AWS region."""
    for i, region in enumerate(ctx.cfg.storage.replicate_to):
        if region not in ctx.regions:
            yield error(
                at("storage", "replicate_to", str(i)),
                f"{region!r} is not an AWS region",
                "use an inference stack's region",
            )
