"""KEDA as data: chart values and the NetworkPolicies of its namespace. Pure, no Pulumi.

KEDA serves ``external.metrics.k8s.io`` (its metrics server, port 6443) to the HorizontalPodAutoscalers it
creates from ScaledObjects, asks Prometheus for the numbers (its operator), and validates ScaledObjects
(its admission webhooks, port 9443). Values are those of kedacore/charts ``keda/values.yaml`` at v2.20.2;
keys not set keep the chart's defaults, which already run every container non-root, without privilege
escalation or capabilities, on a read-only root filesystem with the RuntimeDefault seccomp profile (Pod
Security ``restricted``).

The chart's own NetworkPolicies (``networkPolicy.enabled``) admit the metrics server and webhooks only from
pods (``namespaceSelector: {}``); the EKS control plane is not a pod but reaches them from its network
interfaces in the cluster's subnets, so they would cut the HPA off. Ours admit the VPC on those two ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.core import namespaces as ns
from infra.pools.documents.nodes import pool_affinity

RELEASE = "keda"
METRICS_SERVER_PORT = 6443  # service.portHttpsTarget
WEBHOOK_PORT = 9443  # webhooks.port default
OPERATOR_GRPC_PORT = 9666  # the metrics server asks the operator over gRPC


def keda_values(*, system_pools: Sequence[str]) -> dict[str, Any]:
    """Chart values: every component on the system pools; two operators (one active, one standby) with a
    PodDisruptionBudget; one metrics server (only one may serve external.metrics.k8s.io, KEDA docs
    "operate/cluster")."""
    return {
        "affinity": pool_affinity(system_pools),
        "operator": {"replicaCount": 2},
        "podDisruptionBudget": {"operator": {"minAvailable": 1}},
        "networkPolicy": {"enabled": False},
        # Neither the operator nor the metrics server reads Secrets: our only trigger is Prometheus without
        # authentication. Restricted, the chart grants Secret reads in KEDA's own namespace only, instead
        # of list/watch on every Secret of the cluster (the inference API keys among them):
        # keda/values.yaml permissions.*.restrict.secret, templates/manager/clusterrole.yaml and
        # minimal-rbac.yaml at v2.20.2.
        "permissions": {
            "operator": {"restrict": {"secret": True}},
            "metricServer": {"restrict": {"secret": True}},
        },
    }


def namespace_policies(*, vpc_cidr: str, monitoring_namespace: str, prometheus_port: int) -> dict[str, Any]:
    """NetworkPolicy name -> spec for KEDA's namespace: the baseline (default deny, DNS, HTTPS to the API
    server but not to the instance metadata address), its own pods among themselves (metrics server ->
    operator gRPC), the control plane (from the VPC) to the metrics server and webhooks, and the operator to
    Prometheus."""
    return {
        **ns.baseline_policies(),
        "allow-same-namespace": ns.same_namespace_policy(),
        "allow-control-plane": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"ipBlock": {"cidr": vpc_cidr}}],
                    "ports": [
                        {"protocol": "TCP", "port": METRICS_SERVER_PORT},
                        {"protocol": "TCP", "port": WEBHOOK_PORT},
                    ],
                }
            ],
        },
        "allow-to-prometheus": ns.egress_to_namespace_policy(monitoring_namespace, prometheus_port),
    }


def prometheus_from_keda_policy(*, keda_namespace: str, prometheus_port: int) -> dict[str, Any]:
    """``NetworkPolicy.spec`` in the monitoring namespace (default deny there): KEDA may query Prometheus."""
    return ns.ingress_from_namespace_policy(keda_namespace, [{"protocol": "TCP", "port": prometheus_port}])
