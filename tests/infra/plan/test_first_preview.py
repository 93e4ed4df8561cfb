"""The first-preview plan (``run_plan(first_preview=True)``): what the first ``pulumi preview`` of a new stack
sends, where nothing exists yet and every output a provider computes on create is unknown (review finding
F4: the policy pack must not be blocked by it)."""

from __future__ import annotations

import json

import pytest
from pulumi.runtime import rpc

from infra.cli.main import main
from tests.conftest import EXAMPLES, STACKS


def test_outputs_of_this_update_are_unknown_and_literals_known(plan_stack, plan_first_preview) -> None:
    """The IRSA trust policy (the cluster's OIDC issuer) and a policy naming a key ARN are unknown; the
    bucket name and the role description (literals of the program) are the plan's; the same resources."""
    full, first = plan_stack("prod-us-train"), plan_first_preview("prod-us-train")
    assert [r.urn for r in first.resources] == [r.urn for r in full.resources]
    trainer = first.one("aws:iam/role:Role", "pod-roles-trainer")
    assert trainer.inputs["assumeRolePolicy"] == rpc.UNKNOWN
    assert (
        trainer.inputs["description"]
        == full.one("aws:iam/role:Role", "pod-roles-trainer").inputs["description"]
    )
    assert (
        first.one("aws:iam/rolePolicy:RolePolicy", "pod-roles-trainer-policy").inputs["policy"] == rpc.UNKNOWN
    )
    bucket = first.one("aws:s3/bucket:Bucket", "storage-artifacts")
    assert bucket.inputs["bucket"] == full.one("aws:s3/bucket:Bucket", "storage-artifacts").inputs["bucket"]
    # an EKS cluster's computed outputs reach its dependents unknown
    gp3 = first.one("kubernetes:storage.k8s.io/v1:StorageClass")
    assert (
        gp3.inputs["parameters"]["kmsKeyId"] == rpc.UNKNOWN
        and gp3.inputs["parameters"]["encrypted"] == "true"
    )


def _whole_unknowns(full, first) -> list[str]:
    """Paths where the first preview has an unknown in place of the plan's object or list."""
    found: list[str] = []

    def walk(a, b, path: str) -> None:
        if b == rpc.UNKNOWN and isinstance(a, dict | list):
            found.append(path)
        elif isinstance(a, dict) and isinstance(b, dict):
            for k in a.keys() & b.keys():
                walk(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list):
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                walk(x, y, f"{path}[{i}]")

    before = {r.urn: r for r in full.resources}
    for r in first.resources:
        walk(before[r.urn].inputs, r.inputs, f"{r.name}")
    return found


@pytest.mark.parametrize("stack", [*STACKS, *EXAMPLES])
def test_no_document_is_hidden_behind_one_apply(plan_stack, plan_example, plan_first_preview, stack) -> None:
    """Outputs go into Kubernetes objects and Helm values as leaves: no object or list is unknown as a
    whole at the first preview, so the policy pack still sees its literals (the Karpenter EC2NodeClass spec,
    the controllers' values and the inference Ingress's annotations among them)."""
    full = plan_stack(stack) if stack in STACKS else plan_example(stack)
    assert _whole_unknowns(full, plan_first_preview(stack)) == []


def test_cli_writes_a_first_preview_plan(tmp_path) -> None:
    args = ["plan", "--stack", "prod-hk-infer", "--first-preview", "--out", str(tmp_path)]
    assert main(args) == 0
    doc = json.loads((tmp_path / "prod-hk-infer.json").read_text())
    roles = {r["name"]: r for r in doc["resources"] if r["type"] == "aws:iam/role:Role"}
    assert roles["lbc-iam-role"]["inputs"]["assumeRolePolicy"] == rpc.UNKNOWN
