"""Kubernetes objects the stack declares: pods non-root without privilege escalation, with requests and
limits; GPU/EFA requests on pods meant for GPU and EFA nodes; no LoadBalancer Service for Prometheus,
Grafana or Alertmanager (also through kube-prometheus-stack Helm values); Pod Security labels on every
namespace; every workload namespace under the admission policies.

Pod specs are found wherever a workload keeps them (Deployment, Job, CronJob, DaemonSet, StatefulSet, Pod,
JobSet, Kubeflow TrainJob/TrainingRuntime ...): any object with a ``containers`` list. Helm releases are
rendered by Helm inside the cluster; only their values are visible here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.core.labels import WORKLOADS_LABEL
from infra.core.namespaces import EXPORTERS_NAMESPACE, PSS_LABEL_PREFIX, PodSecurity
from infra.pools.documents.nodes import EFA_LABEL, EFA_RESOURCE, GPU_RESOURCE, GPU_TAINT_KEY

from .core import (
    HIGH,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    dig,
    number,
    resource_rule,
    stack_rule,
    violation,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE = "kubernetes:core/v1:Service"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
PSS = "https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted"

EXEMPT = {
    "exemptNamespaces": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["kube-system"],
        "description": "Namespaces whose workloads this rule does not check (cluster add-ons).",
    }
}


def pod_specs(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, pod spec) of every pod spec nested in a Kubernetes object: any mapping with ``containers``."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield path or ".", value
            return
        for key, item in value.items():
            yield from pod_specs(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from pod_specs(item, f"{path}[{i}]")


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c
        for c in as_list(spec.get("initContainers")) + as_list(spec.get("containers"))
        if isinstance(c, dict)
    ]


def workload(r: Res, ctx: Ctx) -> bool:
    """A Kubernetes object (not a Helm release) outside the rule's exempt namespaces."""
    if not r.type.startswith("kubernetes:") or r.type == RELEASE:
        return False
    return r.get("metadata", "namespace") not in ctx.config.get("exemptNamespaces", [])


def _cname(c: dict[str, Any]) -> str:
    return str(c.get("name", "?"))


