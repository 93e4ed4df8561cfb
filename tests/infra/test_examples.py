"""The example stacks under examples/ plan, and each shows the feature it exists for."""

from __future__ import annotations

import pytest

from infra.plan.runner import Plan
from tests.conftest import EXAMPLES


@pytest.fixture(scope="module")
def planned(plan_example) -> dict[str, Plan]:
    return {name: plan_example(name) for name in EXAMPLES}


def test_examples_exist(planned) -> None:
    assert {"capacity-block", "odcr", "minio", "nat-none", "fsx", "models-train", "models-infer"} <= set(
        planned
    )


def test_capacity_block(planned) -> None:
    plan = planned["capacity-block"]
    ng = plan.one("aws:eks/nodeGroup:NodeGroup", "pool-train-ng")
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "pool-train-lt")
    assert ng.inputs["capacityType"] == "CAPACITY_BLOCK"
    # EKS takes a Capacity Block group's type from the launch template only (capacity-blocks-mng.html)
    assert lt.inputs["instanceType"] == plan.config["node_pools"]["train"]["instance_type"]
    assert "instanceTypes" not in ng.inputs
    assert [s for s in ng.inputs["subnetIds"]] == [plan.outputs["privateSubnetIds"]["us-east-1a"]]
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0123456789abcdef0"
    }
    assert len(lt.inputs["networkInterfaces"]) == 32
    assert not plan.by_type("aws:ec2/placementGroup:PlacementGroup")


def test_odcr_in_its_own_placement_group(planned) -> None:
    plan = planned["odcr"]
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "pool-train-lt")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup", "pool-train-ng")
    assert ng.inputs["capacityType"] == "ON_DEMAND"
    assert ng.inputs["instanceTypes"] == ["p4d.24xlarge"] and "instanceType" not in lt.inputs
    assert lt.inputs["placement"] == {"groupName": "odcr-p4d-cluster"}
    assert not plan.by_type("aws:ec2/placementGroup:PlacementGroup")
    assert len(lt.inputs["networkInterfaces"]) == 4  # p4d.24xlarge: 4 EFA interfaces


def test_minio_instead_of_buckets(planned) -> None:
    plan = planned["minio"]
    assert not plan.by_type("aws:s3/bucket:Bucket")
    release = plan.one("kubernetes:helm.sh/v3:Release", "minio-release")
    assert release.inputs["chart"] == "minio" and release.inputs["values"]["replicas"] == 4
    values = release.inputs["values"]
    # not the chart's 16Gi per pod (4 of them fit on no pair of m6i.2xlarge): the schema's default, checked
    # by the rule minio-fits-system-pools, and only on the pool that plan checked
    assert values["resources"]["requests"]["memory"] == "2Gi"
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [{"key": "aiplat.io/pool", "operator": "In", "values": ["system"]}]


def test_nat_none_has_no_default_route(planned) -> None:
    plan = planned["nat-none"]
    assert not plan.by_type("aws:ec2/natGateway:NatGateway")
    private = [r for r in plan.by_type("aws:ec2/routeTable:RouteTable") if "-private-rt-" in r.name]
    assert private and all(not r.inputs.get("routes") for r in private)
    services = {e.inputs["serviceName"] for e in plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert {f"com.amazonaws.us-west-2.{s}" for s in ("ecr.api", "ecr.dkr", "sts", "ec2", "s3")} <= services


def test_nat_none_is_the_aws_only_variant(planned) -> None:
    # Without egress, only images in the account's ECR can be pulled; the cluster services' charts pull
    # from public registries, so this stack declares nothing in the cluster (kubernetes_access: skip).
    plan = planned["nat-none"]
    assert plan.config["cluster_services"]["kubernetes_access"] == "skip"
    assert plan.by_type("aws:eks/cluster:Cluster") and plan.by_type("aws:eks/nodeGroup:NodeGroup")
    in_cluster = [r.type for r in plan.resources if r.type.startswith("kubernetes:")]
    assert in_cluster == [], in_cluster
    # what nodes still pull comes from ECR: the EKS add-ons (AWS's regional ECR) reach it through the
    # endpoints; nothing else is installed
    assert {a.inputs["addonName"] for a in plan.by_type("aws:eks/addon:Addon")} >= {"vpc-cni", "coredns"}


def test_fsx_beside_the_datasets_bucket(planned) -> None:
    plan = planned["fsx"]
    fs = plan.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["subnetIds"] == plan.outputs["privateSubnetIds"]["us-east-1a"]  # the EFA pool's zone
    dra = plan.one("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert dra.inputs["dataRepositoryPath"] == f"s3://{plan.outputs['buckets']['datasets']}/trainer/shards/"
    assert plan.one("kubernetes:core/v1:PersistentVolumeClaim").inputs["metadata"]["namespace"] == "training"


def test_minio_training_trusts_minios_ca(planned) -> None:
    """F7: the trainer reaches MinIO over https signed by the private ClusterIssuer; its pods get that CA."""
    plan = planned["minio"]
    release = plan.one("kubernetes:helm.sh/v3:Release", "minio-release")
    serving = plan.one("kubernetes:cert-manager.io/v1:Certificate", "minio-certificate").inputs["spec"]
    trust = plan.one("kubernetes:cert-manager.io/v1:Certificate", "minio-trainer-ca").inputs
    # the same issuer as MinIO's serving certificate, in the trainer's namespace, into the Secret it mounts
    assert trust["spec"]["issuerRef"] == serving["issuerRef"]
    credentials = plan.one("kubernetes:core/v1:Secret", "minio-trainer-s3").inputs["metadata"]
    assert trust["metadata"]["namespace"] == credentials["namespace"]
    runtime = plan.one("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime").inputs
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in job["volumes"]}
    secret_volume = next(v for v in volumes.values() if "secret" in v)
    assert secret_volume["secret"]["secretName"] == trust["spec"]["secretName"]
    (init,) = job["initContainers"]
    (node,) = job["containers"]
    assert init["image"] == node["image"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    # boto3 (AWS_CA_BUNDLE), Python ssl (SSL_CERT_FILE) and the CRT client (fixed path) read the same file,
    # in the directory the init container's bundle is mounted over
    mounts = {m["mountPath"]: m["name"] for m in node["volumeMounts"]}
    assert env["AWS_CA_BUNDLE"] == env["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"
    assert "emptyDir" in volumes[mounts["/etc/ssl/certs"]]
    written = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert f"> {written[mounts['/etc/ssl/certs']]}/ca-certificates.crt" in init["command"][-1]
    assert f"{written[secret_volume['name']]}/ca.crt" in init["command"][-1]
    assert release.inputs["values"]["tls"]["enabled"] is True


def test_minio_example_objects_validate(planned) -> None:
    """Every Kubernetes object of the MinIO + training example (the trust Certificate, the runtime with its
    init container) validates against the cluster version's schema / the CRD models."""
    from tests.k8s.validate import validate_plan

    assert validate_plan(planned["minio"]) == []
