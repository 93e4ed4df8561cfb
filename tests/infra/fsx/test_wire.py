"""The FSx for Lustre example's plan end to end: the file system in the training pool's zone under the data
key, linked to the datasets bucket (whose key lets the file system's service-linked role in), reachable from
the nodes' security group, mounted by the training runtime through the static volume, and read by the runs;
plus off by default everywhere else and the AWS side alone with ``kubernetes_access: skip``."""

from __future__ import annotations

import copy
import json

import pytest

from infra.io.stackfiles import load_stack_config
from infra.plan import runner
from infra.plan.runner import Plan
from infra.schema.parse import parse_platform_config
from tests.conftest import EXAMPLES_DIR, STACKS
from tests.k8s.validate import validate_plan

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plan(plan_example) -> Plan:
    return plan_example("fsx")


def _statements(plan: Plan, key: str) -> dict[str, dict]:
    policy = json.loads(plan.one("aws:kms/key:Key", f"kms-{key}").inputs["policy"])
    return {s["Sid"]: s for s in policy["Statement"]}


def _pod(plan: Plan) -> dict:
    doc = plan.one(RUNTIME).inputs
    return doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_file_system_in_the_training_pools_zone_under_the_data_key(plan) -> None:
    cfg = plan.config
    zone = cfg["node_pools"]["train"]["availability_zones"][0]
    fs = plan.one(FS).inputs
    assert fs["subnetIds"] == plan.outputs["privateSubnetIds"][zone]
    assert plan.outputs["sharedFileSystem"]["availabilityZone"] == zone
    assert fs["kmsKeyId"] == plan.outputs["kmsKeyArns"]["data"]
    fsx = cfg["cluster_services"]["fsx"]
    assert (fs["deploymentType"], fs["storageCapacity"], fs["perUnitStorageThroughput"]) == (
        fsx["deployment_type"],
        fsx["storage_capacity_gib"],
        fsx["per_unit_storage_throughput"],
    )


def test_linked_to_the_datasets_bucket_after_it_exists(plan) -> None:
    bucket = plan.outputs["buckets"]["datasets"]
    dra = plan.one(DRA)
    assert dra.inputs["dataRepositoryPath"] == f"s3://{bucket}/trainer/shards/"
    assert dra.inputs["fileSystemPath"] == "/datasets"
    assert dra.inputs["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    (datasets,) = [b for b in plan.by_type("aws:s3/bucket:Bucket") if b.inputs.get("bucket") == bucket]
    fs = plan.one(FS)
    assert datasets.urn in fs.dependencies or datasets.urn in dra.dependencies


def test_data_key_admits_the_file_systems_role_for_that_bucket(plan) -> None:
    bucket = plan.outputs["buckets"]["datasets"]
    stmt = _statements(plan, "data")["FsxLinkedBucketsUseKey"]
    assert stmt["Condition"]["ArnLike"]["aws:PrincipalArn"].endswith(
        "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*"
    )
    assert stmt["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"] == [
        f"arn:aws:s3:::{bucket}",
        f"arn:aws:s3:::{bucket}/*",
    ]
    assert stmt["Condition"]["StringEquals"]["kms:ViaService"] == f"s3.{plan.region}.amazonaws.com"
    # the logs key lets CloudWatch Logs encrypt the FSx log group, which the file system writes to
    group = plan.one("aws:cloudwatch/logGroup:LogGroup", "fsx-logs").inputs
    assert group["name"].startswith("/aws/fsx/") and group["kmsKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    logs = _statements(plan, "logs")["CloudWatchLogsUsesKey"]
    assert any(
        arn.endswith(f":log-group:{group['name']}")
        for arn in logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    )


def test_nodes_reach_the_file_system_on_the_lustre_ports(plan) -> None:
    (node_sg,) = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "pool-system-lt").inputs[
        "vpcSecurityGroupIds"
    ]
    (fs_sg,) = plan.one(FS).inputs["securityGroupIds"]
    ingress = plan.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    into_fs = {
        (r.inputs["referencedSecurityGroupId"], r.inputs["fromPort"], r.inputs["toPort"])
        for r in ingress
        if r.inputs["securityGroupId"] == fs_sg
    }
    assert into_fs == {(g, lo, hi) for g in (fs_sg, node_sg) for lo, hi in ((988, 988), (1018, 1023))}
    into_nodes = {
        (r.inputs["fromPort"], r.inputs["toPort"])
        for r in ingress
        if r.inputs["securityGroupId"] == node_sg and r.inputs["referencedSecurityGroupId"] == fs_sg
    }
    assert into_nodes == {(988, 988), (1018, 1023)}


def test_static_volume_is_the_file_system_and_the_runtime_mounts_its_claim(plan) -> None:
    out = plan.outputs["sharedFileSystem"]
    pv, pvc = plan.one(PV).inputs, plan.one(PVC).inputs
    assert pv["spec"]["csi"]["volumeHandle"] == out["fileSystemId"]
    assert out["fileSystemId"].startswith("fs-") and out["dnsName"].startswith(out["fileSystemId"] + ".fsx.")
    assert pv["spec"]["csi"]["volumeAttributes"] == {"dnsname": out["dnsName"], "mountname": out["mountName"]}
    assert pvc["metadata"]["namespace"] == plan.config["storage"]["trainer"]["namespace"]
    assert out["claim"] == f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"
    pod = _pod(plan)
    (claim,) = [v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claim == {"claimName": pvc["metadata"]["name"], "readOnly": True}
    assert {"name": "shared-fs", "mountPath": "/fsx", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    # the run reads its dataset (under the linked prefix) from the mount
    job = plan.one(TRAINJOB, "train-jobs-gpt2-124m").inputs
    assert "data.source=/fsx/datasets/openwebtext" in job["spec"]["trainer"]["args"]


def test_driver_runs_on_the_training_pool_and_waits_for_system_pools_only(plan) -> None:
    release = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == "aws-fsx-csi-driver"]
    (release,) = release
    values = release.inputs["values"]
    expr = values["node"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    assert expr == [{"key": "aiplat.io/pool", "operator": "In", "values": ["train"]}]
    assert values["controller"]["replicaCount"] == 0 and values["node"]["region"] == plan.region
    deps = {d.rsplit("::", 1)[-1] for d in release.dependencies}
    assert "pool-system-ng" in deps and "pool-train-ng" not in deps
    runtime = plan.one(RUNTIME)
    assert plan.one(PVC).urn in runtime.dependencies


def test_every_kubernetes_object_validates(plan) -> None:
    assert validate_plan(plan) == []


def test_off_in_every_shipped_stack(plan_stack) -> None:
    for stack in STACKS:
        p = plan_stack(stack)
        assert not p.by_type(FS) and not p.by_type(PV), stack
        assert "sharedFileSystem" not in p.outputs
        if p.config["role"] == "train":
            assert "FsxLinkedBucketsUseKey" not in _statements(p, "data")


def test_skip_creates_the_aws_side_only() -> None:
    cfg = load_stack_config("fsx", EXAMPLES_DIR)
    raw = copy.deepcopy(runner.config_as_json(cfg))
    raw["cluster_services"]["kubernetes_access"] = "skip"
    plan = runner.run_plan("fsx", parse_platform_config(raw), stacks_dir=EXAMPLES_DIR)
    assert plan.one(FS) and plan.one(DRA)
    assert not plan.by_type(PV) and not plan.by_type(PVC)
    assert not {"claim", "mountPath"} & set(plan.outputs["sharedFileSystem"])
