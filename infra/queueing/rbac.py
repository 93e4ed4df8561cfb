"""What a team's members may do in the cluster, as RBAC objects (pure, no Pulumi).

A member's IAM principal gets an EKS access entry with the team's Kubernetes group and no EKS access
policy: Kubernetes RBAC alone authorizes it, through these objects. EKS's ``AmazonEKSEditPolicy`` would
let a member change the namespace's NetworkPolicies (and so reach what the default deny keeps out); the
Role below grants what ``aiplat train`` and the how-to guides use, and nothing on NetworkPolicies,
ResourceQuotas, LimitRanges, Roles or RoleBindings (an RBAC verb not granted is refused).

- https://docs.aws.amazon.com/eks/latest/userguide/create-k8s-group-access-entry.html
- https://kubernetes.io/docs/reference/access-authn-authz/rbac/
"""

from __future__ import annotations

from typing import Any

from infra.core.namespaces import PART_OF
from infra.queueing.names import MEMBER_ROLE, TeamNames

RBAC_API = "rbac.authorization.k8s.io/v1"
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete"]
# Kinds a member must never write in its namespace: the fences the platform puts around the team.
FENCES = (
    ("networking.k8s.io", "networkpolicies"),
    ("", "resourcequotas"),
    ("", "limitranges"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
)


def member_rules() -> list[dict[str, Any]]:
    """The rules of the members' Role in the team's namespace.

    - TrainJobs (trainer.kubeflow.org): ``aiplat train submit/list/cancel`` and ``kubectl`` (run-training.md).
    - Jobs and ConfigMaps: Kueue queues a team's bare Jobs too; a run's config can come from a ConfigMap.
    - Pods and their logs, Events, PVCs: read (``aiplat train logs``, ``kubectl logs/describe``). No
      ``pods/exec``, no Secrets: no guide needs them, and a Secret would carry another run's keys.
    - Kueue: Workloads read, and patched (``spec.active``: deactivate and reactivate a run,
      run-training.md); LocalQueues read; the visibility API's pending positions (``aiplat train list``).
    """
    return [
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": READ + WRITE},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs/status"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": READ + WRITE},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": READ + WRITE},
        {
            "apiGroups": [""],
            "resources": ["pods", "pods/log", "events", "persistentvolumeclaims"],
            "verbs": READ,
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": READ},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*READ, "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": READ},
        {
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": ["localqueues/pendingworkloads"],
            "verbs": ["get"],
        },
    ]


def runtime_rules() -> list[dict[str, Any]]:
    """Cluster-wide, read only: the ClusterTrainingRuntimes (``aiplat train submit`` reads the runtime's
    image digest, infra/io/kube_jobs.py ``read_runtime``)."""
    return [
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["clustertrainingruntimes"],
            "verbs": READ,
        }
    ]


def _metadata(name: str, names: TeamNames, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**PART_OF, **names.namespace_labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _binding(kind: str, role_kind: str, name: str, names: TeamNames, namespace: str | None) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": _metadata(name, names, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names.member_group}],
    }


def member_objects(names: TeamNames) -> dict[str, dict[str, Any]]:
    """The team members' RBAC objects by role: ``role``/``binding`` (the team's namespace) and
    ``runtimes``/``runtimes-binding`` (cluster-wide, read of the training runtimes and of the team's own
    ClusterQueue), all bound to the
    team's group."""
    cluster_name = f"{names.member_group}-runtimes"
    return {
        "role": {
            "apiVersion": RBAC_API,
            "kind": "Role",
            "metadata": _metadata(MEMBER_ROLE, names, names.namespace),
            "rules": member_rules(),
        },
        "binding": _binding("RoleBinding", "Role", MEMBER_ROLE, names, names.namespace),
        "runtimes": {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": _metadata(cluster_name, names, None),
            # and the team's own ClusterQueue, read only: `aiplat train why` says when it is held
            "rules": [
                *runtime_rules(),
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["clusterqueues"],
                    "resourceNames": [names.cluster_queue],
                    "verbs": ["get"],
                },
            ],
        },
        "runtimes-binding": _binding("ClusterRoleBinding", "ClusterRole", cluster_name, names, None),
    }
