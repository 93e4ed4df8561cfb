"""The add-ons' service accounts write the guarded kinds only in their own namespaces
(``aiplat-addon-namespaces``): allowed and refused requests, and the names against the capabilities'."""

from __future__ import annotations

from typing import Any

import pytest

from infra.admission.addons import ADDON_GUARDED, AddonIdentity, service_account_user
from infra.admission.documents import AdmissionRules, admission_objects
from tests.infra.admission.cel import refusals

KPS = service_account_user("monitoring", "kps-operator")
CM = service_account_user("cert-manager", "cert-manager")
LBC = service_account_user("kube-system", "aws-load-balancer-controller")
KARPENTER = service_account_user("kube-system", "karpenter")
RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
    addons=(
        AddonIdentity(name="kps-operator", username=KPS, namespaces=["monitoring"]),
        AddonIdentity(name="cert-manager", username=CM, namespaces=["cert-manager", "minio"]),
        AddonIdentity(name="karpenter", username=KARPENTER, namespaces=["kube-system"], deletes=("pods",)),
        AddonIdentity(
            name="lbc", username=LBC, namespaces=["kube-system"], anywhere=("services", "ingresses")
        ),
    ),
)
OBJECTS = admission_objects(RULES)
[POLICY] = [
    o for o in OBJECTS if o["metadata"]["name"] == "aiplat-addon-namespaces" and "validations" in o["spec"]
]
[BINDING] = [
    o
    for o in OBJECTS
    if o["kind"] == "ValidatingAdmissionPolicyBinding"
    and o["spec"]["policyName"] == "aiplat-addon-namespaces"
]


def request(
    user: str,
    resource: str,
    namespace: str,
    operation: str = "CREATE",
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
) -> list[str]:
    return refusals(
        POLICY,
        object=obj if obj is not None else {"metadata": {"name": "x"}},
        oldObject=old,
        request={
            "namespace": namespace,
            "operation": operation,
            "resource": {"resource": resource},
            "userInfo": {"username": user, "groups": ["system:serviceaccounts"]},
        },
    )


@pytest.mark.parametrize(
    ("user", "resource", "namespace"),
    [
        (KPS, "statefulsets", "monitoring"),
        (KPS, "secrets", "monitoring"),
        (KPS, "endpoints", "monitoring"),  # the kubelet's Service, kept in monitoring
        (CM, "secrets", "cert-manager"),
        (CM, "secrets", "minio"),  # a Certificate's Secret where the Certificate is
        (KARPENTER, "configmaps", "kube-system"),
        (LBC, "secrets", "kube-system"),
    ],
)
def test_an_addon_writes_in_its_own_namespaces(user: str, resource: str, namespace: str) -> None:
    assert request(user, resource, namespace) == []
    assert request(user, resource, namespace, operation="DELETE") == []


@pytest.mark.parametrize(
    ("user", "resource", "namespace"),
    [
        (KPS, "configmaps", "release-publisher"),  # the release-signing-key trust anchor
        (KPS, "services", "inference"),
        (KPS, "statefulsets", "kube-system"),
        (CM, "secrets", "inference"),  # the API keys
        (KARPENTER, "secrets", "team-research"),
        (LBC, "pods", "kube-system-but-not"),
        (LBC, "deployments", "inference"),
        (KPS, "clusterrolebindings", ""),  # cluster-scoped: no add-on's namespace
        (CM, "clusterroles", ""),
    ],
)
def test_an_addon_writing_outside_its_namespace_is_refused(user: str, resource: str, namespace: str) -> None:
    for operation in ("CREATE", "DELETE"):
        [message] = request(user, resource, namespace, operation=operation)
        assert message.startswith("an add-on's service account writes pods, workloads, Secrets, ConfigMaps")


def service(selector: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "vllm", "namespace": "inference"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta, "spec": {"selector": {"app": selector}, "ports": [{"port": 80}]}}


def test_the_load_balancer_controller_adds_its_finalizer_but_changes_nothing_else() -> None:
    old = service("vllm")
    finalized = service("vllm", ["service.k8s.aws/resources"])
    assert request(LBC, "services", "inference", "UPDATE", finalized, old) == []
    # pointing the inference Service at other pods, or creating one, is refused
    assert request(LBC, "services", "inference", "UPDATE", service("evil"), old) != []
    assert request(LBC, "services", "inference", "CREATE", service("evil")) != []
    assert request(LBC, "services", "inference", "DELETE") != []
    # no other add-on has that leeway
    assert request(KPS, "services", "inference", "UPDATE", finalized, old) != []


def test_other_users_are_not_matched() -> None:
    for user in (
        "system:serviceaccount:kueue-system:kueue-controller-manager",
        "arn:aws:sts::1:assumed-role/x",
    ):
        assert request(user, "secrets", "inference") == []


def test_the_policy_covers_every_namespace_and_the_guarded_kinds() -> None:
    assert BINDING["spec"]["matchResources"]["namespaceSelector"] == {}
    assert BINDING["spec"]["validationActions"] == ["Deny"]
    rules = POLICY["spec"]["matchConstraints"]["resourceRules"]
    covered = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert {
        ("", "secrets"),
        ("", "configmaps"),
        ("", "pods"),
        ("", "services"),
        ("apps", "daemonsets"),
    } <= covered
    assert covered == {(g, r) for g, rs in ADDON_GUARDED for r in rs}
    for rule in rules:
        assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    assert POLICY["spec"]["failurePolicy"] == "Fail"


def test_the_wired_names_are_the_capabilities() -> None:
    """The usernames the wiring lists are the service accounts the charts create under our values."""
    from infra.karpenter.documents import SERVICE_ACCOUNT as KARPENTER_SA
    from infra.monitoring.documents import KPS_RELEASE
    from infra.services.documents.lbc_iam import SERVICE_ACCOUNT as LBC_SA
    from infra.services.wire import CERT_MANAGER_NAMESPACE, SYSTEM_NAMESPACE

    assert f"{KPS_RELEASE}-operator" == KPS.rsplit(":", 1)[1]
    assert service_account_user(SYSTEM_NAMESPACE, KARPENTER_SA) == KARPENTER
    assert service_account_user(SYSTEM_NAMESPACE, LBC_SA) == LBC
    assert service_account_user(CERT_MANAGER_NAMESPACE, "cert-manager") == CM


def test_karpenter_deletes_pods_anywhere_but_creates_none() -> None:
    assert request(KARPENTER, "pods", "team-research", operation="DELETE") == []
    assert request(KARPENTER, "pods", "team-research") != []
    assert request(KARPENTER, "pods", "team-research", "UPDATE", {"spec": {}}, {"spec": {}}) != []
    assert request(KPS, "pods", "team-research", operation="DELETE") != []
