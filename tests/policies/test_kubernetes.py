"""Kubernetes objects as pulumi-kubernetes registers them (apiVersion/kind/metadata/spec), and Helm values."""

from __future__ import annotations

import copy

import pytest

from tests.policies.conftest import UNKNOWN, R

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE = "kubernetes:core/v1:Service"
RELEASE = "kubernetes:helm.sh/v3:Release"

CONTAINER = {
    "name": "server",
    "image": "123456789012.dkr.ecr.ap-east-1.amazonaws.com/aiplat-prod/inference@sha256:abc",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    },
    "resources": {
        "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"},
    },
}
POD = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "containers": [CONTAINER],
}


def deployment(pod: dict | None = None, kind: str = DEPLOYMENT, namespace: str = "inference") -> R:
    spec = {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod or POD},
    }
    return R(
        kind,
        "workload",
        {
            "apiVersion": "apps/v1",
            "kind": kind.rsplit(":", 1)[-1],
            "metadata": {"name": "x", "namespace": namespace},
            "spec": spec,
        },
    )


def pod_with(**changes) -> dict:
    pod = copy.deepcopy(POD)
    container = pod["containers"][0]
    for path, value in changes.items():
        node, *keys = path.split("__")
        target = pod if node == "pod" else container
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(keys[-1], None)
        else:
            target[keys[-1]] = value
    return pod


POLICIES = [
    "k8s-run-as-non-root",
    "k8s-no-privilege-escalation",
    "k8s-requests-limits",
    "k8s-training-accelerators",
]


@pytest.mark.parametrize("policy", POLICIES)
def test_compliant_workload(check, policy):
    check(policy, [deployment()], None)


