"""The router's Kubernetes objects as data: its Deployment, Service, PodDisruptionBudget, the ConfigMap of its
backends, its NetworkPolicies (the ALB to the router, the router to the vLLM pods, Prometheus to its metrics)
and its PodMonitor. Pure, no Pulumi.

vllm-router 0.1.17 routes by the request's ``model`` only in its multi-model mode (``--enable-igw``), where
workers join through its ``POST /workers`` API with their model id; the image's launcher
(``images/router/aiplat_router/launch.py``) registers the backends of the ConfigMap, one per served model:
the model's vLLM Service, so kube-proxy spreads a model's requests over its ready pods and the router's
health checks and circuit breaker take a model whose Service stops answering out (the caller gets 503).
The router checks no API key: it forwards ``Authorization`` and each vLLM pod checks it (its ``--api-key``
and our gate, infra/inference/documents/inference.py). ``router_args`` and ``launcher_args`` are the one
source of the router's command line: the Deployment and the CPU test (tests/infra/inference/router) run it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.namespaces import PART_OF, PROMETHEUS_POD_LABELS, namespace_selector
from infra.inference.documents.catalog import Backend
from infra.inference.router.config import RouterConfig
from infra.pools.documents.nodes import pool_affinity

NAME = "inference-router"  # Deployment, Service, PDB, ConfigMap, PodMonitor
CONTAINER = "router"
LAUNCHER_MODULE = "aiplat_router.launch"  # images/router/aiplat_router/launch.py
SELECTOR = {"app.kubernetes.io/name": NAME}
LABELS = {**SELECTOR, "app.kubernetes.io/component": "router", **PART_OF}
PORT = 8080
PORT_NAME = "http"
# Prometheus metrics on a port of their own (vllm-router --prometheus-port; its default host is 127.0.0.1).
# Not named "metrics": the vLLM servers' PodMonitor selects that name in this namespace.
METRICS_PORT = 29000
METRICS_PORT_NAME = "router-metrics"
SERVICE_PORT = 80
SERVICE_PORT_NAME = "http"
# Answered 200 by the router itself, without a key: the ALB's health check and the liveness probe.
HEALTH_PATH = "/health"
LIVENESS_PATH = "/liveness"
CONFIG_DIR = "/etc/aiplat/router"
BACKENDS_FILE_NAME = "backends.json"
BACKENDS_FILE = f"{CONFIG_DIR}/{BACKENDS_FILE_NAME}"
TMP_DIR = "/tmp"
READY_FILE = f"{TMP_DIR}/registered"
RUN_AS = 10001  # the image's user (images/router/Dockerfile)
# The router's health checks: failures before a backend is out, successes before it is back in.
HEALTH_FAILURES = 3
HEALTH_SUCCESSES = 2


@dataclass(frozen=True, kw_only=True)
class RouterSpec:
    """Everything the router's objects say besides its image."""

    backends: Sequence[Backend]
    replicas: int
    policy: str
    cpu: str
    memory: str
    request_timeout_s: int
    health_check_interval_s: int
    pools: Sequence[str]
    prestop_s: int


def router_spec(
    cfg: RouterConfig,
    *,
    backends: Sequence[Backend],
    request_timeout_s: int,
    prestop_s: int,
    pools: Sequence[str],
) -> RouterSpec:
    """The spec of ``inference.router`` for ``backends`` (the wiring and the CPU test both build it here)."""
    check_backends(backends)
    return RouterSpec(
        backends=tuple(backends),
        replicas=cfg.replicas,
        policy=cfg.policy.value,
        cpu=cfg.cpu,
        memory=cfg.memory,
        request_timeout_s=request_timeout_s,
        health_check_interval_s=cfg.health_check_interval_s,
        pools=tuple(pools),
        prestop_s=prestop_s,
    )


