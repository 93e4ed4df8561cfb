"""The cluster calls of ``aiplat train submit/list/logs/cancel`` and ``aiplat release publish``: the
Kubernetes API through the official ``kubernetes`` client, CloudWatch Logs for the logs of pods that are
gone, and the checkpoint store for a run's last committed step.

Authentication is the one ``aws eks get-token`` does: a presigned STS ``GetCallerIdentity`` URL with the
``x-k8s-aws-id`` header (``infra/io/cluster_health.py`` ``eks_token``), refreshed before every request
(it is valid for minutes; ``cancel`` and ``logs --follow`` may run longer). The endpoint and CA come from
``eks:DescribeCluster``; ``api_endpoint`` replaces the endpoint (an SSM port forward to a private one)
while TLS still checks the cluster's own host name against its CA.
https://docs.aws.amazon.com/eks/latest/userguide/cluster-auth.html
"""

from __future__ import annotations

import atexit
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from infra.core.errors import (
    PRIVATE_ENDPOINT_FIX,
    ClusterAccessError,
    JobNotFoundError,
    NameTakenError,
)
from infra.core.lognames import container_log_group, container_log_stream
from infra.io.aws_credentials import aws_error
from infra.io.cluster_health import cluster_access, eks_token

TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
# Kueue v0.19.2 serves v1beta2 (apis/kueue/v1beta2/workload_types.go) and the visibility API's pending
# positions (apis/visibility/v1beta2/types.go; pkg/visibility/storage/storage.go
# "localqueues/pendingworkloads"; feature gate VisibilityOnDemand, on by default since v0.9).
KUEUE_GROUP, KUEUE_VERSION, WORKLOADS = "kueue.x-k8s.io", "v1beta2", "workloads"
VISIBILITY_PATH = (
    "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{name}/pendingworkloads"
)
# (connect, read) seconds of one API request; a private endpoint seen from outside its VPC never answers.
REQUEST_TIMEOUT = (10, 60)
ACCESS_FIX = (
    "ask a platform admin to list your IAM role under teams.<team>.members of the stack (an EKS access "
    "entry in the team's group, bound to its Role; docs/how-to/running-jobs.md)"
)


@dataclass(frozen=True)
class Cluster:
    """A connected cluster: the ``kubernetes`` client, its name, and where the API is."""

    api: Any  # kubernetes.client.ApiClient
    name: str
    endpoint: str


