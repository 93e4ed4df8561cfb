"""Rules on the teams and their quotas: what Kueue would accept but never honour (a quota no pool can hold,
a flavor for a pool that does not exist, more GPUs than the policy pack allows, a run whose team has no
quota where the runtime runs) is refused before any resource is declared."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.core import instance_types
from infra.core.facts import RegionFacts
from infra.core.teams import team_namespace
from infra.stack.allowlists import DEFAULT_GPU_BUDGET
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule, warning

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

QUEUEING_DOC = "docs/platform/queueing.md"
BUDGET_DOC = "docs/policy-pack.md#per-stack-settings"


@dataclass(frozen=True)
class PoolCapacity:
    """What a GPU pool can hold: GPUs per node (None: unknown type) and at most ``max_gpus``, as
    ``basis`` says (for the messages)."""

    kind: str  # "node pool" or "Karpenter NodePool"
    gpus_per_node: int | None
    max_gpus: int | None
    basis: str
    # What the pool holds without anyone resizing it: a managed node group runs desired_size nodes (no
    # cluster autoscaler scales them here: infra/pools/component/nodepool.py), Karpenter up to its limit.
    standing_gpus: int | None = None
    standing_basis: str = ""


def gpu_pools(cfg: PlatformConfig, facts: RegionFacts | None = None) -> dict[str, PoolCapacity]:
    """Every GPU pool of the stack by name: the managed node groups (max_size x GPUs per node: AWS's count
    for the type when ``facts`` has it, else the pool's ``gpus_per_node`` or the instance table) and the
    Karpenter NodePools (their GPU limit)."""
    out: dict[str, PoolCapacity] = {}
    for name, pool in cfg.node_pools.items():
        if not pool.gpu:
            continue
        itype = facts.instances.get(pool.instance_type) if facts is not None else None
        per_node = (
            itype.gpu_count
            if itype is not None and itype.gpu_count
            else pool.gpus_per_node or instance_types.gpus(pool.instance_type) or None
        )
        out[name] = PoolCapacity(
            kind="node pool",
            gpus_per_node=per_node,
            max_gpus=None if per_node is None else pool.max_size * per_node,
            basis=f"max_size {pool.max_size} x {per_node} GPUs of {pool.instance_type}",
            standing_gpus=None if per_node is None else pool.desired_size * per_node,
            standing_basis=f"desired_size {pool.desired_size} x {per_node} GPUs of {pool.instance_type}",
        )
    for name, kp in cfg.cluster_services.karpenter.node_pools.items():
        out.setdefault(
            name,
            PoolCapacity(
                kind="Karpenter NodePool",
                gpus_per_node=None,
                max_gpus=kp.gpu_limit,
                basis=f"gpu_limit {kp.gpu_limit}",
                standing_gpus=kp.gpu_limit,
                standing_basis=f"gpu_limit {kp.gpu_limit}: Karpenter launches nodes up to it",
            ),
        )
    return out


@rule("team-quota-pool-exists")
def quota_pool_exists(ctx: RuleContext) -> Iterator[Finding]:
    """Every pool a team has quota on is a GPU pool of the stack (its ResourceFlavor selects its nodes)."""
    pools = gpu_pools(ctx.cfg)
    for team, t in ctx.cfg.teams.items():
        for pool in t.quotas:
            if pool not in pools:
                cpu = " (a CPU pool: quotas are on GPU pools)" if pool in ctx.cfg.node_pools else ""
                yield error(
                    at("teams", team, "quotas", pool),
                    f"{pool!r} is not a GPU pool of this stack{cpu}, so there is no flavor for it",
                    f"use one of {sorted(pools)} (node_pools or cluster_services.karpenter.node_pools)",
                    QUEUEING_DOC,
                )


@rule("team-quota-fits-pool", needs=[Need.facts])
def quota_fits_pool(ctx: RuleContext) -> Iterator[Finding]:
    """A team's nominal GPUs on a pool are at most what the pool can hold (max size x GPUs per node, or the
    Karpenter GPU limit): a quota above it admits jobs that never get nodes."""
    pools = gpu_pools(ctx.cfg, ctx.facts)
    for team, t in ctx.cfg.teams.items():
        for pool, q in t.quotas.items():
            cap = pools.get(pool)
            if cap is None or cap.max_gpus is None:
                continue
            if q.gpus > cap.max_gpus:
                yield error(
                    at("teams", team, "quotas", pool, "gpus"),
                    f"{q.gpus} GPUs, but {cap.kind} {pool!r} holds at most {cap.max_gpus} ({cap.basis})",
                    f"lower it to at most {cap.max_gpus}, or raise the pool's size",
                    QUEUEING_DOC,
                )


@rule("team-quota-whole-nodes", needs=[Need.facts])
def quota_whole_nodes(ctx: RuleContext) -> Iterator[Finding]:
    """A team's GPUs on a node pool are whole nodes: a worker takes every GPU of its node, so a remainder
    can never be used."""
    pools = gpu_pools(ctx.cfg, ctx.facts)
    for team, t in ctx.cfg.teams.items():
        for pool, q in t.quotas.items():
            cap = pools.get(pool)
            if cap is None or cap.gpus_per_node is None or q.gpus % cap.gpus_per_node == 0:
                continue
            whole = q.gpus // cap.gpus_per_node * cap.gpus_per_node
            yield warning(
                at("teams", team, "quotas", pool, "gpus"),
                f"{q.gpus} GPUs is not a whole number of {pool!r} nodes ({cap.gpus_per_node} GPUs each); "
                "a training worker takes a whole node",
                f"use a multiple of {cap.gpus_per_node}, e.g. {whole or cap.gpus_per_node}",
                QUEUEING_DOC,
            )


@rule("team-quotas-fit-pool-together", needs=[Need.facts])
def quotas_fit_together(ctx: RuleContext) -> Iterator[Finding]:
    """The teams' nominal GPUs on one flavor (their ClusterQueues' nominalQuota, summed) add up to at most
    what its pool holds as deployed: desired_size nodes of a managed node group (nothing but ``pulumi up``
    resizes it), the GPU limit of a Karpenter NodePool. Otherwise Kueue admits a guaranteed quota onto
    nodes that are not there: the job waits out waitForPodsReady's timeout holding its admission and is
    requeued. Borrowing is not counted: a team borrows only quota another team leaves unused, so the cohort
    never admits more than the nominal sum."""
    pools = gpu_pools(ctx.cfg, ctx.facts)
    for pool, cap in pools.items():
        if cap.standing_gpus is None:
            continue
        teams = {team: t.quotas[pool].gpus for team, t in ctx.cfg.teams.items() if pool in t.quotas}
        total = sum(teams.values())
        if total > cap.standing_gpus:
            raise_to = -(-total // cap.gpus_per_node) if cap.gpus_per_node else None
            size = (
                f"node_pools.{pool}.desired_size to {raise_to} (max_size at least that)"
                if cap.kind == "node pool" and raise_to is not None
                else f"cluster_services.karpenter.node_pools.{pool}.gpu_limit to {total}"
            )
            problem = (
                f"the teams' nominal GPUs on {pool!r} add up to {total} ({teams}), above the "
                f"{cap.standing_gpus} its {cap.kind} holds ({cap.standing_basis}): Kueue would admit "
                "guaranteed quota onto nodes that are not there"
            )
            node_pool = ctx.cfg.node_pools.get(pool) if cap.kind == "node pool" else None
            if node_pool is not None and node_pool.capacity_type == "capacity_block":
                # a Capacity Block pool holds no node before its block starts (EKS cannot launch one):
                # scaling it up then is the documented step, so the plan goes on and says it
                yield warning(
                    at("teams"),
                    problem + " until the Capacity Block starts",
                    f"when the block starts, raise {size} and run pulumi up",
                    QUEUEING_DOC,
                )
                continue
            yield error(
                at("teams"),
                problem,
                f"lower the quotas to {cap.standing_gpus} in all (let teams borrow the rest with "
                f"borrowing_limit), or raise {size}",
                QUEUEING_DOC,
            )


@rule("team-quotas-within-gpu-budget")
def quotas_within_budget(ctx: RuleContext) -> Iterator[Finding]:
    """All teams' nominal GPUs together stay within the policy pack's GPU budget for the stack (its pack
    config's gpu-budget.maxGpus). A stack whose pack config sets none gets a warning against the pack's
    default: ``aiplat review`` judges it by that default, but no one has set a budget for it yet."""
    budget = ctx.allowlists.max_gpus
    quotas = {f"{team}/{pool}": q.gpus for team, t in ctx.cfg.teams.items() for pool, q in t.quotas.items()}
    total = sum(quotas.values())
    if total > (budget if budget is not None else DEFAULT_GPU_BUDGET):
        if budget is None:
            yield warning(
                at("teams"),
                f"the teams' nominal GPUs add up to {total} ({quotas}), above the policy pack's default GPU "
                f"budget of {DEFAULT_GPU_BUDGET} (the stack's pack config sets no gpu-budget.maxGpus)",
                "set gpu-budget.maxGpus in the stack's pack config (stacks/policy-pack/<stack>.json) after "
                "review, or lower the quotas",
                BUDGET_DOC,
            )
            return
        yield error(
            at("teams"),
            f"the teams' nominal GPUs add up to {total} ({quotas}), above the stack's GPU budget of "
            f"{budget:g} (policy pack gpu-budget.maxGpus)",
            "lower the quotas, or raise gpu-budget.maxGpus in the stack's pack config after review",
            BUDGET_DOC,
        )


@rule("team-run-has-quota")
def run_has_quota(ctx: RuleContext) -> Iterator[Finding]:
    """A run's team has quota on the runtime's pool (the only pool its workers run on): else it is never
    admitted."""
    t = ctx.cfg.training
    if t is None or not ctx.cfg.teams:
        return
    for name, run in t.runs.items():
        team = ctx.cfg.teams.get(run.team or "")
        if team is not None and t.runtime.pool not in team.quotas:
            yield error(
                at("training", "runs", name, "team"),
                f"team {run.team!r} has no quota on {t.runtime.pool!r}, the pool the training runtime "
                "runs on; its run would wait forever",
                f"give teams.{run.team}.quotas a {t.runtime.pool!r} entry, or run it as another team",
                QUEUEING_DOC,
            )


@rule("teams-without-fsx")
def teams_without_fsx(ctx: RuleContext) -> Iterator[Finding]:
    """Teams and the FSx for Lustre volume do not mix: its claim lives in the trainer's namespace only (a
    static volume binds one claim), so a team's pods could not mount it."""
    if ctx.cfg.teams and ctx.cfg.cluster_services.fsx.enabled:
        yield error(
            at("cluster_services", "fsx", "enabled"),
            "FSx for Lustre is on and the stack declares teams: the volume's claim exists only in the "
            f"{ctx.cfg.storage.trainer.namespace!r} namespace, the teams' pods could not mount it",
            "turn fsx off, or remove teams (runs then stay in the trainer's namespace)",
            QUEUEING_DOC,
        )


