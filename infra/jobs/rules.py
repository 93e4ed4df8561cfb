"""Checks of a submitted job against the stack's teams (pure): the team exists, the priority class exists,
and the job fits what the team's ClusterQueue can ever be given on the runtime pool's flavor; and of a job
file's job (``aiplat train render/submit -f``): its image is the team's (or the platform's), by digest, in
the stack's registry, and the rest of the file fits the stack's runtime."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from infra.core.errors import ConfigError, ConfigErrors, NoFlavorFitsError, UnknownTeamError
from infra.core.teams import team_repository_prefix
from infra.core.trainjobs import pod_name_length
from infra.jobs.config import PLATFORM_TRAINER_IMAGE, JobSpec, Launcher
from infra.queueing.config import TeamConfig
from infra.stack.registry import Finding, error
from infra.training.documents.stack import team_priority
from infra.training.rules import nodes_fit_pool

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


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


def fit_problem(
    cfg: PlatformConfig, team: str, *, nodes: int, gpus_per_node: int, field: str
) -> Finding | None:
    """Why Kueue would never admit a job of ``nodes`` x ``gpus_per_node`` GPUs of ``team`` on the runtime's
    pool (None: it can be admitted); ``field`` is where the node count was set (a job file's ``nodes``, a
    flag)."""
    assert cfg.training is not None
    pool = cfg.training.runtime.pool
    want = nodes * gpus_per_node
    pool_gpus = cfg.node_pools[pool].max_size * gpus_per_node
    most = most_gpus(cfg, team, pool, pool_gpus)
    if want <= most:
        return None
    if pool not in cfg.teams[team].quotas:
        return error(
            "--team" if field.startswith("--") else "team",
            f"team {team!r} has no quota on pool {pool!r}, where the training runtime runs, so no flavor can "
            "admit the job",
            f"ask your platform team to add teams.{team}.quotas.{pool} to the stack file",
        )
    fewer = most // gpus_per_node
    fix = f"use {field} {fewer} or fewer, or " if fewer else ""
    return error(
        field,
        f"{nodes} nodes x {gpus_per_node} GPUs = {want} GPUs, but team {team!r} can get at most {most} on "
        f"pool {pool!r} (nominal quota plus what it may borrow, within the pool's {pool_gpus}); Kueue would "
        "never admit it",
        f"{fix}ask your platform team to raise teams.{team}.quotas.{pool}",
    )


def check_fits(cfg: PlatformConfig, team: str, *, nodes: int, gpus_per_node: int) -> None:
    """``NoFlavorFitsError`` when the job needs more GPUs on the runtime's pool than ``team`` can ever get."""
    found = fit_problem(cfg, team, nodes=nodes, gpus_per_node=gpus_per_node, field="--nodes")
    if found is not None:
        raise NoFlavorFitsError(f"{found.field}: {found.problem}; fix: {found.fix}")


# -- a job file's job (aiplat train render/submit -f) ------------------------------------------------------

# An image in an ECR private registry, by digest (registry host, repository, digest).
# https://docs.aws.amazon.com/AmazonECR/latest/userguide/Registries.html
ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.(?P<suffix>amazonaws\.com(?:\.cn)?)/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)@(?P<digest>sha256:[0-9a-f]{64})$"
)
# What torchrun would be handed twice, or cannot run (it starts python itself).
_NOT_UNDER_TORCHRUN = ("python", "python3", "torchrun")


def stack_registry(cfg: PlatformConfig, account_id: str) -> str:
    """The stack's ECR registry host."""
    suffix = "amazonaws.com.cn" if cfg.region.startswith("cn-") else "amazonaws.com"
    return f"{account_id}.dkr.ecr.{cfg.region}.{suffix}"


def image_problems(cfg: PlatformConfig, team: str, image: str, account_id: str | None) -> list[ConfigError]:
    """Why ``image`` cannot run as ``team``'s job (empty: it can): the stack's registry, by digest, in one
    of the team's repositories (``teams.<team>.registry.repositories``) or the platform's; never another
    team's (the admission policy ``aiplat-workload-images`` refuses that too). ``account_id``: the stack's
    account when known (config, or the caller's at submit), else only the region and path are checked."""
    if image == PLATFORM_TRAINER_IMAGE or team not in cfg.teams:
        return []  # an unknown team is job_problems' to name: no advice to push to its repositories
    ns = cfg.names.env_prefix
    own = team_repository_prefix(ns, team)
    m = ECR_IMAGE.match(image)
    where = stack_registry(cfg, account_id or "<account>")
    if m is None:
        return [
            ConfigError(
                "image",
                f"{image!r} is not in an ECR registry",
                f"push the image to {where}/{own}/<repository> and name it by digest",
            )
        ]
    problems: list[ConfigError] = []
    if m["region"] != cfg.region:
        problems.append(
            ConfigError(
                "image",
                f"{image!r} is in {m['region']}, but the stack's registry is in {cfg.region}",
                f"push the image to {where}/{own}/<repository>",
            )
        )
    if account_id is not None and m["account"] != account_id:
        problems.append(
            ConfigError(
                "image",
                f"{image!r} is in account {m['account']}, but the stack's registry is account {account_id}'s",
                f"push the image to {where}/{own}/<repository>",
            )
        )
    repo = m["repository"]
    teams_prefix = team_repository_prefix(ns, "")
    declared = cfg.teams[team].registry.repositories if team in cfg.teams else []
    if repo.startswith(teams_prefix):
        owner, _, name = repo[len(teams_prefix) :].partition("/")
        if owner != team:
            problems.append(
                ConfigError(
                    "image",
                    f"{repo} is team {owner!r}'s repository; a team's jobs run only its own images and the "
                    "platform's (the admission policy aiplat-workload-images refuses it as well)",
                    f"push the image to {own}/<repository> (teams.{team}.registry.repositories: "
                    f"{sorted(declared)})",
                )
            )
        elif name not in declared:
            problems.append(
                ConfigError(
                    "image",
                    f"{repo} is not one of team {team!r}'s repositories ({sorted(declared)})",
                    f"add {name!r} to teams.{team}.registry.repositories and run pulumi up, or push to one "
                    "of them",
                )
            )
    elif repo not in {f"{ns}/{r}" for r in cfg.registry.repositories}:
        problems.append(
            ConfigError(
                "image",
                f"{repo} is neither one of team {team!r}'s repositories ({own}/...) nor the platform's "
                f"({sorted(cfg.registry.repositories)} under {ns}/)",
                f"push the image to {own}/<repository>, or use image: {PLATFORM_TRAINER_IMAGE}",
            )
        )
    return problems