def _ca_file(pem: str) -> str:
    # the kubernetes client takes the CA as a file path
    fd, path = tempfile.mkstemp(prefix="aiplat-eks-ca-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(pem)
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


def connect(eks: Any, sts: Any, cluster: str, api_endpoint: str | None = None) -> Cluster:
    """A ``kubernetes`` client for ``cluster`` with the credentials of ``sts``. Raises
    ``AwsCredentialsError`` for missing or expired credentials, ``ClusterAccessError`` when EKS does not
    know the cluster."""
    from kubernetes import client

    try:
        endpoint, ca_pem = cluster_access(eks, cluster)
        token = eks_token(sts, cluster)
    except (ClientError, BotoCoreError) as exc:
        if (known := aws_error(exc)) is not None:  # credentials, no network, a denied call
            raise known from exc
        raise ClusterAccessError(
            f"cluster {cluster}: eks:DescribeCluster failed ({exc}); fix: deploy the stack first (aiplat "
            "rollout) or check the region and that your role may call eks:DescribeCluster"
        ) from exc
    cfg = client.Configuration()
    cfg.host = (api_endpoint or endpoint).rstrip("/")
    if ca_pem:
        cfg.ssl_ca_cert = _ca_file(ca_pem)
    if api_endpoint:  # a tunnel: the certificate names the cluster's host, not the tunnel's
        cfg.tls_server_name = urlsplit(endpoint).hostname
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.refresh_api_key_hook = lambda c: c.api_key.update(authorization=eks_token(sts, cluster))
    cfg.retries = 1
    return Cluster(api=client.ApiClient(cfg), name=cluster, endpoint=cfg.host)


def api_error(exc: BaseException, cluster: Cluster, what: str) -> BaseException:
    """A client error as the user's error: unreachable or refused (exit 7), else ``exc`` itself."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(exc, ApiException) and exc.status in (401, 403):
        return ClusterAccessError(
            f"cluster {cluster.name}: {what}: the API server refused your credentials (HTTP {exc.status} "
            f"{exc.reason}); fix: {ACCESS_FIX}"
        )
    if isinstance(exc, HTTPError | OSError):
        return ClusterAccessError(
            f"cluster {cluster.name}: {what}: {cluster.endpoint} did not answer ({type(exc).__name__}); "
            f"fix: {PRIVATE_ENDPOINT_FIX}"
        )
    return exc


def _objects(cluster: Cluster) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(cluster.api)


def create_trainjob(cluster: Cluster, doc: dict[str, Any]) -> dict[str, Any]:
    """``POST`` the TrainJob; ``NameTakenError`` when one of that name exists (409)."""
    from kubernetes.client.exceptions import ApiException

    ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    try:
        return dict(
            _objects(cluster).create_namespaced_custom_object(
                TRAINER_GROUP, TRAINER_VERSION, ns, TRAINJOBS, doc, _request_timeout=REQUEST_TIMEOUT
            )
        )
    except ApiException as exc:
        if exc.status == 409:
            raise NameTakenError(
                f"--name: TrainJob {name!r} already exists in namespace {ns}; fix: choose another --name, "
                f"or cancel it first (aiplat train cancel {name})"
            ) from None
        raise api_error(exc, cluster, f"create TrainJob {ns}/{name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"create TrainJob {ns}/{name}") from exc


def list_objects(cluster: Cluster, namespace: str, group: str, version: str, plural: str) -> list[dict]:
    """Every object of a custom resource in ``namespace``."""
    try:
        got = _objects(cluster).list_namespaced_custom_object(
            group, version, namespace, plural, _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as exc:
        raise api_error(exc, cluster, f"list {plural} in {namespace}") from exc
    return list(got.get("items", []))


def get_trainjob(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The TrainJob; ``JobNotFoundError`` when there is none."""
    from kubernetes.client.exceptions import ApiException

    try:
        return dict(
            _objects(cluster).get_namespaced_custom_object(
                TRAINER_GROUP, TRAINER_VERSION, namespace, TRAINJOBS, name, _request_timeout=REQUEST_TIMEOUT
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            raise JobNotFoundError(
                f"NAME: no TrainJob {name!r} in namespace {namespace}; fix: check the name and --team "
                "(aiplat train list --team TEAM)"
            ) from None
        raise api_error(exc, cluster, f"read TrainJob {namespace}/{name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"read TrainJob {namespace}/{name}") from exc


def pending_positions(cluster: Cluster, namespace: str, local_queue: str) -> dict[str, dict[str, Any]] | None:
    """Kueue's pending workloads of a LocalQueue by workload name (``positionInLocalQueue``,
    ``positionInClusterQueue``); None when the visibility API does not answer them."""
    from kubernetes.client.exceptions import ApiException

    try:
        got = cluster.api.call_api(
            VISIBILITY_PATH,
            "GET",
            {"namespace": namespace, "name": local_queue},
            header_params={"Accept": "application/json"},
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as exc:
        # not served (gate off, aggregated API down) or not granted (Kueue v0.19.2 aggregates its
        # pending-workloads-lq-viewer role to view/edit/admin): the list goes on without positions
        if exc.status in (403, 404, 503):
            return None
        raise api_error(exc, cluster, f"pending workloads of {namespace}/{local_queue}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"pending workloads of {namespace}/{local_queue}") from exc
    return {i["metadata"]["name"]: i for i in (got or {}).get("items", [])}


def delete_trainjob(cluster: Cluster, namespace: str, name: str) -> None:
    """Delete the TrainJob, its JobSet, Jobs and pods (foreground), each pod with its own
    ``terminationGracePeriodSeconds``: no ``gracePeriodSeconds`` is sent, so the API server and the
    garbage collector use the pod spec's, which the training runtime sizes to the trainer's shutdown window
    (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        _objects(cluster).delete_namespaced_custom_object(
            TRAINER_GROUP,
            TRAINER_VERSION,
            namespace,
            TRAINJOBS,
            name,
            body=client.V1DeleteOptions(propagation_policy="Foreground"),
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as exc:
        if exc.status == 404:
            raise JobNotFoundError(
                f"NAME: no TrainJob {name!r} in namespace {namespace}; fix: check the name and --team"
            ) from None
        raise api_error(exc, cluster, f"delete TrainJob {namespace}/{name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"delete TrainJob {namespace}/{name}") from exc


def list_pods(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods matching ``selector``, as JSON (the API's own field names)."""
    from kubernetes import client

    try:
        got = client.CoreV1Api(cluster.api).list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as exc:
        raise api_error(exc, cluster, f"list pods in {namespace}") from exc
    return [cluster.api.sanitize_for_serialization(p) for p in got.items]


def list_events(cluster: Cluster, namespace: str, field_selector: str = "") -> list[dict[str, Any]]:
    """The core/v1 Events of ``namespace`` (matching ``field_selector``), as JSON."""
    from kubernetes import client

    try:
        got = client.CoreV1Api(cluster.api).list_namespaced_event(
            namespace, field_selector=field_selector or None, _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as exc:
        raise api_error(exc, cluster, f"list events in {namespace}") from exc
    return [cluster.api.sanitize_for_serialization(e) for e in got.items]


def read_node(cluster: Cluster, name: str) -> tuple[dict[str, Any] | None, str]:
    """(the Node, "") or (None, why it could not be read): a team member's role reads no nodes, and a node
    that failed may be gone."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        got = client.CoreV1Api(cluster.api).read_node(name, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 403:
            return None, f"node {name}: your role may not read nodes (a platform admin's may)"
        if exc.status == 404:
            return None, f"node {name}: gone (replaced or scaled in since)"
        raise api_error(exc, cluster, f"read node {name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"read node {name}") from exc
    return cluster.api.sanitize_for_serialization(got), ""


def read_cluster_queue(cluster: Cluster, name: str) -> tuple[dict[str, Any] | None, str]:
    """(the Kueue ClusterQueue, "") or (None, why it could not be read)."""
    from kubernetes.client.exceptions import ApiException

    try:
        got = _objects(cluster).get_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", name, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status in (403, 404):
            return (
                None,
                f"clusterqueue {name}: {'your role may not read it' if exc.status == 403 else 'gone'}",
            )
        raise api_error(exc, cluster, f"read clusterqueue {name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"read clusterqueue {name}") from exc
    return dict(got), ""


def node_events(cluster: Cluster, name: str) -> tuple[list[dict[str, Any]], str]:
    """(the Events recorded on Node ``name``, "") or ([], why not): the kubelet, the node controller and
    Karpenter record them in the ``default`` namespace."""
    from kubernetes.client.exceptions import ApiException

    try:
        return list_events(cluster, "default", f"involvedObject.kind=Node,involvedObject.name={name}"), ""
    except ClusterAccessError as exc:
        cause = exc.__cause__
        if isinstance(cause, ApiException) and cause.status == 403:
            return [], f"events of node {name}: your role may not read them (a platform admin's may)"
        raise


def pod_log(cluster: Cluster, namespace: str, pod: str, container: str, *, follow: bool) -> Iterator[str]:
    """The container's log lines (pod logs API), following it while it runs when ``follow``."""
    from kubernetes import client

    try:
        response = client.CoreV1Api(cluster.api).read_namespaced_pod_log(
            pod,
            namespace,
            container=container,
            follow=follow,
            _preload_content=False,
            _request_timeout=(REQUEST_TIMEOUT[0], None) if follow else REQUEST_TIMEOUT,
        )
    except Exception as exc:
        raise api_error(exc, cluster, f"logs of {namespace}/{pod}") from exc
    try:
        pending = b""
        for chunk in response.stream(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")
        if pending:
            yield pending.decode(errors="replace")
    finally:
        response.release_conn()


def stored_log_streams(logs: Any, cluster: str, namespace: str, pod_prefix: str, container: str) -> list[str]:
    """The CloudWatch Logs streams of ``container`` in the pods named ``<pod_prefix>...`` (C4 names), oldest
    first; empty when the group does not exist (no log was ever collected in the namespace)."""
    group = container_log_group(cluster, namespace)
    streams: list[dict[str, Any]] = []
    try:
        for page in logs.get_paginator("describe_log_streams").paginate(
            logGroupName=group, logStreamNamePrefix=pod_prefix
        ):
            streams += page.get("logStreams", [])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return []
        raise
    suffix = container_log_stream("", container)
    # oldest first: a rank restarted in a new pod has a stream per pod
    ours = [s for s in streams if s["logStreamName"].endswith(suffix)]
    ours.sort(key=lambda s: (s.get("firstEventTimestamp") or s.get("creationTime") or 0, s["logStreamName"]))
    return [s["logStreamName"] for s in ours]


def stored_log(logs: Any, cluster: str, namespace: str, stream: str) -> Iterator[str]:
    """Every event of one stream, oldest first."""
    group = container_log_group(cluster, namespace)
    token = None
    while True:
        page = logs.get_log_events(
            logGroupName=group,
            logStreamName=stream,
            startFromHead=True,
            **({"nextToken": token} if token else {}),
        )
        for event in page.get("events", []):
            yield str(event["message"]).rstrip("\n")
        if page.get("nextForwardToken") in (None, token):
            return
        token = page["nextForwardToken"]


def read_runtime(cluster: Cluster, name: str) -> dict[str, Any]:
    """The ClusterTrainingRuntime ``name`` as the cluster has it (its image digest is the run's)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return dict(
            _objects(cluster).get_cluster_custom_object(
                TRAINER_GROUP,
                TRAINER_VERSION,
                "clustertrainingruntimes",
                name,
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterAccessError(
                f"cluster {cluster.name}: no ClusterTrainingRuntime {name!r}: the stack's training side is "
                "not deployed; fix: deploy the stack (aiplat rollout or pulumi up) first"
            ) from None
        raise api_error(exc, cluster, f"read ClusterTrainingRuntime {name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"read ClusterTrainingRuntime {name}") from exc


def create_job(cluster: Cluster, doc: dict[str, Any]) -> dict[str, Any]:
    """``POST`` a ``batch/v1`` Job; ``NameTakenError`` when one of that name exists (409)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    try:
        got = client.BatchV1Api(cluster.api).create_namespaced_job(ns, doc, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 409:
            raise NameTakenError(
                f"--name: Job {name!r} already exists in namespace {ns}; fix: choose another --name, or "
                f"delete it first (kubectl -n {ns} delete job {name})"
            ) from None
        raise api_error(exc, cluster, f"create Job {ns}/{name}") from exc
    except Exception as exc:
        raise api_error(exc, cluster, f"create Job {ns}/{name}") from exc
    return dict(cluster.api.sanitize_for_serialization(got))


def read_job(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The ``batch/v1`` Job as the cluster has it (its status: active, succeeded, failed)."""
    from kubernetes import client

    try:
        got = client.BatchV1Api(cluster.api).read_namespaced_job(
            name, namespace, _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as exc:
        raise api_error(exc, cluster, f"read Job {namespace}/{name}") from exc
    return dict(cluster.api.sanitize_for_serialization(got))
