"""The inference server's Kubernetes objects as data: Deployment, Service, PodDisruptionBudget, the KEDA
ScaledObject that owns its HorizontalPodAutoscaler, and the NetworkPolicy that lets the ALB in. Pure, no
Pulumi.

What the server expects is in ``inference/serve.py``'s docstring (docs/inference/server.md): one port,
8080, for the API, the probes and ``/metrics``; ``/healthz`` for liveness (never looks at the model),
``/readyz`` for readiness; user 10001 on a read-only root filesystem with two writable ``emptyDir``
mounts; SIGTERM drains for ``INFERENCE_DRAIN_DELAY_S`` then waits ``INFERENCE_GRACEFUL_SHUTDOWN_S`` for
requests in flight. The ``infra`` package may not import ``inference`` (separate programs), so the names
it exports are repeated here and tied to the server's own by tests
(``tests/infra/inference/documents/test_inference.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.namespaces import PART_OF
from infra.inference.config import size_bytes
from infra.pools.documents.nodes import GPU_RESOURCE

NAME = "inference"  # Deployment, Service, PDB, ScaledObject, HPA and Ingress
CONTAINER = "server"
SELECTOR = {"app.kubernetes.io/name": "inference-server"}
LABELS = {**SELECTOR, "app.kubernetes.io/component": "server", **PART_OF}
# One container port for the API, the probes and /metrics. Its name is what the monitoring PodMonitor
# (infra/monitoring/documents.py inference_pod_monitor_spec) and the namespace's scrape policy select it by.
PORT = 8080
PORT_NAME = "metrics"
SERVICE_PORT = 80
SERVICE_PORT_NAME = "http"
LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
CACHE_DIR = "/var/cache/inference"
TMP_DIR = "/tmp"
RUN_AS = 10001  # the image's user (images/inference/Dockerfile)
# The gauge the autoscaler reads, per pod: generations accepted and not answered yet (queued + generating).
IN_FLIGHT_METRIC = "inference_requests_in_flight"
# Seconds between SIGTERM's end of the server's shutdown and SIGKILL: uvicorn's lifespan shutdown (stop the
# batcher and the poller) and the process exit need a moment after the grace for requests.
SHUTDOWN_MARGIN_S = 10
# Logs and other container writes beyond the two emptyDirs (the root filesystem is read-only).
EPHEMERAL_HEADROOM = 1 * 2**30


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """Everything the Deployment says besides the image and the release root (which come from the training
    stack and are resolved at deploy time)."""

    model_name: str
    region: str
    service_account: str
    pin_version: str | None = None
    pool_label: str
    pools: Sequence[str]
    gpu_taint: tuple[str, str]
    cpu: str
    cpu_limit: str | None
    memory: str
    cache_size: str
    tmp_size: str
    drain_delay_s: int
    graceful_shutdown_s: int
    request_timeout_s: int
    first_load_timeout_s: int


def termination_grace_s(s: ServerSpec) -> int:
    """terminationGracePeriodSeconds: the server's drain delay, its grace for requests in flight, then the
    margin (the server's docstring asks for more than drain + grace + a few seconds)."""
    return s.drain_delay_s + s.graceful_shutdown_s + SHUTDOWN_MARGIN_S


def ephemeral_storage(s: ServerSpec) -> str:
    """The container's ephemeral-storage request and limit: both emptyDirs (they count against it) plus
    headroom for logs, so the scheduler puts the pod on a node with room for two model versions."""
    total = size_bytes(s.cache_size) + size_bytes(s.tmp_size) + EPHEMERAL_HEADROOM
    return f"{total // 2**20}Mi"


def server_env(s: ServerSpec, *, release_root: str) -> list[dict[str, str]]:
    """The server's settings (inference/config.py); only variables it knows, since an unknown
    ``INFERENCE_*`` variable is a configuration error (exit 2)."""
    env = {
        "INFERENCE_RELEASE_ROOT": release_root,
        "INFERENCE_MODEL_NAME": s.model_name,
        **({"INFERENCE_PIN_VERSION": s.pin_version} if s.pin_version else {}),
        "INFERENCE_HTTP_PORT": str(PORT),
        "INFERENCE_CACHE_DIR": CACHE_DIR,
        "INFERENCE_DRAIN_DELAY_S": str(s.drain_delay_s),
        "INFERENCE_GRACEFUL_SHUTDOWN_S": str(s.graceful_shutdown_s),
        "INFERENCE_REQUEST_TIMEOUT_S": str(s.request_timeout_s),
        # S3 through boto3: pods cannot read the region from instance metadata (hop limit 1, and the
        # namespace's NetworkPolicies block 169.254.169.254).
        "AWS_REGION": s.region,
        "AWS_DEFAULT_REGION": s.region,
    }
    return [{"name": k, "value": v} for k, v in env.items()]


def _probe(path: str, *, period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def probes() -> dict[str, dict[str, Any]]:
    """startupProbe and livenessProbe on ``/healthz``, readinessProbe on ``/readyz``.

    Only readiness looks at the model: a failing startup or liveness probe restarts the container
    (https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/), which would turn
    "no release yet" or "replica bucket unreachable" into a restart loop that re-downloads from scratch. The
    startup probe gives the process 5 minutes to answer HTTP at all (Python and CUDA torch imports on a cold
    node) before liveness starts; the first model load is covered by the Deployment's
    progressDeadlineSeconds, during which the pod is simply not ready (no traffic)."""
    return {
        "startupProbe": _probe(LIVENESS_PATH, period=5, timeout=3, failures=60),
        "livenessProbe": _probe(LIVENESS_PATH, period=10, timeout=5, failures=6),
        "readinessProbe": {**_probe(READINESS_PATH, period=5, timeout=3, failures=2), "successThreshold": 1},
    }


def pod_spec(s: ServerSpec, *, image: str, release_root: str) -> dict[str, Any]:
    """The pod template's spec: restricted Pod Security, one GPU on the listed pools, spread over zones."""
    taint_key, taint_value = s.gpu_taint
    requests = {
        "cpu": s.cpu,
        "memory": s.memory,
        GPU_RESOURCE: "1",
        "ephemeral-storage": ephemeral_storage(s),
    }
    limits = {"memory": s.memory, GPU_RESOURCE: "1", "ephemeral-storage": ephemeral_storage(s)}
    if s.cpu_limit is not None:
        limits["cpu"] = s.cpu_limit
    spread = [
        # Zones: hard, so two replicas never share a zone's fate; per ReplicaSet (pod-template-hash) so a
        # rollout's new pods spread on their own.
        # https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": dict(SELECTOR)},
            "matchLabelKeys": ["pod-template-hash"],
        },
        # Nodes: preferred (a multi-GPU node may hold several replicas when capacity is short).
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(SELECTOR)},
            "matchLabelKeys": ["pod-template-hash"],
        },
    ]
    return {
        "serviceAccountName": s.service_account,
        # The server calls no Kubernetes API; IRSA's web identity token is mounted by the EKS pod identity
        # webhook on its own.
        "automountServiceAccountToken": False,
        # A Service named inference-* would inject INFERENCE_*_SERVICE_* variables, which the server refuses
        # as unknown settings (inference/config.py).
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_s(s),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": s.pool_label, "operator": "In", "values": list(s.pools)}
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [
            {"key": taint_key, "operator": "Equal", "value": taint_value, "effect": "NoSchedule"}
        ],
        "topologySpreadConstraints": spread,
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
                "env": server_env(s, release_root=release_root),
                "resources": {"requests": requests, "limits": limits},
                "volumeMounts": [
                    {"name": "cache", "mountPath": CACHE_DIR},
                    {"name": "tmp", "mountPath": TMP_DIR},
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                **probes(),
            }
        ],
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": s.cache_size}},
            {"name": "tmp", "emptyDir": {"sizeLimit": s.tmp_size}},
        ],
    }


