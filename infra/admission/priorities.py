"""``aiplat-team-priorities`` and ``aiplat-workload-priority``: the priorities a team may take
(``infra/admission/documents.py`` says where they are bound). Pure."""

from __future__ import annotations

from typing import Any

from infra.admission.cel import TRAINJOBS, quote, validation
from infra.core.labels import MEMBER_GROUP_PREFIX, PRIORITY_ALLOWED_PREFIX

# What a team's jobs carry Kueue's priority-class label on (the label a Workload takes its priority from).
_WRITES = ["CREATE", "UPDATE"]
QUEUED_KINDS = [
    TRAINJOBS,
    {
        "apiGroups": ["jobset.x-k8s.io"],
        "apiVersions": ["v1alpha2"],
        "operations": _WRITES,
        "resources": ["jobsets"],
    },
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": _WRITES, "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": _WRITES, "resources": ["pods"]},
]
# kubernetes-sigs/kueue pkg/controller/constants/constants.go WorkloadPriorityClassLabel (v0.19.2)
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def _class_allowed(name: str) -> str:
    """CEL: the namespace lists ``name`` (a CEL string) among its ``priority.aiplat.io/<class>`` labels."""
    prefix = quote(PRIORITY_ALLOWED_PREFIX)
    return f"(has(namespaceObject.metadata.labels) && ({prefix} + {name}) in namespaceObject.metadata.labels)"


def _pod_priority_ok(spec: str, *, template: bool) -> str:
    """CEL: the pod spec ``spec`` names no PriorityClass but one the namespace allows, and (a template) no
    integer ``priority``. A Pod's ``priority`` is the Priority admission plugin's: it runs before the
    validating policies, sets it from ``priorityClassName`` (0 without one and without a global default)
    and refuses a pod whose own value differs, so a Pod is refused only a non-zero value without a class.
    https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#priority"""
    name = f"(!has({spec}.priorityClassName) || {_class_allowed(f'{spec}.priorityClassName')})"
    if template:
        return f"({name} && !has({spec}.priority))"
    return f"({name} && (!has({spec}.priority) || {spec}.priority == 0 || has({spec}.priorityClassName)))"


def _queued_pod_specs_ok() -> str:
    """CEL: every pod spec a Pod, Job or JobSet carries names only an allowed priority. A TrainJob's pod spec
    patch has no ``priorityClassName`` or ``priority`` (Kubeflow Trainer v2.3.0 PodSpecPatch; the API server
    prunes fields its schema lacks): its pods take the ClusterTrainingRuntime's, ours, and Kueue its
    priority from the label the first validation checks."""
    jobset = "r.template.spec.template.spec"
    return (
        f"(object.kind != 'Pod' || {_pod_priority_ok('object.spec', template=False)}) && "
        f"(object.kind != 'Job' || !has(object.spec.template.spec) "
        f"|| {_pod_priority_ok('object.spec.template.spec', template=True)}) && "
        f"(object.kind != 'JobSet' || !has(object.spec.replicatedJobs) || object.spec.replicatedJobs.all(r, "
        f"!has(r.template.spec) || !has(r.template.spec.template.spec) "
        f"|| {_pod_priority_ok(jobset, template=True)}))"
    )


def team_priority_validations() -> list[dict[str, Any]]:
    """A team's job (or pod) names only a priority class its namespace lists (``priority.aiplat.io/<class>``
    labels, set from ``teams.<team>.priority_classes``): Kueue's WorkloadPriorityClass label and the pods'
    ``priorityClassName`` (a ``system-node-critical`` pod would otherwise preempt other teams' pods:
    critical classes are allowed in any namespace since Kubernetes 1.17,
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default);
    a team cannot label its own namespace."""
    label = quote(PRIORITY_CLASS_LABEL)
    return [
        validation(
            f"!has(object.metadata.labels) || !({label} in object.metadata.labels) || "
            + _class_allowed(f"object.metadata.labels[{label}]"),
            "the team may not use this WorkloadPriorityClass (kueue.x-k8s.io/priority-class); use one of "
            "teams.<team>.priority_classes (the namespace's priority.aiplat.io/ labels)",
        ),
        validation(
            _queued_pod_specs_ok(),
            "a team's pods name no priorityClassName but one of teams.<team>.priority_classes (the "
            "namespace's priority.aiplat.io/ labels) and no integer priority; remove them from the pod spec "
            "and name the priority with the kueue.x-k8s.io/priority-class label",
        ),
    ]


# Kueue's Workload (kubernetes-sigs/kueue v0.19.2 apis/kueue/v1beta2/workload_types.go): its priority is
# ``spec.priority`` and ``spec.priorityClassRef``; a request to v1beta1 is matched too, converted
# (``matchPolicy: Equivalent``, the default).
WORKLOADS = {
    "apiGroups": ["kueue.x-k8s.io"],
    "apiVersions": ["v1beta2"],
    "operations": ["UPDATE"],
    "resources": ["workloads"],
}


def _unchanged(field: str) -> str:
    new, old = f"object.spec.{field}", f"oldObject.spec.{field}"
    return f"(has({new}) == has({old}) && (!has({new}) || {new} == {old}))"


def workload_priority_validations() -> list[dict[str, Any]]:
    """A team's member (a user in a group ``aiplat-team-<team>``) may patch a Workload (``spec.active``:
    deactivate and reactivate a run) but not its priority; Kueue's controller, which sets it from the job's
    priority label, is no member."""
    member = (
        f"has(request.userInfo.groups) && "
        f"request.userInfo.groups.exists(g, g.startsWith({quote(MEMBER_GROUP_PREFIX)}))"
    )
    return [
        validation(
            f"!({member}) || ({_unchanged('priority')} && {_unchanged('priorityClassRef')})",
            "a team's members may not change a Workload's priority (spec.priority, spec.priorityClassRef); "
            "the priority is the job's kueue.x-k8s.io/priority-class label, set when it is submitted",
        )
    ]
