"""aiplat-publisher-nodes, evaluated with cel-python on pods it must let through and refuse: the publisher's
pods pinned to its pool, every other workload pod kept off it."""

from __future__ import annotations

from typing import Any

import pytest

from infra.admission.documents import AdmissionRules, admission_objects
from infra.core.labels import PUBLISHER_NODE_LABEL, PUBLISHER_TAINT
from tests.infra.admission.cel import refusals

RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
)
OBJECTS = admission_objects(RULES)
POLICIES = {o["metadata"]["name"]: o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicy"}
BINDINGS = {o["spec"]["policyName"]: o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicyBinding"}
KEY, VALUE, EFFECT = PUBLISHER_TAINT
SELECTOR = {PUBLISHER_NODE_LABEL[0]: PUBLISHER_NODE_LABEL[1]}
TOLERATION = {"key": KEY, "operator": "Equal", "value": VALUE, "effect": EFFECT}
PUBLISHER = "release-publisher"


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "main", "image": "x"}], **spec},
    }


def refused(obj: dict[str, Any], namespace: str) -> list[str]:
    """What the policy refuses of ``obj`` created in the workload namespace ``namespace``."""
    request = {"namespace": namespace, "operation": "CREATE"}
    return refusals(POLICIES["aiplat-publisher-nodes"], object=obj, request=request)


def test_a_publisher_pod_with_the_selector_and_toleration_is_admitted() -> None:
    assert refused(pod(nodeSelector=SELECTOR, tolerations=[TOLERATION]), PUBLISHER) == []
    # operator Exists on the key, no effect: tolerates the taint as well
    assert (
        refused(pod(nodeSelector=SELECTOR, tolerations=[{"key": KEY, "operator": "Exists"}]), PUBLISHER) == []
    )


@pytest.mark.parametrize(
    ("spec", "missing"),
    [
        ({}, ["spec.nodeSelector", "add the toleration"]),
        ({"tolerations": [TOLERATION]}, ["spec.nodeSelector"]),
        ({"nodeSelector": SELECTOR}, ["add the toleration"]),
        (
            {"nodeSelector": {PUBLISHER_NODE_LABEL[0]: "false"}, "tolerations": [TOLERATION]},
            ["spec.nodeSelector"],
        ),
        ({"nodeSelector": SELECTOR, "tolerations": [{**TOLERATION, "value": "no"}]}, ["add the toleration"]),
        ({"nodeSelector": SELECTOR, "tolerations": [{"key": KEY}]}, ["add the toleration"]),
        (
            {"nodeSelector": SELECTOR, "tolerations": [{**TOLERATION, "effect": "NoExecute"}]},
            ["add the toleration"],
        ),
    ],
    ids=[
        "neither",
        "no-selector",
        "no-toleration",
        "other-label-value",
        "other-value",
        "no-value",
        "other-effect",
    ],
)
def test_a_publisher_pod_off_its_nodes_is_refused(spec: dict[str, Any], missing: list[str]) -> None:
    messages = refused(pod(**spec), PUBLISHER)
    assert len(messages) == len(missing)
    for message, fragment in zip(messages, missing, strict=True):
        assert fragment in message and PUBLISHER in message


@pytest.mark.parametrize(
    "toleration",
    [TOLERATION, {"key": KEY, "operator": "Exists"}, {"operator": "Exists"}],
    ids=["publisher-key", "publisher-key-exists", "every-taint"],
)
def test_a_team_pod_tolerating_the_publisher_taint_is_refused(toleration: dict[str, Any]) -> None:
    messages = refused(
        pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}, toleration]), "team-a"
    )
    assert messages and all(
        f"only pods in namespace '{PUBLISHER}' may tolerate the taint {KEY}" in m for m in messages
    )


def test_other_pods_without_the_toleration_are_admitted() -> None:
    assert refused(pod(), "team-a") == []
    assert (
        refused(
            pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
            "training",
        )
        == []
    )


def test_the_policy_is_bound_to_the_workload_namespaces_only() -> None:
    # the system namespaces' node agents (tolerating every taint) run on the publisher's nodes too
    assert BINDINGS["aiplat-publisher-nodes"]["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"aiplat.io/workloads": "true"}
    }
    assert BINDINGS["aiplat-publisher-nodes"]["spec"]["validationActions"] == ["Deny"]
