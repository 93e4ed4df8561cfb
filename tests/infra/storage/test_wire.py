"""``wire_cluster_storage``: what the lead wires once the cluster exists, run here with OIDC inputs shaped
as the EKS component will give them and a real pulumi_kubernetes.Provider."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.context import StackContext
from infra.core.facts import AccountFacts, RegionFacts
from infra.io.stackfiles import load_stack_config
from infra.plan.mocks import ACCOUNT_ID, AwsSnapshotMocks
from infra.plan.runner import RecordedResource, planned_outputs, run_program
from infra.pod_storage.wire import wire_cluster_storage
from infra.schema.parse import parse_platform_config
from infra.schema.platform import PlatformConfig
from infra.storage.wire import wire_storage
from tests.support.config_cases import without_teams

ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
OIDC_ARN = f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{ISSUER}"
KEY = f"arn:aws:kms:us-east-1:{ACCOUNT_ID}:key/data"


def _run(stack: str, cfg: PlatformConfig) -> list[RecordedResource]:
    def program() -> None:
        ctx = StackContext(
            cfg=cfg,
            facts=RegionFacts(region=cfg.region, zones=(), offerings={}, instances={}),
            account=AccountFacts(ACCOUNT_ID, "aws"),
            provider=aws.Provider("aws", region=cfg.region),
        )
        storage = wire_storage(ctx, data_key_arn=pulumi.Output.from_input(KEY))
        wire_cluster_storage(
            ctx,
            storage,
            oidc_provider_arn=pulumi.Output.from_input(OIDC_ARN),
            oidc_issuer=pulumi.Output.from_input(ISSUER),
            k8s_provider=k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n"),
            data_key_arn=KEY,
        )

    referenced = {}
    if cfg.storage.source_stack:
        referenced[cfg.storage.source_stack] = planned_outputs(cfg.storage.source_stack)
    mocks = AwsSnapshotMocks(cfg.region, stack_outputs=referenced)
    return run_program(program, stack=stack, mocks=mocks).recorded


def _policy(recorded: list[RecordedResource], name: str) -> dict:
    (r,) = [r for r in recorded if r.type == "aws:iam/rolePolicy:RolePolicy" and r.name == name]
    return {s["Sid"]: s for s in json.loads(r.inputs["policy"])["Statement"]}


def test_train_stack_gets_a_trainer_role_on_its_buckets() -> None:
    cfg = load_stack_config("prod-us-train")
    recorded = _run("prod-us-train", cfg)
    policy = _policy(recorded, "pod-roles-trainer-policy")
    assert policy["ReadDatasets"]["Resource"] == ["arn:aws:s3:::aiplat-prod-us-east-1-datasets/trainer/*"]
    assert policy["ReadWriteOwnPrefix"]["Resource"] == [
        "arn:aws:s3:::aiplat-prod-us-east-1-checkpoints/trainer/*",
        "arn:aws:s3:::aiplat-prod-us-east-1-artifacts/trainer/*",
    ]
    assert policy["UseDataKey"]["Resource"] == [KEY]
    (role,) = [r for r in recorded if r.type == "aws:iam/role:Role" and r.name == "pod-roles-trainer"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Condition"]["StringEquals"][f"{ISSUER}:sub"] == "system:serviceaccount:training:trainer"


def test_infer_stack_gets_an_inference_role_on_its_replica() -> None:
    cfg = load_stack_config("prod-hk-infer")
    recorded = _run("prod-hk-infer", cfg)
    replica = planned_outputs("prod-us-train")["artifactReplicas"]["ap-east-1"]
    policy = _policy(recorded, "pod-roles-inference-policy")
    assert policy["ReadArtifacts"]["Resource"] == [f"{replica['bucketArn']}/release/*"]
    assert policy["DecryptArtifacts"]["Resource"] == [replica["keyArn"]]
    assert not [r for r in recorded if r.name == "pod-roles-trainer"]


def test_minio_backend_runs_minio_instead_of_buckets(stack_config) -> None:
    raw = stack_config("dev-us-train")
    raw["storage"] = {"backend": "minio", "minio": {"storage_size": "200Gi", "mode": "standalone"}}
    without_teams(raw)  # teams need the S3 backend (their IAM roles)
    cfg = parse_platform_config(raw)
    recorded = _run("dev-us-train", cfg)
    assert not [r for r in recorded if r.type == "aws:s3/bucket:Bucket"]
    assert not [r for r in recorded if r.type == "aws:iam/role:Role" and r.name.startswith("pod-roles")]
    (release,) = [r for r in recorded if r.type == "kubernetes:helm.sh/v3:Release"]
    values = release.inputs["values"]
    assert sorted(b["name"] for b in values["buckets"]) == [
        "aiplat-dev-us-west-2-artifacts",
        "aiplat-dev-us-west-2-checkpoints",
        "aiplat-dev-us-west-2-datasets",
    ]
    assert values["mode"] == "standalone" and values["replicas"] == 1
    assert values["persistence"]["size"] == "200Gi"
    k8s_provider = next(r for r in recorded if r.type == "pulumi:providers:kubernetes")
    for r in recorded:
        if r.type.startswith("kubernetes:"):
            assert r.provider and r.provider.startswith(k8s_provider.urn), r.urn