@resource_rule(
    "k8s-run-as-non-root",
    description="Every container runs as a non-root user (runAsNonRoot, and no runAsUser 0), on the pod or "
    "the container.",
    severity=HIGH,
    doc=PSS,
    types=(),
    unknowns="An unknown securityContext field counts as not set.",
    config=EXEMPT,
)
def k8s_run_as_non_root(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if not workload(r, ctx):
        return
    for path, spec in pod_specs(r.props):
        pod = spec.get("securityContext") if isinstance(spec.get("securityContext"), dict) else {}
        for c in containers(spec):
            sc = c.get("securityContext") if isinstance(c.get("securityContext"), dict) else {}
            non_root = sc.get("runAsNonRoot", pod.get("runAsNonRoot"))
            user = number(sc.get("runAsUser", pod.get("runAsUser")))
            ok = (non_root is True and user != 0) or (
                isinstance(user, float) and user > 0 and non_root is not False
            )
            if not ok:
                yield violation(
                    f"{path}: container {_cname(c)!r} may run as root "
                    f"(runAsNonRoot {non_root}, runAsUser {user})",
                    "set securityContext.runAsNonRoot: true and a non-zero runAsUser (the image's user)",
                )


@resource_rule(
    "k8s-no-privilege-escalation",
    description="Every container sets allowPrivilegeEscalation: false and is not privileged.",
    severity=HIGH,
    doc=PSS,
    types=(),
    unknowns="An unknown field counts as not set.",
    config=EXEMPT,
)
def k8s_no_privilege_escalation(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if not workload(r, ctx):
        return
    for path, spec in pod_specs(r.props):
        for c in containers(spec):
            sc = c.get("securityContext") if isinstance(c.get("securityContext"), dict) else {}
            if sc.get("privileged") in (True, UNKNOWN):
                yield violation(f"{path}: container {_cname(c)!r} is privileged", "drop privileged: true")
            if sc.get("allowPrivilegeEscalation") is not False:
                yield violation(
                    f"{path}: container {_cname(c)!r} may escalate privileges "
                    f"(allowPrivilegeEscalation {sc.get('allowPrivilegeEscalation')})",
                    "set securityContext.allowPrivilegeEscalation: false (and capabilities.drop: [ALL])",
                )


@resource_rule(
    "k8s-requests-limits",
    description="Every container requests CPU and memory and limits memory; extended resources (GPUs, EFA) "
    "have limits equal to their requests.",
    severity=MEDIUM,
    doc="https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",
    types=(),
    unknowns="An unknown quantity counts as set (quantities are often computed from instance facts); an "
    "unknown resources block is a violation.",
    config=EXEMPT,
)
def k8s_requests_limits(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if not workload(r, ctx):
        return
    for path, spec in pod_specs(r.props):
        for c in containers(spec):
            res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
            requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
            limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
            missing = [f"requests.{k}" for k in ("cpu", "memory") if k not in requests]
            missing += ["limits.memory"] if "memory" not in limits else []
            if missing:
                yield violation(
                    f"{path}: container {_cname(c)!r} lacks {missing}", "set resources.requests and limits"
                )
            for key, value in requests.items():
                if "/" in key and not key.startswith("hugepages") and limits.get(key) != value:
                    yield violation(
                        f"{path}: container {_cname(c)!r} requests {key} {value} "
                        f"but limits it to {limits.get(key)}",
                        f"set limits.{key} equal to requests.{key} "
                        "(extended resources cannot be overcommitted)",
                    )


def _selects_efa(spec: dict[str, Any]) -> bool:
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and EFA_LABEL in selector:
        return True
    terms = dig(
        spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    return any(
        dig(e, "key") == EFA_LABEL for t in as_list(terms) for e in as_list(dig(t, "matchExpressions"))
    )


def _tolerates_gpu(spec: dict[str, Any]) -> bool:
    return any(
        dig(t, "key") == GPU_TAINT_KEY or (dig(t, "key") is None and dig(t, "operator") == "Exists")
        for t in as_list(spec.get("tolerations"))
    )


def _limit(spec: dict[str, Any], key: str) -> float:
    total = 0.0
    for c in as_list(spec.get("containers")):
        value = dig(c, "resources", "limits", key)
        n = 1.0 if value is UNKNOWN else number(value)
        total += n if isinstance(n, float) else 0.0
    return total


@resource_rule(
    "k8s-training-accelerators",
    description="Pods that select EFA nodes request GPUs and every EFA device they need "
    "(vpc.amazonaws.com/efa); pods that tolerate the GPU taint request GPUs. A pod without the request "
    "silently runs NCCL over TCP or squats a GPU node. DaemonSets (node agents) are exempt.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html",
    types=(),
    unknowns="An unknown device count counts as one.",
    config=EXEMPT,
)
def k8s_training_accelerators(r: Res, ctx: Ctx) -> Iterator[Violation]:
    # DaemonSets are node agents (exporters, device plugins): they run on GPU/EFA nodes without using the
    # devices, so they select and tolerate those nodes without requesting them.
    if not workload(r, ctx) or r.type == DAEMONSET:
        return
    for path, spec in pod_specs(r.props):
        if _selects_efa(spec):
            missing = [k for k in (GPU_RESOURCE, EFA_RESOURCE) if _limit(spec, k) < 1]
            if missing:
                yield violation(
                    f"{path}: pod selects EFA nodes ({EFA_LABEL}) but requests no {missing}",
                    f"request {GPU_RESOURCE} (all GPUs of the node) and {EFA_RESOURCE} (every EFA interface "
                    "of the type) "
                    "in limits",
                )
        elif _tolerates_gpu(spec) and _limit(spec, GPU_RESOURCE) < 1:
            yield violation(
                f"{path}: pod tolerates the {GPU_TAINT_KEY} taint but requests no {GPU_RESOURCE}",
                f"request {GPU_RESOURCE} in limits, or drop the toleration",
            )


MONITORING = ("prometheus", "grafana", "alertmanager")
MONITORING_CHARTS = ("kube-prometheus-stack", "prometheus", "grafana", "alertmanager")


# Labels that name the application behind a Service (not e.g. a 'release: prometheus' scrape label).
APP_LABELS = ("app", "app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/instance")


def _is_monitoring(name: Any, labels: Any) -> bool:
    values = [name] + ([labels.get(k) for k in APP_LABELS] if isinstance(labels, dict) else [])
    return any(m in str(v).lower() for v in values if isinstance(v, str) for m in MONITORING)


def _service_types(values: Any, path: str = "values") -> Iterator[tuple[str, Any]]:
    """(path, type) of every ``service.type`` in Helm values."""
    if isinstance(values, dict):
        svc = values.get("service")
        if isinstance(svc, dict) and "type" in svc:
            yield f"{path}.service.type", svc["type"]
        for key, item in values.items():
            if key != "service":
                yield from _service_types(item, f"{path}.{key}")


@resource_rule(
    "k8s-no-loadbalancer-monitoring",
    description="Prometheus, Grafana and Alertmanager are not exposed through LoadBalancer Services "
    "(directly "
    "or via Helm values); reach them with port-forwarding or an authenticated ingress.",
    severity=HIGH,
    doc="https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer",
    types=(SERVICE, RELEASE),
    unknowns="An unknown Service type counts as LoadBalancer.",
)
def k8s_no_loadbalancer_monitoring(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if r.type == SERVICE:
        kind = r.get("spec", "type")
        meta = r.get("metadata") or {}
        named = _is_monitoring(meta.get("name"), meta.get("labels")) or _is_monitoring(
            None, r.get("spec", "selector")
        )
        if named and kind in ("LoadBalancer", UNKNOWN):
            yield violation(
                f"Service {meta.get('name')!r} exposes monitoring through a load balancer",
                "use type ClusterIP and kubectl port-forward (or an authenticated ingress)",
            )
        return
    if r.get("chart") not in MONITORING_CHARTS:
        return
    for path, kind in _service_types(r.get("values")):
        if kind in ("LoadBalancer", UNKNOWN):
            yield violation(
                f"chart {r.get('chart')} sets {path}: {kind}",
                f"set {path}: ClusterIP",
            )


PSS_LEVELS = tuple(level.value for level in PodSecurity)
ENFORCE = f"{PSS_LABEL_PREFIX}enforce"


@resource_rule(
    "k8s-namespace-pod-security",
    description="Every namespace enforces a Pod Security Standard (pod-security.kubernetes.io/enforce: "
    "restricted or baseline; privileged only for namespaces listed in the config).",
    severity=MEDIUM,
    doc="https://kubernetes.io/docs/concepts/security/pod-security-admission/",
    types=(NAMESPACE,),
    unknowns="An unknown label counts as missing.",
    config={
        "privilegedNamespaces": {
            "type": "array",
            "items": {"type": "string"},
            # the node exporters' namespace: node-exporter needs the host's network and PID namespaces, the
            # GPU and EFA exporters host paths (infra/core/namespaces.py EXPORTERS_NAMESPACE)
            "default": ["kube-system", EXPORTERS_NAMESPACE],
            "description": "Namespaces allowed to enforce 'privileged' (node agents such as node-exporter).",
        }
    },
)
def k8s_namespace_pod_security(r: Res, ctx: Ctx) -> Iterator[Violation]:
    name = r.get("metadata", "name")
    labels = r.get("metadata", "labels")
    level = labels.get(ENFORCE) if isinstance(labels, dict) else None
    if level not in PSS_LEVELS:
        yield violation(
            f"namespace {name!r} has no {ENFORCE} label (or an unknown level {level})",
            f"label it {ENFORCE}: restricted (baseline where the workloads need it, with the reason)",
        )
    elif level == "privileged" and name not in ctx.config["privilegedNamespaces"]:
        yield violation(
            f"namespace {name!r} enforces 'privileged'",
            "use restricted or baseline, or list the namespace in privilegedNamespaces with the reason",
        )


VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
# The policies every workload namespace must be under (names of infra/admission/documents.py).
WORKLOAD_POLICIES = ("aiplat-workload-images", "aiplat-publisher-identity")
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def _selects(selector: Any, labels: dict[str, Any]) -> bool:
    """Whether a namespaceSelector's matchLabels hold for ``labels`` (matchExpressions narrow a binding to
    some of the namespaces, e.g. the team ones: such a binding does not cover every workload namespace)."""
    if not isinstance(selector, dict) or selector.get("matchExpressions"):
        return False
    match = selector.get("matchLabels") or {}
    return isinstance(match, dict) and all(labels.get(k) == v for k, v in match.items())


@stack_rule(
    "k8s-workload-namespace-admission",
    description='Every workload namespace (labelled aiplat.io/workloads: "true") is selected by a '
    "ValidatingAdmissionPolicyBinding that denies, for the image policy (aiplat-workload-images) and the "
    "publisher identity policy (aiplat-publisher-identity) declared in the same stack.",
    severity=HIGH,
    doc="https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/",
    unknowns="Namespace labels and binding selectors are literals in this program; an unknown one counts "
    "as not matching.",
)
def k8s_workload_namespace_admission(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    key, value = WORKLOADS_LABEL
    policies = {dig(p.props, "metadata", "name") for p in stack.of_type(VAP)}
    bindings = [
        b for b in stack.of_type(VAP_BINDING) if "Deny" in as_list(b.get("spec", "validationActions"))
    ]
    for ns in stack.of_type(NAMESPACE):
        labels = ns.get("metadata", "labels")
        labels = labels if isinstance(labels, dict) else {}
        if labels.get(key) != value:
            continue
        bound = {
            b.get("spec", "policyName")
            for b in bindings
            if b.get("spec", "policyName") in policies
            and _selects(b.get("spec", "matchResources", "namespaceSelector"), labels)
        }
        missing = sorted(set(WORKLOAD_POLICIES) - bound)
        if missing:
            yield violation(
                f"workload namespace {ns.get('metadata', 'name')!r} is not under the admission policies "
                f"{missing}",
                'declare the policies and bind them to namespaces labelled aiplat.io/workloads: "true" with '
                "validationActions [Deny] (infra/admission)",
                ns.urn,
            )
