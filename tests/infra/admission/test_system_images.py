"""The system namespaces run only the images the stack records (their digests from infra/mirror/digests.py,
in the stack's ECR), and kube-system those plus the EKS add-ons from EKS's registry of the region."""

from __future__ import annotations

from typing import Any

import pytest

from infra.admission.documents import AdmissionRules, admission_objects, eks_addon_registry
from tests.infra.admission.cel import refusals

REGISTRY = "123456789012.dkr.ecr.ap-east-1.amazonaws.com"
D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
CONTROLLER = f"{REGISTRY}/aiplat-prod-infer/quay/jetstack/cert-manager-controller"
EXPORTER = f"{REGISTRY}/aiplat-prod-infer/copy/nvcr.io/nvidia/k8s/dcgm-exporter"
RULES = AdmissionRules(
    account_id="123456789012",
    region="ap-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
    system_images=(f"{CONTROLLER}@{D1}", f"{EXPORTER}@{D2}"),
    eks_registry=eks_addon_registry("ap-east-1"),
)
OBJECTS = admission_objects(RULES)
POLICIES = {o["metadata"]["name"]: o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicy"}
EKS = "800184023465.dkr.ecr.ap-east-1.amazonaws.com"  # the add-ons page's ap-east-1 row


def pod(*images: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}}


def system(obj: dict[str, Any], namespace: str = "node-exporters") -> list[str]:
    return refusals(POLICIES["aiplat-system-images"], object=obj, request={"namespace": namespace})


def kube_system(obj: dict[str, Any]) -> list[str]:
    return refusals(POLICIES["aiplat-kube-system-images"], object=obj, request={"namespace": "kube-system"})


@pytest.mark.parametrize(
    "image", [f"{CONTROLLER}@{D1}", f"{CONTROLLER}:v1.21.1@{D1}", f"{EXPORTER}:4.5.3-4.8.2-distroless@{D2}"]
)
def test_a_recorded_image_with_its_digest_passes(image: str) -> None:
    assert system(pod(image)) == []
    assert kube_system(pod(image)) == []


@pytest.mark.parametrize(
    "image",
    [
        f"{CONTROLLER}@{D2}",  # a recorded image with another digest
        f"{REGISTRY}/aiplat-prod-infer/quay/evil/miner@{D1}",  # any other image of the cached quay.io
        f"{REGISTRY}/aiplat-prod-infer/ecr-public/docker/library/busybox@{D1}",
        f"{REGISTRY}/aiplat-prod/inference@{D1}",  # our own inference image, not a system one
        f"{CONTROLLER}:v1.21.1",
        f"{EKS}/eks/coredns:v1.14.3-eksbuild.3",  # EKS's add-ons only in kube-system
    ],
)
def test_anything_else_of_our_registry_is_refused_in_a_system_namespace(image: str) -> None:
    [message] = system(pod(f"{CONTROLLER}@{D1}", image))
    assert message.startswith("every image of a pod in a system namespace is one the stack records")


@pytest.mark.parametrize(
    "image",
    [
        f"{EKS}/eks/coredns:v1.14.3-eksbuild.3",
        f"{EKS}/eks/kube-proxy:v1.35.3-minimal-eksbuild.13",
        f"{EKS}/amazon-k8s-cni:v1.21.1-eksbuild.1",
        f"{EKS}/amazon-k8s-cni-init:v1.21.1-eksbuild.1",
        f"{EKS}/amazon/aws-network-policy-agent:v1.3.0-eksbuild.1",
        f"{EKS}/eks/csi-provisioner:v5.3.0-eks-1-34-1@sha256:" + "3" * 64,
    ],
)
def test_kube_system_runs_the_eks_add_ons(image: str) -> None:
    assert kube_system(pod(image)) == []


@pytest.mark.parametrize(
    "image",
    [
        "602401143452.dkr.ecr.ap-east-1.amazonaws.com/eks/coredns:v1.14.3",  # not this region's EKS account
        f"{EKS.replace('ap-east-1', 'us-east-1')}/eks/coredns:v1",
        f"{EKS}/someone/else:v1",  # a repository no add-on uses
        "quay.io/evil/privileged:latest",
        f"{REGISTRY}/aiplat-prod-infer/quay/evil/miner@{D1}",
    ],
)
def test_kube_system_refuses_other_images(image: str) -> None:
    p = pod(f"{EKS}/eks/coredns:v1")
    p["spec"]["initContainers"] = [{"name": "i", "image": image}]
    [message] = kube_system(p)
    assert f"or an EKS add-on's from EKS's registry ({EKS}/)" in message


def test_the_kube_system_policy_is_bound_to_kube_system_only() -> None:
    [binding] = [
        o
        for o in OBJECTS
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
        and o["spec"]["policyName"] == "aiplat-kube-system-images"
    ]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
    }
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_a_system_image_must_carry_a_digest() -> None:
    bad = AdmissionRules(**{**RULES.__dict__, "system_images": (CONTROLLER + ":v1",)})
    with pytest.raises(ValueError, match="is not <repository>@sha256:<64 hex>"):
        admission_objects(bad)


def test_no_recorded_image_admits_nothing() -> None:
    empty = AdmissionRules(**{**RULES.__dict__, "system_images": ()})
    policy = next(o for o in admission_objects(empty) if o["metadata"]["name"] == "aiplat-system-images")
    assert refusals(policy, object=pod(f"{CONTROLLER}@{D1}"), request={"namespace": "monitoring"}) != []