def deployment_spec(s: ServerSpec, *, image: str, release_root: str) -> dict[str, Any]:
    """``Deployment.spec``. No ``replicas``: the HPA owns the count, and a declared one would reset it on
    every update
    (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#migrating-deployments-and-statefulsets-to-horizontal-autoscaling).
    Rollouts add one pod before removing one (a GPU replica never goes missing for an upgrade), and a pod
    that is not ready within ``first_load_timeout_s`` fails the rollout instead of hanging it."""
    return {
        "selector": {"matchLabels": dict(SELECTOR)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "progressDeadlineSeconds": s.first_load_timeout_s,
        "revisionHistoryLimit": 10,
        "template": {
            "metadata": {"labels": dict(LABELS)},
            "spec": pod_spec(s, image=image, release_root=release_root),
        },
    }


def service_spec() -> dict[str, Any]:
    """``Service.spec``: the ALB's target group (target-type ip registers the pod IPs behind it)."""
    return {
        "type": "ClusterIP",
        "selector": dict(SELECTOR),
        "ports": [
            {"name": SERVICE_PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }


def pdb_spec() -> dict[str, Any]:
    """``PodDisruptionBudget.spec``: node drains (Karpenter, upgrades) evict one replica at a time.

    ``AlwaysAllow`` lets a drain evict pods that are not ready anyway (e.g. waiting for a first release), so
    they never block a node upgrade.
    https://kubernetes.io/docs/tasks/run-application/configure-pdb/#unhealthy-pod-eviction-policy
    """
    return {
        "maxUnavailable": 1,
        "selector": {"matchLabels": dict(SELECTOR)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


def in_flight_query(namespace: str, job: str) -> str:
    """PromQL: requests in flight summed over the server's pods (the PodMonitor's ``job`` label)."""
    return f'sum({IN_FLIGHT_METRIC}{{namespace="{namespace}",job="{job}"}})'


@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    """The ScaledObject's inputs."""

    prometheus_url: str
    query: str
    target_in_flight: int
    min_replicas: int
    max_replicas: int
    scale_down_stabilization_s: int


def scaled_object_spec(a: Autoscaling) -> dict[str, Any]:
    """``ScaledObject.spec`` (keda.sh/v1alpha1, KEDA 2.20): KEDA creates and owns the HPA ``inference``
    with an External metric, target ``AverageValue`` = ``target_in_flight``: desired replicas =
    ceil(sum of in-flight requests / target). https://keda.sh/docs/2.20/reference/scaledobject-spec/

    ``ignoreNullValues: "false"``: an empty answer (Prometheus lost the targets) is an error, not 0, so KEDA
    applies the fallback (keep the current count, at least ``min_replicas``) instead of scaling down to the
    minimum in the middle of an outage of the monitoring. https://keda.sh/docs/2.20/scalers/prometheus/
    """
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
        "minReplicaCount": a.min_replicas,
        "maxReplicaCount": a.max_replicas,
        "pollingInterval": 15,
        "fallback": {
            "failureThreshold": 3,
            "replicas": a.min_replicas,
            "behavior": "currentReplicasIfHigher",
        },
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "name": NAME,
                "behavior": {
                    # Up at once: a GPU node takes minutes to arrive, so ask early (double, or +4 a minute).
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "selectPolicy": "Max",
                        "policies": [
                            {"type": "Percent", "value": 100, "periodSeconds": 60},
                            {"type": "Pods", "value": 4, "periodSeconds": 60},
                        ],
                    },
                    # Down slowly: one replica per two minutes after the stabilization window.
                    "scaleDown": {
                        "stabilizationWindowSeconds": a.scale_down_stabilization_s,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                    },
                },
            }
        },
        "triggers": [
            {
                "type": "prometheus",
                "name": "in_flight",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": a.prometheus_url,
                    "query": a.query,
                    "threshold": str(a.target_in_flight),
                    "ignoreNullValues": "false",
                },
            }
        ],
    }


def load_balancer_ingress_policy(cidrs: Sequence[str]) -> dict[str, Any]:
    """``NetworkPolicy.spec``: the ALB (target-type ip sends from its own addresses, in ``cidrs``: the
    subnets it lives in) may reach the server's port, for traffic and health checks. Scraping by the
    monitoring namespace is the namespace's own ``allow-metrics-scrape`` policy."""
    return {
        "podSelector": {"matchLabels": dict(SELECTOR)},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"ipBlock": {"cidr": c}} for c in cidrs],
                "ports": [{"protocol": "TCP", "port": PORT_NAME}],
            }
        ],
    }


def labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels of the objects around the server (PART_OF and the server's name)."""
    return {**LABELS, **(extra or {})}
