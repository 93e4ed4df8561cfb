"""Read-only calls the rollout's health gate makes after ``up``: EKS node groups, the Kubernetes API's node
list, the inference Deployment and its pods, the model releases in the region's replica bucket, and the
inference endpoint's health check.

The Kubernetes API is reached with an EKS bearer token: a presigned STS ``GetCallerIdentity`` URL carrying
the ``x-k8s-aws-id: <cluster>`` header, base64url-encoded after ``k8s-aws-v1.`` (the format
aws-iam-authenticator defines and ``aws eks get-token`` prints;
https://github.com/kubernetes-sigs/aws-iam-authenticator#api-authorization-from-outside-a-cluster).
No kubernetes client library is needed for one GET.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_HEADER = "x-k8s-aws-id"


@dataclass(frozen=True)
class NodeGroupHealth:
    """``DescribeNodegroup``: status (ACTIVE when ready), desired size, and the health issues EKS lists."""

    name: str
    status: str
    desired: int
    issues: tuple[str, ...] = ()
    error: str = ""


def nodegroup_health(eks: Any, cluster: str, nodegroup: str) -> NodeGroupHealth:
    try:
        ng = eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
    except (ClientError, BotoCoreError) as exc:
        return NodeGroupHealth(nodegroup, "UNKNOWN", 0, error=str(exc))
    issues = tuple(
        f"{i.get('code', '')}: {i.get('message', '')}" for i in ng.get("health", {}).get("issues", [])
    )
    return NodeGroupHealth(nodegroup, ng.get("status", ""), int(ng["scalingConfig"]["desiredSize"]), issues)


def cluster_access(eks: Any, cluster: str) -> tuple[str, str]:
    """(API endpoint, PEM of the cluster CA) from ``DescribeCluster``."""
    c = eks.describe_cluster(name=cluster)["cluster"]
    return c["endpoint"], base64.b64decode(c["certificateAuthority"]["data"]).decode()


def eks_token(sts: Any, cluster: str, expires_s: int = 60) -> str:
    """A bearer token for the cluster's API server, for the credentials of ``sts``."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_HEADER] = cluster

    sts.meta.events.register_first("before-sign.sts.GetCallerIdentity", add_cluster_header)
    try:
        url = sts.generate_presigned_url(
            "get_caller_identity", Params={}, ExpiresIn=expires_s, HttpMethod="GET"
        )
    finally:
        sts.meta.events.unregister("before-sign.sts.GetCallerIdentity", add_cluster_header)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _context(ca_pem: str | None) -> ssl.SSLContext | None:
    return ssl.create_default_context(cadata=ca_pem) if ca_pem else None


def _get(endpoint: str, path: str, token: str, ca_pem: str | None, timeout: float) -> dict[str, Any]:
    """``GET <endpoint><path>`` as JSON. Raises OSError (urllib's HTTPError for a status) / ValueError."""
    request = urllib.request.Request(
        endpoint.rstrip("/") + path,
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout, context=_context(ca_pem)) as response:
        return dict(json.loads(response.read()))


def list_nodes(endpoint: str, token: str, ca_pem: str | None, timeout: float) -> list[dict[str, Any]]:
    """``GET /api/v1/nodes`` (the items). Raises OSError / ValueError when the API does not answer."""
    return list(_get(endpoint, "/api/v1/nodes", token, ca_pem, timeout)["items"])


def read_deployment(
    endpoint: str, token: str, ca_pem: str | None, timeout: float, namespace: str, name: str
) -> dict[str, Any] | None:
    """``GET /apis/apps/v1/namespaces/<ns>/deployments/<name>``; None when it does not exist (404).
    Raises OSError / ValueError when the API does not answer."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    try:
        return _get(endpoint, path, token, ca_pem, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def list_pods(
    endpoint: str, token: str, ca_pem: str | None, timeout: float, namespace: str, labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """``GET /api/v1/namespaces/<ns>/pods?labelSelector=k=v,...`` (the items)."""
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    path = f"/api/v1/namespaces/{namespace}/pods?" + urllib.parse.urlencode({"labelSelector": selector})
    return list(_get(endpoint, path, token, ca_pem, timeout)["items"])


def release_folders(s3: Any, bucket: str, prefix: str) -> list[str]:
    """The folder names right under ``s3://<bucket>/<prefix>/`` (ListObjectsV2 with a delimiter), as the
    inference server lists ``release/<model>/`` for versions (trainer/release/manifest.py list_versions).
    Raises
    ClientError / BotoCoreError when S3 refuses or does not answer."""
    base = prefix.rstrip("/") + "/"
    names: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base, Delimiter="/"):
        names += [p["Prefix"][len(base) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return sorted(names)


def http_json(
    url: str, timeout: float, *, bearer: str, body: Mapping[str, Any] | None = None
) -> tuple[int | None, Any, str]:
    """(status, parsed JSON body or None, why) of ``GET url`` (``POST`` of ``body`` as JSON when given) with
    ``Authorization: Bearer <bearer>``; status None when nothing answered."""
    headers = {"Authorization": f"Bearer {bearer}"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, None, str(exc.reason)
    except (OSError, ValueError) as exc:
        return None, None, str(getattr(exc, "reason", exc))
    try:
        return status, json.loads(raw), ""
    except ValueError as exc:
        return status, None, f"not JSON: {exc}"


def http_status(url: str, timeout: float) -> tuple[int | None, str]:
    """The HTTP status ``url`` answers with, or (None, why) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, str(exc.reason)
    except (OSError, ValueError) as exc:
        return None, str(getattr(exc, "reason", exc))
