"""Our namespace labels, the names every side selects on (pure constants, no imports).

``WORKLOADS_LABEL``: the namespaces whose pods the admission policies govern (infra/admission): training,
inference, every team's and the publisher's. ``TEAM_LABEL``: the team that owns a namespace (infra/queueing).
"""

WORKLOADS_LABEL = ("aiplat.io/workloads", "true")
TEAM_LABEL = "aiplat.io/team"
