"""Registry in the train stacks' plans: immutable, scanned, KMS-encrypted repositories with lifecycle
policies, replicated (prod) to the inference regions under their replica keys."""

from __future__ import annotations

import json

import pytest

from infra.plan.mocks import ACCOUNT_ID
from infra.storage import documents as storage_documents


@pytest.mark.parametrize("stack", ["dev-us-train", "prod-us-train"])
def test_repositories(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    reg = plan.config["registry"]
    namespace = f"aiplat-{plan.config['environment']}"
    repos = {r.inputs["name"]: r.inputs for r in plan.by_type("aws:ecr/repository:Repository")}
    teams = {n for n in repos if n.startswith(f"{namespace}/teams/")}  # tests/infra/queueing/test_registry.py
    assert sorted(set(repos) - teams) == sorted(f"{namespace}/{r}" for r in reg["repositories"])
    for inputs in repos.values():
        assert inputs["imageTagMutability"] == "IMMUTABLE"
        assert inputs["imageScanningConfiguration"] == {"scanOnPush": True}
        assert inputs["encryptionConfigurations"] == [
            {"encryptionType": "KMS", "kmsKey": plan.outputs["kmsKeyArns"]["data"]}
        ]
    lifecycles = {
        r.inputs["repository"]: json.loads(r.inputs["policy"])
        for r in plan.by_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    }
    expected = storage_documents.ecr_lifecycle_policy(
        untagged_days=reg["untagged_expire_days"], keep_tagged=reg["keep_images"]
    )
    assert lifecycles == {name: expected for name in repos}
    assert set(plan.outputs["repositories"]) == set(reg["repositories"])


def test_dev_does_not_replicate(plan_stack) -> None:
    plan = plan_stack("dev-us-train")
    assert plan.by_type("aws:ecr/replicationConfiguration:ReplicationConfiguration") == []
    templates = plan.by_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
    # only the image copy area's, applied on push (tests/infra/mirror/test_rules.py)
    assert [t.inputs["appliedFors"] for t in templates] == [["CREATE_ON_PUSH"]]


def test_prod_replicates_images_to_inference_regions(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    targets = sorted(plan.config["storage"]["replicate_to"])
    (rule,) = plan.one("aws:ecr/replicationConfiguration:ReplicationConfiguration").inputs[
        "replicationConfiguration"
    ]["rules"]
    assert rule["destinations"] == [{"region": r, "registryId": ACCOUNT_ID} for r in targets]
    assert rule["repositoryFilters"] == [{"filter": "aiplat-prod/", "filterType": "PREFIX_MATCH"}]
    replica_keys = {r: v["keyArn"] for r, v in plan.outputs["artifactReplicas"].items()}
    templates = {
        t.inputs["region"]: t.inputs
        for t in plan.by_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
        # the teams' own: tests/infra/queueing/test_registry.py; the image copy area's applies on push
        if "/teams/" not in t.inputs["prefix"] and t.inputs["appliedFors"] == ["REPLICATION"]
    }
    assert sorted(templates) == targets
    role = plan.one("aws:iam/role:Role", "registry-template-role")
    for region, t in templates.items():
        assert t["appliedFors"] == ["REPLICATION"] and t["prefix"] == "aiplat-prod"
        assert t["imageTagMutability"] == "IMMUTABLE"
        assert t["encryptionConfigurations"] == [{"encryptionType": "KMS", "kmsKey": replica_keys[region]}]
        assert t["customRoleArn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/registry-template-role"
        assert json.loads(t["lifecyclePolicy"])["rules"][0]["selection"]["tagStatus"] == "untagged"
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "ecr.amazonaws.com"}
    grants = json.loads(
        plan.one("aws:iam/rolePolicy:RolePolicy", "registry-template-role-policy").inputs["policy"]
    )
    assert grants["Statement"][1]["Resource"] == [replica_keys[r] for r in targets]
