"""Our namespace labels, the names every side selects on (pure constants, no imports).

``WORKLOADS_LABEL``: the namespaces whose pods the admission policies govern (infra/admission): training,
inference, every team's and the publisher's. ``TEAM_LABEL``: the team that owns a namespace (infra/queueing).
"""

WORKLOADS_LABEL = ("aiplat.io/workloads", "true")
TEAM_LABEL = "aiplat.io/team"
# A team namespace carries ``<prefix><class>: "true"`` for each WorkloadPriorityClass its jobs may name
# (``teams.<team>.priority_classes``); the admission policy ``aiplat-team-priorities`` refuses any other.
PRIORITY_ALLOWED_PREFIX = "priority.aiplat.io/"


def priority_allowed_label(priority_class: str) -> str:
    """The namespace label that lets a team's jobs name ``priority_class``."""
    return PRIORITY_ALLOWED_PREFIX + priority_class


# The Kubernetes groups of the teams' members (``aiplat-team-<team>``, their EKS access entries'
# kubernetesGroups): the admission policy ``aiplat-workload-priority`` refuses them a Workload's priority.
MEMBER_GROUP_PREFIX = "aiplat-team-"

# The release publisher's nodes (a node pool of their own on train stacks, rule ``publisher-pool``): the
# label its pods select and the NoSchedule taint only they tolerate (admission policy
# ``aiplat-publisher-nodes``), so a compromised node elsewhere never holds the token that may kms:Sign.
PUBLISHER_NODE_LABEL = ("aiplat.io/publisher", "true")
PUBLISHER_TAINT = ("aiplat.io/publisher", "true", "NoSchedule")

# The budget hold (infra/monitoring/budget/budget_hold.py, which carries its own copy: it runs alone in the
# cluster) marks a ClusterQueue it held with the month (YYYY-MM); an operator exempts a team for a month
# with the other annotation (docs/how-to/team-spend.md).
BUDGET_HOLD_ANNOTATION = "aiplat.io/budget-hold"
BUDGET_EXEMPT_ANNOTATION = "aiplat.io/budget-exempt"
