"""k8s-workload-namespace-admission: every workload namespace is under the admission policies (a compliant
and a violating case each), on the program's own policy documents."""

from __future__ import annotations

from infra.admission.documents import AdmissionRules, admission_objects
from tests.policies.conftest import R

RULE = "k8s-workload-namespace-admission"
RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="training",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
)
API = "kubernetes:admissionregistration.k8s.io/v1"


def _admission(drop: str | None = None, actions: list[str] | None = None) -> list[R]:
    out = []
    for doc in admission_objects(RULES):
        if drop and doc["metadata"]["name"] == drop and doc["kind"] == "ValidatingAdmissionPolicyBinding":
            continue
        if actions is not None and doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["validationActions"] = actions
        name = doc["metadata"]["name"] + ("-binding" if doc["kind"].endswith("Binding") else "")
        out.append(R(f"{API}:{doc['kind']}", name, {"metadata": doc["metadata"], "spec": doc["spec"]}))
    return out


def _namespace(name: str, workloads: bool = True) -> R:
    labels = {"app.kubernetes.io/part-of": "aiplat"} | ({"aiplat.io/workloads": "true"} if workloads else {})
    return R("kubernetes:core/v1:Namespace", f"ns-{name}", {"metadata": {"name": name, "labels": labels}})


def test_workload_namespaces_under_the_policies_pass(check) -> None:
    check(RULE, [_namespace("training"), _namespace("inference"), *_admission()], None)
    # a namespace that is not a workload namespace is not judged
    check(RULE, [_namespace("monitoring", workloads=False)], None)


def test_a_workload_namespace_without_the_policies_is_a_violation(check) -> None:
    check(RULE, [_namespace("team-a")], "workload namespace 'team-a' is not under the admission policies")
    check(
        RULE,
        [_namespace("team-a"), *_admission(drop="aiplat-workload-images")],
        "not under the admission policies ['aiplat-workload-images']",
    )
    # bindings that only warn or audit do not count
    check(RULE, [_namespace("team-a"), *_admission(actions=["Warn", "Audit"])], "is not under the admission")
