"""Checks of a submitted job against the stack's teams (pure): the team exists, the priority class exists,
and the job fits what the team's ClusterQueue can ever be given on the runtime pool's flavor."""

from __future__ import annotations

from infra.core.errors import ConfigError, ConfigErrors, NoFlavorFitsError, UnknownTeamError
from infra.queueing.config import TeamConfig
from infra.stack.schema import PlatformConfig
from infra.training.documents.stack import team_priority


def team_config(cfg: PlatformConfig, stack: str, team: str) -> TeamConfig:
    """The team's config; ``UnknownTeamError`` naming the stack's teams when it declares no such team."""
    if team in cfg.teams:
        return cfg.teams[team]
    known = ", ".join(sorted(cfg.teams)) or "none"
    raise UnknownTeamError(
        f"--team: {team!r} is not a team of stack {stack} (its teams: {known}); fix: use one of them, or "
        "declare it under teams in the stack file and run pulumi up"
    )


def job_priority(cfg: PlatformConfig, team: str, priority: str | None) -> str:
    """The WorkloadPriorityClass of a job: ``priority``, else the team's default, else the stack's."""
    chosen = team_priority(cfg, team, priority)
    if chosen not in cfg.queueing.priority_classes:
        raise ConfigErrors(
            [
                ConfigError(
                    "--priority",
                    f"{chosen!r} is not a priority class of the stack",
                    f"use one of {sorted(cfg.queueing.priority_classes)}",
                )
            ]
        )
    allowed = cfg.teams[team].allowed_priorities(cfg.queueing.default_priority)
    if chosen not in allowed:
        # the cluster's admission policy aiplat-team-priorities would refuse it
        raise ConfigErrors(
            [
                ConfigError(
                    "--priority",
                    f"team {team!r} may not use priority class {chosen!r}",
                    f"use one of {allowed} (teams.{team}.priority_classes)",
                )
            ]
        )
    return chosen


def most_gpus(cfg: PlatformConfig, team: str, flavor: str, pool_gpus: int) -> int:
    """The most GPUs of ``flavor`` a workload of ``team`` can ever be admitted with: its nominal quota plus
    what it may borrow from the cohort (at most its borrowing limit, at most what the other teams lend),
    never above what the pool holds (``pool_gpus``). Kueue keeps a bigger workload pending for ever
    (QuotaReserved reason ExceedsMaxQuota, kueue v0.19.2 apis/kueue/v1beta2/workload_types.go)."""
    quota = cfg.teams[team].quotas.get(flavor)
    if quota is None:
        return 0
    lent = sum(
        (q.lending_limit if q.lending_limit is not None else q.gpus)
        for name, other in cfg.teams.items()
        if name != team and (q := other.quotas.get(flavor)) is not None
    )
    borrow = lent if quota.borrowing_limit is None else min(lent, quota.borrowing_limit)
    return min(quota.gpus + borrow, pool_gpus)


def check_fits(cfg: PlatformConfig, team: str, *, nodes: int, gpus_per_node: int) -> None:
    """``NoFlavorFitsError`` when the job needs more GPUs on the runtime's pool than ``team`` can ever get."""
    assert cfg.training is not None
    pool = cfg.training.runtime.pool
    want = nodes * gpus_per_node
    pool_gpus = cfg.node_pools[pool].max_size * gpus_per_node
    most = most_gpus(cfg, team, pool, pool_gpus)
    if want <= most:
        return
    if pool not in cfg.teams[team].quotas:
        raise NoFlavorFitsError(
            f"--team: team {team!r} has no quota on pool {pool!r}, where the training runtime runs, so no "
            f"flavor can admit the job; fix: add teams.{team}.quotas.{pool} to the stack file"
        )
    fewer = most // gpus_per_node
    fix = f"use --nodes {fewer} or fewer, or " if fewer else ""
    raise NoFlavorFitsError(
        f"--nodes: {nodes} nodes x {gpus_per_node} GPUs = {want} GPUs, but team {team!r} can get at most "
        f"{most} on pool {pool!r} (nominal quota plus what it may borrow, within the pool's "
        f"{pool_gpus}); Kueue would never admit it; fix: {fix}raise teams.{team}.quotas.{pool}"
    )