def check_backends(backends: Sequence[Backend]) -> None:
    """At least one backend, each served name once (the router would pool two Services under one name)."""
    names = [b.served_name for b in backends]
    if not names:
        raise ValueError("the router needs at least one backend (a served model)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"served names {twice} name more than one backend; give each model its own name")


def backend_url(b: Backend, namespace: str | None) -> str:
    """The backend's URL: its Service's cluster DNS name in ``namespace``; None: ``service`` is a host."""
    host = b.service if namespace is None else f"{b.service}.{namespace}.svc"
    return f"http://{host}:{b.port}"


def backends_data(backends: Sequence[Backend], namespace: str | None) -> dict[str, str]:
    """The ConfigMap's data: the launcher's backends file (``[{model_id, url}]``)."""
    check_backends(backends)
    doc = [{"model_id": b.served_name, "url": backend_url(b, namespace)} for b in backends]
    return {BACKENDS_FILE_NAME: json.dumps(doc, indent=1, sort_keys=True)}


def backend_services(backends_file: str) -> list[tuple[str, str]]:
    """(namespace, Service) of every backend of a backends file (``backends_data``), read back from its
    URLs ``http://<service>.<namespace>.svc:<port>``; a URL of another form raises ValueError."""
    out = []
    for b in json.loads(backends_file):
        host = str(b.get("url", "")).removeprefix("http://").split(":", 1)[0]
        service, _, rest = host.partition(".")
        namespace, _, suffix = rest.partition(".")
        if not (service and namespace and suffix == "svc"):
            raise ValueError(f"{b.get('url')!r} names no Service (http://<service>.<namespace>.svc:<port>)")
        out.append((namespace, service))
    return out


def router_args(
    s: RouterSpec, *, host: str = "0.0.0.0", port: int = PORT, metrics_port: int = METRICS_PORT
) -> list[str]:
    """vllm-router's arguments (each in ``vllm-router --help`` of the pinned version; tested)."""
    return [
        "--enable-igw",
        "--host",
        host,
        "--port",
        str(port),
        "--policy",
        s.policy,
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(metrics_port),
        "--request-timeout-secs",
        str(s.request_timeout_s),
        "--health-check-endpoint",
        HEALTH_PATH,
        "--health-check-interval-secs",
        str(s.health_check_interval_s),
        "--health-failure-threshold",
        str(HEALTH_FAILURES),
        "--health-success-threshold",
        str(HEALTH_SUCCESSES),
        "--log-level",
        "warning",
    ]


def launcher_args(
    s: RouterSpec,
    *,
    backends_file: str = BACKENDS_FILE,
    ready_file: str = READY_FILE,
    host: str = "0.0.0.0",
    port: int = PORT,
    metrics_port: int = METRICS_PORT,
) -> list[str]:
    """The launcher's arguments: the backends file, the readiness file, then the router's own."""
    return [
        "--backends",
        backends_file,
        "--ready-file",
        ready_file,
        "--",
        *router_args(s, host=host, port=port, metrics_port=metrics_port),
    ]


def container(s: RouterSpec, *, image: Any) -> dict[str, Any]:
    """The router container: the launcher, its probes, read-only root, no capability."""
    return {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", LAUNCHER_MODULE],
        "args": launcher_args(s),
        "ports": [
            {"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"},
            {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": s.cpu, "memory": s.memory},
            "limits": {"memory": s.memory},
        },
        "volumeMounts": [
            {"name": "backends", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
        "livenessProbe": {
            "httpGet": {"path": LIVENESS_PATH, "port": PORT_NAME},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        # ready once every backend is registered (the launcher writes the file)
        "readinessProbe": {
            "exec": {"command": ["test", "-f", READY_FILE]},
            "periodSeconds": 5,
            "failureThreshold": 2,
        },
        # keeps serving while the ALB deregisters the pod
        "lifecycle": {"preStop": {"sleep": {"seconds": s.prestop_s}}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def deployment_spec(s: RouterSpec, *, image: Any) -> dict[str, Any]:
    """``Deployment.spec``: ``replicas`` pods on the system pools, spread over zones (hard) and nodes."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": dict(SELECTOR)},
            "matchLabelKeys": ["pod-template-hash"],
        }
        for key, when in (
            ("topology.kubernetes.io/zone", "DoNotSchedule"),
            ("kubernetes.io/hostname", "ScheduleAnyway"),
        )
    ]
    return {
        "replicas": s.replicas,
        "selector": {"matchLabels": dict(SELECTOR)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {
            "metadata": {"labels": dict(LABELS)},
            "spec": {
                # static backends: the router never calls the Kubernetes API
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "terminationGracePeriodSeconds": s.prestop_s + s.request_timeout_s,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS,
                    "runAsGroup": RUN_AS,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                # the system pools (CPU, no hard taint), beside the cluster services' controllers
                "affinity": pool_affinity(s.pools),
                "topologySpreadConstraints": spread,
                "containers": [container(s, image=image)],
                "volumes": [
                    {"name": "backends", "configMap": {"name": NAME}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                ],
            },
        },
    }


def service_spec() -> dict[str, Any]:
    """``Service.spec``: the Ingress's backend (the ALB registers the router pods' IPs)."""
    return {
        "type": "ClusterIP",
        "selector": dict(SELECTOR),
        "ports": [
            {"name": SERVICE_PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }


def pdb_spec() -> dict[str, Any]:
    """``PodDisruptionBudget.spec``: drains evict one router at a time."""
    return {
        "maxUnavailable": 1,
        "selector": {"matchLabels": dict(SELECTOR)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


def from_load_balancer_policy(cidrs: Sequence[str]) -> dict[str, Any]:
    """``NetworkPolicy.spec``: the ALB (its subnets, ``cidrs``) may reach the router's API port only."""
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


def to_backends_policy(backend_selector: dict[str, str], backend_port: str) -> dict[str, Any]:
    """``NetworkPolicy.spec``: the router may reach the vLLM pods' port, nothing else (DNS is the
    namespace's ``allow-dns``)."""
    return {
        "podSelector": {"matchLabels": dict(SELECTOR)},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"podSelector": {"matchLabels": dict(backend_selector)}}],
                "ports": [{"protocol": "TCP", "port": backend_port}],
            }
        ],
    }


def backends_from_router_policy(backend_selector: dict[str, str], backend_port: str) -> dict[str, Any]:
    """``NetworkPolicy.spec``: the vLLM pods take API traffic from the router pods only."""
    return {
        "podSelector": {"matchLabels": dict(backend_selector)},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": dict(SELECTOR)}}],
                "ports": [{"protocol": "TCP", "port": backend_port}],
            }
        ],
    }


def metrics_scrape_policy(monitoring_namespace: str) -> dict[str, Any]:
    """``NetworkPolicy.spec``: Prometheus's pods (and nothing else of the monitoring namespace) may reach the
    router's metrics port, as the namespace's ``allow-metrics-scrape`` admits them to the servers'."""
    prometheus = {
        **namespace_selector(monitoring_namespace),
        "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS},
    }
    return {
        "podSelector": {"matchLabels": dict(SELECTOR)},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [prometheus], "ports": [{"protocol": "TCP", "port": METRICS_PORT_NAME}]}],
    }


def pod_monitor_spec(job: str) -> dict[str, Any]:
    """``PodMonitor.spec`` (monitoring.coreos.com/v1): the router pods' metrics port, as ``job``."""
    return {
        "selector": {"matchLabels": dict(SELECTOR)},
        "podMetricsEndpoints": [
            {
                "port": METRICS_PORT_NAME,
                "path": "/metrics",
                "interval": "30s",
                "relabelings": [{"targetLabel": "job", "replacement": job, "action": "replace"}],
            }
        ],
    }
