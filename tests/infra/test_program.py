"""The program wires storage to the cluster: pod roles trust this stack's own OIDC provider."""

from __future__ import annotations

import json

import pytest

from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_pod_roles_trust_the_stacks_cluster(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    component = plan.one("aiplat:pod_iam:PodRoles")
    roles = [r for r in plan.children(component.urn) if r.type == "aws:iam/role:Role"]
    expected = {"trainer", "publisher"} if plan.config["role"] == "train" else {"inference"}
    assert {r.name.removeprefix("pod-roles-") for r in roles} == expected
    issuer = plan.outputs["oidcIssuer"]
    assert not issuer.startswith("https://")
    for role in roles:
        statement = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
        assert statement["Principal"]["Federated"] == plan.outputs["oidcProviderArn"]
        access = plan.config["storage"][role.name.removeprefix("pod-roles-")]
        sub = f"system:serviceaccount:{access['namespace']}:{access['service_account']}"
        assert statement["Condition"]["StringEquals"][f"{issuer}:sub"] == sub
