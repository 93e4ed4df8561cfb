"""PodRoles on its own under mocks, with OIDC inputs shaped as the EKS component will give them."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pytest

from infra.plan.mocks import AwsSnapshotMocks
from infra.plan.runner import RecordedResource, run_program
from infra.pod_storage.component.pod_iam import (
    InferenceAccess,
    PodRoles,
    PodRolesArgs,
    ServiceAccountRef,
    TrainerAccess,
)

ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
OIDC_ARN = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"
KEY = "arn:aws:kms:us-east-1:123456789012:key/data"


def _run(trainer: bool, inference: bool) -> list[RecordedResource]:
    def program() -> None:
        provider = aws.Provider("aws", region="us-east-1")
        PodRoles(
            "pods",
            PodRolesArgs(
                stack_prefix="aiplat-prod-train",
                # Outputs, as they come from the cluster component
                oidc_provider_arn=pulumi.Output.from_input(OIDC_ARN),
                oidc_issuer=pulumi.Output.from_input(ISSUER),
                kms_key_arns=[KEY],
                trainer=TrainerAccess(
                    who=ServiceAccountRef(namespace="training", service_account="trainer", prefix="trainer"),
                    datasets_arn="arn:aws:s3:::d",
                    checkpoints_arn="arn:aws:s3:::c",
                    artifacts_arn="arn:aws:s3:::a",
                )
                if trainer
                else None,
                inference=InferenceAccess(
                    who=ServiceAccountRef(namespace="inference", service_account="inference", prefix=""),
                    artifacts_arn="arn:aws:s3:::replica",
                )
                if inference
                else None,
            ),
            opts=pulumi.ResourceOptions(provider=provider),
        )

    return run_program(program, stack="pods", mocks=AwsSnapshotMocks("us-east-1")).recorded


@pytest.mark.parametrize(("trainer", "inference"), [(True, False), (False, True), (True, True)])
def test_roles_trust_one_service_account(trainer: bool, inference: bool) -> None:
    recorded = _run(trainer, inference)
    component = next(r for r in recorded if r.type == "aiplat:pod_iam:PodRoles")
    roles = {r.name: r for r in recorded if r.type == "aws:iam/role:Role"}
    expected = {n for n, on in (("pods-trainer", trainer), ("pods-inference", inference)) if on}
    assert set(roles) == expected
    subjects = {
        "pods-trainer": "system:serviceaccount:training:trainer",
        "pods-inference": "system:serviceaccount:inference:inference",
    }
    for name, role in roles.items():
        assert role.parent == component.urn
        (st,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert st["Principal"] == {"Federated": OIDC_ARN}
        assert st["Condition"]["StringEquals"] == {
            f"{ISSUER}:sub": subjects[name],
            f"{ISSUER}:aud": "sts.amazonaws.com",
        }


def test_permissions() -> None:
    recorded = _run(True, True)
    policies = {
        r.name: json.loads(r.inputs["policy"]) for r in recorded if r.type == "aws:iam/rolePolicy:RolePolicy"
    }
    trainer = {s["Sid"]: s for s in policies["pods-trainer-policy"]["Statement"]}
    assert trainer["ReadDatasets"]["Resource"] == ["arn:aws:s3:::d/trainer/*"]
    assert trainer["ReadWriteOwnPrefix"]["Resource"] == [
        "arn:aws:s3:::c/trainer/*",
        "arn:aws:s3:::a/trainer/*",
    ]
    assert trainer["UseDataKey"]["Resource"] == [KEY]
    inference = {s["Sid"]: s for s in policies["pods-inference-policy"]["Statement"]}
    assert inference["ReadArtifacts"]["Resource"] == ["arn:aws:s3:::replica/*"]
    assert inference["ReadArtifacts"]["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]
    assert inference["DecryptArtifacts"]["Action"] == ["kms:Decrypt"]


def test_needs_some_access() -> None:
    with pytest.raises(Exception, match="needs trainer, publisher or inference access"):
        _run(False, False)
