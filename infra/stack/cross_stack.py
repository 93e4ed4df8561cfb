"""Rules across stacks: replication targets must be inference regions, an infer stack's
``storage.source_stack`` must be a train stack that replicates to it, and VPC ranges do not overlap.

"Inference regions" are the regions of the project's infer stacks: the stack files in the same folder as
the one being checked (``StackIndex``, read by ``infra/io/stackfiles.py``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from infra.core.config import Role
from infra.core.stacks import StackSummary, exchange_artifacts
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

# "Ensure that the VPCs do not have overlapping IPv4 CIDR blocks. If they overlap, the status of the VPC
# peering connection immediately goes to failed." Transit Gateway cannot route between them either.
PEERING_DOC = "https://docs.aws.amazon.com/vpc/latest/peering/create-vpc-peering-connection.html"


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


def summary_of(stack: str, cfg: PlatformConfig) -> StackSummary:
    """The ``StackSummary`` of the stack being checked, from its validated config (not its file, which the
    index read tolerantly and which a test or ``pulumi up`` may not have)."""
    return StackSummary(
        role=cfg.role.value,
        region=cfg.region,
        environment=cfg.environment.value,
        replicate_to=tuple(cfg.storage.replicate_to),
        vpc_cidr=cfg.network.vpc_cidr,
        source_stack=cfg.storage.source_stack or "",
        account_id=cfg.security.account.id or "",
        allow_shared_account=cfg.security.account.allow_shared_account,
    )


def _free_range(size: int, used: list[ipaddress.IPv4Network]) -> str | None:
    """The first ``10.x.0.0/size`` no stack uses: a range to suggest."""
    for net in ipaddress.IPv4Network("10.0.0.0/8").subnets(new_prefix=size):
        if not any(net.overlaps(u) for u in used):
            return str(net)
    return None


def _networks(stacks: Mapping[str, StackSummary]) -> dict[str, ipaddress.IPv4Network]:
    out = {}
    for name, s in stacks.items():
        try:
            out[name] = ipaddress.IPv4Network(s.vpc_cidr, strict=False)
        except ValueError:
            continue  # a neighbour's bad CIDR is reported by its own plan
    return out


@rule("vpc-cidrs-disjoint", needs=[Need.stacks])
def vpc_cidrs_disjoint(ctx: RuleContext) -> Iterator[Finding]:
    """The VPC's range overlaps no other stack's: refused between any two stacks of the project, those
    that exchange artifacts and the others alike (one project: a later peering, Transit Gateway or VPN
    between them would fail, and renumbering a VPC means replacing it and everything in it)."""
    assert ctx.stacks is not None
    me = summary_of(ctx.stack, ctx.cfg)
    mine = ipaddress.IPv4Network(me.vpc_cidr, strict=False)
    others = _networks(ctx.stacks.others(ctx.stack))
    free = _free_range(mine.prefixlen, [mine, *others.values()])
    suggestion = f", e.g. {free}" if free else ""
    for name, net in others.items():
        if not mine.overlaps(net):
            continue
        linked = exchange_artifacts(ctx.stack, me, name, ctx.stacks.stacks[name])
        problem = (
            f"{mine} overlaps {net}, the VPC of stack {name}"
            + (f"; {linked}" if linked else "; both are stacks of this project (one account)")
            + ": AWS refuses a VPC peering connection between overlapping ranges, and no Transit Gateway "
            "can route between them"
        )
        fix = f"give one of the two VPCs a range no other stack uses (network.vpc_cidr{suggestion})"
        yield error(at("network", "vpc_cidr"), problem, fix, PEERING_DOC)


ACCOUNTS_DOC = (
    "https://docs.aws.amazon.com/whitepapers/latest/organizing-your-aws-environment/"
    "benefits-of-using-multiple-aws-accounts.html"
)


@rule("prod-and-dev-accounts-apart", needs=[Need.stacks])
def prod_and_dev_accounts_apart(ctx: RuleContext) -> Iterator[Finding]:
    """A prod and a dev stack never name the same AWS account, unless both allow it
    (``security.account.allow_shared_account``)."""
    assert ctx.stacks is not None
    me = summary_of(ctx.stack, ctx.cfg)
    if not me.account_id:
        return  # the account of the credentials: nothing to compare before pulumi up
    for name, other in ctx.stacks.others(ctx.stack).items():
        if other.account_id != me.account_id or other.environment == me.environment:
            continue
        if me.allow_shared_account and other.allow_shared_account:
            continue
        yield error(
            at("security", "account", "id"),
            f"{me.account_id} is also the account of {other.environment} stack {name}: a {me.environment} "
            f"and a {other.environment} stack in one account share IAM, quotas and every account-wide "
            "setting, so a dev credential can reach prod",
            "give each environment its own account (security.account.id), or set "
            "security.account.allow_shared_account: true on both stacks",
            ACCOUNTS_DOC,
        )
