"""Where container logs land in CloudWatch Logs: one log group per namespace, one stream per pod container.

The one source of these names: the collector's configuration (infra/logs) writes there, and
`aiplat train logs` reads there after the pods are gone.
"""


def container_log_group(cluster_name: str, namespace: str) -> str:
    """The CloudWatch Logs group that holds every container log of ``namespace`` in ``cluster_name``."""
    return f"/aiplat/{cluster_name}/containers/{namespace}"


def container_log_stream(pod: str, container: str) -> str:
    """The log stream of one container of one pod (pod names are unique within a namespace)."""
    return f"{pod}.{container}"
