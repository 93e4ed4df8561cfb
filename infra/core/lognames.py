"""Where container logs land in CloudWatch Logs: one log group per namespace, one stream per pod container.

The one source of these names: the collector's configuration (infra/logs) writes there, and
`aiplat train logs` reads there after the pods are gone.
"""


def container_log_group_prefix(cluster_name: str) -> str:
    """What every container log group of ``cluster_name`` starts with, and no other group: the grants and the
    logs key's condition name this prefix, not one group per namespace (a team adds none to them)."""
    return f"/aiplat/{cluster_name}/containers/"


def container_log_group(cluster_name: str, namespace: str) -> str:
    """The CloudWatch Logs group that holds every container log of ``namespace`` in ``cluster_name``."""
    return f"{container_log_group_prefix(cluster_name)}{namespace}"


def container_log_groups_pattern(cluster_name: str) -> str:
    """Every container log group of ``cluster_name`` as one IAM pattern (``*`` matches the namespace, and in
    an ARN the group's ``:*`` and ``:log-stream:<stream>`` after it)."""
    return f"{container_log_group_prefix(cluster_name)}*"


def container_log_stream(pod: str, container: str) -> str:
    """The log stream of one container of one pod (pod names are unique within a namespace)."""
    return f"{pod}.{container}"