def job_problems(cfg: PlatformConfig, spec: JobSpec, *, gpus_per_node: int) -> list[Finding]:
    """What the stack refuses in a job file's job (fields named as in the file; warnings too): the team,
    its priority, the pool and GPUs per node (the runtime's, whole nodes), the nodes (the pool and JobSet's
    pod names), the launcher against the command. The image is ``image_problems``."""
    out: list[Finding] = []
    t = cfg.training
    if t is None:
        return [
            error("training", "the stack has no training section (no runtime to run on)", "use a train stack")
        ]
    if spec.team not in cfg.teams:
        known = sorted(cfg.teams) or "none"
        out.append(
            error(
                "team",
                f"{spec.team!r} is not a team of the stack (its teams: {known})",
                "use one of them, or declare it under teams in the stack file and run pulumi up",
            )
        )
    else:
        chosen = team_priority(cfg, spec.team, spec.priority)
        allowed = cfg.teams[spec.team].allowed_priorities(cfg.queueing.default_priority)
        if chosen not in cfg.queueing.priority_classes:
            out.append(
                error(
                    "priority",
                    f"{chosen!r} is not a priority class of the stack",
                    f"use one of {sorted(cfg.queueing.priority_classes)}",
                )
            )
        elif chosen not in allowed:
            # the cluster's admission policy aiplat-team-priorities would refuse it
            out.append(
                error(
                    "priority",
                    f"team {spec.team!r} may not use priority class {chosen!r}",
                    f"use one of {allowed}, or ask your platform team to add it to "
                    f"teams.{spec.team}.priority_classes",
                )
            )
        if spec.pool in (None, t.runtime.pool):
            fit = fit_problem(cfg, spec.team, nodes=spec.nodes, gpus_per_node=gpus_per_node, field="nodes")
            if fit is not None:
                out.append(fit)
    if spec.pool is not None and spec.pool != t.runtime.pool:
        out.append(
            error(
                "pool",
                f"{spec.pool!r}: the stack's training runtime runs on pool {t.runtime.pool!r} only (its "
                "ResourceFlavor is the one the team's quota is on)",
                f"drop pool, or set it to {t.runtime.pool!r}",
            )
        )
    if spec.gpus_per_node is not None and spec.gpus_per_node != gpus_per_node:
        out.append(
            error(
                "gpus_per_node",
                f"{spec.gpus_per_node}: the runtime gives each pod a whole node of pool {t.runtime.pool!r}, "
                f"{gpus_per_node} GPUs",
                f"drop gpus_per_node, or set it to {gpus_per_node}",
            )
        )
    length = pod_name_length(spec.name, spec.nodes)
    if length > 63:
        out.append(
            error(
                "name",
                f"{spec.name!r} on {spec.nodes} nodes gives pod names of {length} characters; JobSet refuses "
                "more than 63",
                f"shorten the name by {length - 63} characters",
            )
        )
    out += list(nodes_fit_pool(cfg, "nodes", spec.name, spec.nodes, for_team=True))
    first = spec.command[0].rsplit("/", 1)[-1]
    if spec.launcher is Launcher.torchrun:
        if first in _NOT_UNDER_TORCHRUN or first.startswith("python3."):
            out.append(
                error(
                    "command",
                    f"starts with {spec.command[0]!r}, but launcher torchrun runs the script under torchrun, "
                    "which starts python itself",
                    "drop it (command: [train.py, ...] or ['-m', 'pkg.train']), or use launcher: none",
                )
            )
    elif spec.max_restarts is not None:
        out.append(
            error(
                "max_restarts",
                "is torchrun's --max-restarts, but launcher is none",
                "remove it (your command restarts its own ranks), or use launcher: torchrun",
            )
        )
    return out