@pytest.mark.parametrize(
    ("policy", "pod", "expected"),
    [
        (
            "k8s-run-as-non-root",
            pod_with(pod__securityContext=None),
            "container 'server' may run as root (runAsNonRoot None, runAsUser None)",
        ),
        ("k8s-run-as-non-root", pod_with(c__securityContext__runAsUser=0), "runAsUser 0.0"),
        ("k8s-run-as-non-root", pod_with(pod__securityContext={"runAsUser": 1000}), None),
        (
            "k8s-no-privilege-escalation",
            pod_with(c__securityContext__allowPrivilegeEscalation=None),
            "may escalate privileges (allowPrivilegeEscalation None)",
        ),
        (
            "k8s-no-privilege-escalation",
            pod_with(c__securityContext__privileged=True),
            "container 'server' is privileged",
        ),
        (
            "k8s-requests-limits",
            pod_with(c__resources__limits={"nvidia.com/gpu": "1"}),
            "lacks ['limits.memory']",
        ),
        (
            "k8s-requests-limits",
            pod_with(c__resources=None),
            "lacks ['requests.cpu', 'requests.memory', 'limits.memory']",
        ),
        (
            "k8s-requests-limits",
            pod_with(c__resources__limits={"memory": "8Gi", "nvidia.com/gpu": "2"}),
            "requests nvidia.com/gpu 1 but limits it to 2",
        ),
        ("k8s-requests-limits", pod_with(c__resources__requests__cpu=UNKNOWN), None),
        (
            "k8s-training-accelerators",
            pod_with(
                c__resources__limits={"memory": "8Gi"}, c__resources__requests={"cpu": "1", "memory": "8Gi"}
            ),
            "tolerates the nvidia.com/gpu taint but requests no nvidia.com/gpu",
        ),
        (
            "k8s-training-accelerators",
            pod_with(pod__nodeSelector={"vpc.amazonaws.com/efa.present": "true"}),
            "pod selects EFA nodes (vpc.amazonaws.com/efa.present) but requests no ['vpc.amazonaws.com/efa']",
        ),
        (
            "k8s-training-accelerators",
            pod_with(
                pod__nodeSelector={"vpc.amazonaws.com/efa.present": "true"},
                c__resources__limits={"memory": "1Ti", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
                c__resources__requests={
                    "cpu": "180",
                    "memory": "1Ti",
                    "nvidia.com/gpu": "8",
                    "vpc.amazonaws.com/efa": "32",
                },
            ),
            None,
        ),
    ],
    ids=[
        "no-security-context",
        "root-user",
        "non-zero-user",
        "escalation-unset",
        "privileged",
        "no-memory-limit",
        "no-resources",
        "gpu-mismatch",
        "unknown-cpu",
        "gpu-toleration-no-gpu",
        "efa-selector-no-efa",
        "efa-selector-full",
    ],
)
def test_workload_violations(check, policy, pod, expected):
    check(policy, [deployment(pod)], expected)


def test_daemonset_may_tolerate_gpu_nodes(check):
    pod = pod_with(
        c__resources__limits={"memory": "100Mi"}, c__resources__requests={"cpu": "10m", "memory": "100Mi"}
    )
    check("k8s-training-accelerators", [deployment(pod, kind=DAEMONSET)], None)
    # a node agent on EFA nodes (the EFA exporter) selects them without requesting the devices
    pod["nodeSelector"] = {"vpc.amazonaws.com/efa.present": "true"}
    check("k8s-training-accelerators", [deployment(pod, kind=DAEMONSET)], None)
    check("k8s-training-accelerators", [deployment(pod)], "pod selects EFA nodes")


def test_exempt_namespaces(check):
    check(
        "k8s-run-as-non-root",
        [deployment(pod_with(pod__securityContext=None), namespace="kube-system")],
        None,
    )


def test_pod_specs_inside_custom_resources(check):
    """A JobSet keeps pods under spec.replicatedJobs[].template.spec.template.spec."""
    pod = pod_with(pod__nodeSelector={"vpc.amazonaws.com/efa.present": "true"})
    jobset = R(
        JOBSET,
        "train",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "t", "namespace": "training"},
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]},
        },
    )
    check(
        "k8s-training-accelerators",
        [jobset],
        ".spec.replicatedJobs[0].template.spec.template.spec: pod selects EFA nodes",
    )


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (R(SERVICE, "grafana", {"metadata": {"name": "grafana"}, "spec": {"type": "ClusterIP"}}), None),
        (
            R(SERVICE, "grafana", {"metadata": {"name": "grafana"}, "spec": {"type": "LoadBalancer"}}),
            "Service 'grafana' exposes monitoring",
        ),
        (
            R(
                SERVICE,
                "web",
                {
                    "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "prometheus"}},
                    "spec": {"type": "LoadBalancer"},
                },
            ),
            "exposes monitoring",
        ),
        (
            R(SERVICE, "inference", {"metadata": {"name": "inference"}, "spec": {"type": "LoadBalancer"}}),
            None,
        ),
        (
            R(
                SERVICE,
                "scraped",
                {
                    "metadata": {"name": "inference", "labels": {"release": "prometheus"}},
                    "spec": {"type": "LoadBalancer"},
                },
            ),
            None,
        ),
        (
            R(
                SERVICE,
                "by-selector",
                {
                    "metadata": {"name": "ui"},
                    "spec": {"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "grafana"}},
                },
            ),
            "Service 'ui' exposes monitoring",
        ),
        (
            R(
                RELEASE,
                "kps",
                {
                    "chart": "kube-prometheus-stack",
                    "values": {"grafana": {"service": {"type": "LoadBalancer"}}},
                },
            ),
            "chart kube-prometheus-stack sets values.grafana.service.type: LoadBalancer",
        ),
        (
            R(
                RELEASE,
                "kps",
                {"chart": "kube-prometheus-stack", "values": {"grafana": {"service": {"type": "ClusterIP"}}}},
            ),
            None,
        ),
    ],
    ids=[
        "clusterip",
        "grafana-lb",
        "prometheus-lb",
        "inference-lb",
        "scrape-label",
        "selector",
        "helm-grafana-lb",
        "helm-clusterip",
    ],
)
def test_k8s_no_loadbalancer_monitoring(check, resource, expected):
    check("k8s-no-loadbalancer-monitoring", [resource], expected)


def namespace(name: str, level: str | None) -> R:
    labels = {"app.kubernetes.io/part-of": "aiplat"} | (
        {"pod-security.kubernetes.io/enforce": level} if level else {}
    )
    return R(
        NAMESPACE,
        name,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
    )


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (namespace("inference", "restricted"), None),
        (namespace("monitoring", "baseline"), None),
        (namespace("minio", None), "namespace 'minio' has no pod-security.kubernetes.io/enforce label"),
        (namespace("training", "privileged"), "namespace 'training' enforces 'privileged'"),
        (namespace("kube-system", "privileged"), None),
        (namespace("node-exporters", "privileged"), None),
        (namespace("monitoring", "privileged"), "namespace 'monitoring' enforces 'privileged'"),
    ],
    ids=["restricted", "baseline", "missing", "privileged", "privileged-allowed", "exporters", "monitoring"],
)
def test_k8s_namespace_pod_security(check, resource, expected):
    check("k8s-namespace-pod-security", [resource], expected)
