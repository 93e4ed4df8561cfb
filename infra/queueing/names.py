"""The Kubernetes names and labels of a team, derived in one place (pure, no Pulumi).

Every consumer (the stack's Kueue objects, the TrainJobs the stack declares, ``aiplat train submit/list``,
the log collector, the admission policies) takes a team's names from here, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.core.labels import MEMBER_GROUP_PREFIX, TEAM_LABEL, WORKLOADS_LABEL
from infra.core.teams import TEAM_NAMESPACE_PREFIX, team_namespace

__all__ = ["MEMBER_GROUP_PREFIX", "TEAM_LABEL", "TEAM_NAMESPACE_PREFIX", "team_namespace"]

# Kueue's job labels: the LocalQueue a job is submitted to and its WorkloadPriorityClass.
# kubernetes-sigs/kueue pkg/controller/constants/constants.go (QueueLabel, WorkloadPriorityClassLabel).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Our namespace labels (which team owns it; that it holds workloads, which the admission policies select on)
# live in infra/core/labels.py.
CLUSTER_QUEUE_PREFIX = "team-"
# Every team runs its pods as this service account in its own namespace (the training runtime names it).
TEAM_SERVICE_ACCOUNT = "trainer"
# The Kubernetes group of a team's members (their EKS access entries' kubernetesGroups) and the RBAC objects
# that bind it. Kubernetes reserves the 'system:' prefix for its own groups
# (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects); EKS passes the
# names through unchecked (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html,
# kubernetesGroups).
MEMBER_ROLE = "aiplat-team-member"


def member_group(team: str) -> str:
    """The Kubernetes group of ``team``'s members: ``aiplat-team-<team>``."""
    return f"{MEMBER_GROUP_PREFIX}{team}"


def local_queue(team: str) -> str:
    """The team's LocalQueue (in its namespace): the team's name."""
    return team


def cluster_queue(team: str) -> str:
    """The team's ClusterQueue: ``team-<team>``."""
    return f"{CLUSTER_QUEUE_PREFIX}{team}"


def namespace_labels(team: str) -> dict[str, str]:
    """The labels of the team's namespace besides Pod Security's."""
    return {TEAM_LABEL: team, **dict([WORKLOADS_LABEL])}


def trainjob_labels(team: str, priority: str) -> dict[str, str]:
    """The labels that put a TrainJob in the team's LocalQueue with a WorkloadPriorityClass."""
    return {QUEUE_LABEL: local_queue(team), PRIORITY_LABEL: priority}


@dataclass(frozen=True, kw_only=True)
class TeamNames:
    """Every name of one team."""

    team: str
    namespace: str
    local_queue: str
    cluster_queue: str
    service_account: str
    member_group: str

    @property
    def namespace_labels(self) -> dict[str, str]:
        return namespace_labels(self.team)

    def trainjob_labels(self, priority: str) -> dict[str, str]:
        return trainjob_labels(self.team, priority)


def team_names(team: str, namespace: str | None = None) -> TeamNames:
    """All names of ``team`` (``namespace``: the config's override, if any)."""
    return TeamNames(
        team=team,
        namespace=team_namespace(team, namespace),
        local_queue=local_queue(team),
        cluster_queue=cluster_queue(team),
        service_account=TEAM_SERVICE_ACCOUNT,
        member_group=member_group(team),
    )
