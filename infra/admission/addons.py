"""``aiplat-addon-namespaces``: the add-ons' service accounts write the guarded kinds only in their own
namespaces (``infra/admission/documents.py`` says why; ``wire.py`` lists the accounts). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.admission.cel import quote, validation


@dataclass(frozen=True, kw_only=True)
class AddonIdentity:
    """An add-on's service account (``username``: ``system:serviceaccount:<namespace>:<name>``), the
    namespaces it may write the guarded kinds in (its own, and where its objects live), and the guarded
    kinds it may update anywhere, its metadata only (``anywhere``: the load balancer controller's
    finalizers on Services and Ingresses; ``spec`` unchanged)."""

    name: str
    username: str
    namespaces: Sequence[str]
    anywhere: Sequence[str] = ()
    # guarded kinds it may delete in any namespace (Karpenter deletes the pods left on a node it removes)
    deletes: Sequence[str] = ()


def service_account_user(namespace: str, name: str) -> str:
    """The username the API server gives a service account's token."""
    return f"system:serviceaccount:{namespace}:{name}"


# The kinds an add-on writes only where it lives: what runs code (pods and their controllers), what holds
# or grants secrets and trust (Secrets, ConfigMaps such as release-signing-key, service accounts, RBAC),
# what routes traffic (Services, Endpoints, Ingresses, NetworkPolicies), and cluster-wide RBAC
# (cluster-scoped: no add-on namespace holds it, so no add-on writes it; admission policies themselves are
# never subject to admission policies). Sub-resources (status, eviction, binding) are not matched:
# controllers write those across namespaces.
ADDON_GUARDED = [
    (
        "",
        [
            "pods",
            "secrets",
            "configmaps",
            "services",
            "endpoints",
            "serviceaccounts",
            "persistentvolumeclaims",
        ],
    ),
    ("apps", ["deployments", "statefulsets", "daemonsets", "replicasets"]),
    ("batch", ["jobs", "cronjobs"]),
    ("discovery.k8s.io", ["endpointslices"]),
    ("networking.k8s.io", ["networkpolicies", "ingresses"]),
    ("rbac.authorization.k8s.io", ["roles", "rolebindings", "clusterroles", "clusterrolebindings"]),
]


def addon_resource_rules() -> list[dict[str, Any]]:
    return [
        {
            "apiGroups": [group],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": resources,
        }
        for group, resources in ADDON_GUARDED
    ]


def _cel_map(entries: Mapping[str, Sequence[str]]) -> str:
    """A CEL map literal of string -> list of strings."""
    items = [f"{quote(k)}: [{', '.join(quote(v) for v in sorted(vs))}]" for k, vs in sorted(entries.items())]
    return "{" + ", ".join(items) + "}"


def addon_match_conditions(addons: Sequence[AddonIdentity]) -> list[dict[str, str]]:
    """The policy applies to requests of the add-ons' service accounts only."""
    users = ", ".join(quote(a.username) for a in sorted(addons, key=lambda a: a.username))
    return [{"name": "addon-service-accounts", "expression": f"request.userInfo.username in [{users}]"}]


def addon_validations(addons: Sequence[AddonIdentity]) -> list[dict[str, Any]]:
    """An add-on writes a guarded kind only in its namespaces, or updates the metadata (not the ``spec``) of
    a kind it may touch anywhere."""
    namespaces = _cel_map({a.username: a.namespaces for a in addons})
    anywhere = _cel_map({a.username: a.anywhere for a in addons})
    deletes = _cel_map({a.username: a.deletes for a in addons})
    user = "request.userInfo.username"
    same_spec = (
        "has(object.spec) == has(oldObject.spec) && (!has(object.spec) || object.spec == oldObject.spec)"
    )
    return [
        validation(
            f"(request.namespace != '' && request.namespace in {namespaces}[{user}]) "
            f"|| (request.operation == 'UPDATE' && request.resource.resource in {anywhere}[{user}] "
            f"&& {same_spec}) "
            f"|| (request.operation == 'DELETE' && request.resource.resource in {deletes}[{user}])",
            "an add-on's service account writes pods, workloads, Secrets, ConfigMaps, Services and RBAC only "
            "in its own namespaces (aiplat-addon-namespaces, infra/admission)",
        )
    ]
