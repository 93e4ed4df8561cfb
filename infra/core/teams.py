"""A team's names that capabilities below queueing need too (the admission policies, the registry): its
namespace and its ECR repositories. Pure; ``infra/queueing/names.py`` derives the rest from these.
"""

from __future__ import annotations

TEAM_NAMESPACE_PREFIX = "team-"
# Team repositories live under '<ECR namespace>/teams/<team>/', beside the platform's own
# ('<ECR namespace>/<repository>'): one replication filter and one creation template cover both, and the
# admission policies tell them apart by this segment.
TEAM_REPOSITORIES = "teams"


def team_namespace(team: str, namespace: str | None = None) -> str:
    """The team's namespace: ``namespace`` when the config names one, else ``team-<team>``."""
    return namespace or f"{TEAM_NAMESPACE_PREFIX}{team}"


def team_repository_prefix(ecr_namespace: str, team: str) -> str:
    """The ECR name prefix of ``team``'s repositories: ``<ECR namespace>/teams/<team>``."""
    return f"{ecr_namespace}/{TEAM_REPOSITORIES}/{team}"


def team_repository(ecr_namespace: str, team: str, repository: str) -> str:
    """The full ECR name of one of ``team``'s repositories."""
    return f"{team_repository_prefix(ecr_namespace, team)}/{repository}"
