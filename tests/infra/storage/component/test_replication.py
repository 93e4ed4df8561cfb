"""Cross-region: prod-us-train replicates its artifacts bucket to each inference region under a replica key
of that region; the infer stacks read their replica through a StackReference to prod-us-train."""

from __future__ import annotations

import json

import pytest

from infra.plan.mocks import ACCOUNT_ID


def test_replica_keys_and_buckets_live_in_the_target_regions(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    targets = sorted(plan.config["storage"]["replicate_to"])
    component = plan.one("aiplat:replication:ArtifactReplication")
    keys = {r.inputs["region"]: r for r in plan.children(component.urn) if r.type == "aws:kms/key:Key"}
    assert sorted(keys) == targets
    for region, key in keys.items():
        assert key.inputs["enableKeyRotation"] is True
        policy = json.loads(key.inputs["policy"])
        assert policy["Statement"][0]["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"}
        (alias,) = [a for a in plan.by_type("aws:kms/alias:Alias") if a.inputs.get("region") == region]
        assert alias.inputs["name"] == "alias/aiplat-prod-train-use1-data-replica"
    for region in targets:
        name = f"aiplat-prod-{region}-artifacts"
        (bucket,) = [b for b in plan.by_type("aws:s3/bucket:Bucket") if b.inputs["bucket"] == name]
        assert bucket.inputs["region"] == region
        (sse,) = [
            s
            for s in plan.by_type(
                "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
            )
            if s.inputs["bucket"] == name
        ]
        assert sse.inputs["region"] == region
        rule = sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]
        assert rule == {
            "sseAlgorithm": "aws:kms",
            "kmsMasterKeyId": plan.outputs["artifactReplicas"][region]["keyArn"],
        }
        assert plan.outputs["artifactReplicas"][region]["keyArn"].startswith(f"arn:aws:kms:{region}:")
        # every companion of a replica bucket is in the replica's region, too
        for r in plan.resources:
            if r.inputs.get("bucket") == name:
                assert r.inputs.get("region") == region, r.urn


def test_replication_rules_and_role(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    targets = sorted(plan.config["storage"]["replicate_to"])
    replicas = plan.outputs["artifactReplicas"]
    config = plan.one("aws:s3/bucketReplicationConfig:BucketReplicationConfig").inputs
    assert config["bucket"] == plan.outputs["buckets"]["artifacts"]
    # the role's fixed name: the source bucket's policy exempts it from the endpoint guard by ARN
    role_name = plan.one("aws:iam/role:Role", "replication-role").inputs["name"]
    assert config["role"] == f"arn:aws:iam::{ACCOUNT_ID}:role/{role_name}"
    assert [r["destination"]["bucket"] for r in config["rules"]] == [
        replicas[t]["bucketArn"] for t in targets
    ]
    for rule, region in zip(config["rules"], targets, strict=True):
        assert rule["status"] == "Enabled"
        assert rule["sourceSelectionCriteria"] == {"sseKmsEncryptedObjects": {"status": "Enabled"}}
        assert rule["destination"]["encryptionConfiguration"] == {
            "replicaKmsKeyId": replicas[region]["keyArn"]
        }
    assert len({r["priority"] for r in config["rules"]}) == len(targets)
    trust = json.loads(plan.one("aws:iam/role:Role", "replication-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "s3.amazonaws.com"}
    policy = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "replication-role-policy").inputs["policy"])
    decrypt = next(s for s in policy["Statement"] if s["Sid"] == "DecryptSource")
    assert decrypt["Resource"] == [plan.outputs["kmsKeyArns"]["data"]]
    encrypt = [s for s in policy["Statement"] if s["Sid"].startswith("EncryptDestination")]
    assert [s["Resource"] for s in encrypt] == [[replicas[t]["keyArn"]] for t in targets]


def test_dev_replicates_nothing(plan_stack) -> None:
    plan = plan_stack("dev-us-train")
    assert plan.by_type("aiplat:replication:ArtifactReplication") == []
    assert "artifactReplicas" not in plan.outputs


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_infer_stack_reads_its_replica_from_the_train_stack(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    source = plan.config["storage"]["source_stack"]
    ref = plan.one("pulumi:pulumi:StackReference")
    assert ref.name == f"organization/aiplat/{source}"
    replica = plan_stack(source).outputs["artifactReplicas"][plan.region]
    assert plan.outputs["artifactsBucket"] == replica["bucket"]
    assert plan.outputs["artifactsKeyArn"] == replica["keyArn"]
    assert plan.outputs["imageRegistry"] == f"{ACCOUNT_ID}.dkr.ecr.{plan.region}.amazonaws.com"