ACCESS_DOC = "docs/how-to/running-jobs.md"
# EKS access policies that write in a namespace (NetworkPolicies among them)
# (https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html).
WRITING_ACCESS_POLICIES = ("AmazonEKSEditPolicy", "AmazonEKSAdminPolicy")


@rule("team-access-through-members")
def team_access_through_members(ctx: RuleContext) -> Iterator[Finding]:
    """No access entry gives edit or admin rights in a team's namespace: those EKS access policies can
    change its NetworkPolicies, ResourceQuotas and RBAC; a team's people are ``teams.<team>.members``."""
    namespaces = {team_namespace(t, cfg.namespace): t for t, cfg in ctx.cfg.teams.items()}
    for name, entry in ctx.cfg.cluster.access_entries.items():
        if entry.policy.value not in WRITING_ACCESS_POLICIES:
            continue
        for ns in entry.namespaces:
            if (team := namespaces.get(ns)) is not None:
                yield error(
                    at("cluster", "access_entries", name),
                    f"{entry.policy.value} in {ns!r}, team {team}'s namespace, lets the principal change the "
                    "namespace's NetworkPolicies, ResourceQuotas, LimitRanges and RBAC",
                    f"remove the entry and list the principal under teams.{team}.members (the team's Role: "
                    "jobs, logs, queues, no fences)",
                    ACCESS_DOC,
                )


@rule("team-members-one-entry")
def team_members_one_entry(ctx: RuleContext) -> Iterator[Finding]:
    """A member's ARN is in one team and in no ``cluster.access_entries`` entry: EKS gives an IAM principal
    one access entry (https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html)."""
    entries = {e.principal_arn: name for name, e in ctx.cfg.cluster.access_entries.items() if e.principal_arn}
    seen: dict[str, str] = {}
    for team, cfg in ctx.cfg.teams.items():
        for key, arn in cfg.members.items():
            field = at("teams", team, "members", key)
            if arn in entries:
                yield error(
                    field,
                    f"{arn} has an access entry already (cluster.access_entries.{entries[arn]}); EKS refuses "
                    "a second entry for one principal",
                    f"remove cluster.access_entries.{entries[arn]}, or give the team another role",
                    ACCESS_DOC,
                )
            elif arn in seen:
                yield error(
                    field,
                    f"{arn} is a member of team {seen[arn]} too; EKS gives a principal one access entry",
                    "use one role per team (the member assumes the one of the team it works for)",
                    ACCESS_DOC,
                )
            seen.setdefault(arn, team)
