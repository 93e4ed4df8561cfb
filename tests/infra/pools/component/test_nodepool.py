"""GpuNodePool on every stack's recorded plan: launch template, EFA layout, placement, node group."""

from __future__ import annotations

import base64

import pytest

from infra.io import snapshot as awsdata
from infra.io.stackfiles import load_stack_config
from infra.pools.documents.efa import max_efa_interfaces
from tests.conftest import STACKS

POOLS = [(stack, pool) for stack in STACKS for pool in load_stack_config(stack).node_pools]


def _pool(plan, pool: str):
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", f"pool-{pool}-lt")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup", f"pool-{pool}-ng")
    return plan.config["node_pools"][pool], lt, ng


@pytest.mark.parametrize(("stack", "pool"), POOLS)
def test_launch_template_basics(plan_stack, stack: str, pool: str) -> None:
    plan = plan_stack(stack)
    cfg, lt, ng = _pool(plan, pool)
    meta = lt.inputs["metadataOptions"]
    # IMDSv2 only, hop limit 1: pods in their own network namespace get no token (node credentials)
    assert (meta["httpTokens"], meta["httpPutResponseHopLimit"], meta["httpEndpoint"]) == (
        "required",
        1,
        "enabled",
    )
    (root,) = lt.inputs["blockDeviceMappings"]
    ebs = root["ebs"]
    assert root["deviceName"] == "/dev/xvda"
    assert (ebs["encrypted"], ebs["volumeType"], ebs["volumeSize"]) == ("true", "gp3", cfg["root_volume_gib"])
    assert ebs["kmsKeyId"] == plan.outputs["kmsKeyArns"]["ebs"]
    assert "keyName" not in lt.inputs  # no SSH
    for ni in lt.inputs.get("networkInterfaces") or []:
        assert "associatePublicIpAddress" not in ni
    assert sorted(t["resourceType"] for t in lt.inputs["tagSpecifications"]) == [
        "instance",
        "network-interface",
        "volume",
    ]
    for spec in lt.inputs["tagSpecifications"]:
        assert spec["tags"]["CostCenter"] == plan.config["tags"]["CostCenter"]
    assert ng.inputs["launchTemplate"]["id"].startswith(f"pool-{pool}-lt")
    assert ng.inputs["nodeRepairConfig"] == {"enabled": True}
    assert ng.inputs["instanceTypes"] == [cfg["instance_type"]]
    assert (ng.inputs["scalingConfig"]["minSize"], ng.inputs["scalingConfig"]["maxSize"]) == (
        cfg["min_size"],
        cfg["max_size"],
    )
    assert "diskSize" not in ng.inputs and "remoteAccess" not in ng.inputs


@pytest.mark.parametrize(("stack", "pool"), POOLS)
def test_desired_size_is_applied_by_every_pulumi_up(plan_stack, stack: str, pool: str) -> None:
    # No cluster autoscaler scales managed node groups here, so the config's desired_size is the pool's
    # size: an ignoreChanges on it would leave a raised desired_size (or a Capacity Block pool scaled up
    # when its block starts) unapplied forever.
    cfg, _, ng = _pool(plan_stack(stack), pool)
    assert ng.inputs["scalingConfig"]["desiredSize"] == cfg["desired_size"]
    assert not [c for c in ng.options["ignoreChanges"] if "desired" in c.lower()]


@pytest.mark.parametrize(("stack", "pool"), POOLS)
def test_gpu_pools_taint_and_ami(plan_stack, stack: str, pool: str) -> None:
    plan = plan_stack(stack)
    cfg, lt, ng = _pool(plan, pool)
    taints = ng.inputs.get("taints") or []
    if cfg["gpu"]:
        assert ng.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in taints
    else:
        assert ng.inputs["amiType"] == "AL2023_x86_64_STANDARD"
        assert all(t["key"] != "nvidia.com/gpu" for t in taints)
    capacity = {"on_demand": "ON_DEMAND", "spot": "SPOT"}[cfg["capacity_type"]]
    assert ng.inputs["capacityType"] == capacity
    facts = awsdata.instance_facts(cfg["instance_type"])
    user_data = lt.inputs.get("userData")
    if facts.has_instance_store:
        assert "strategy: RAID0" in base64.b64decode(user_data).decode()
    else:
        assert user_data is None


def test_prod_training_pool_has_32_efa_interfaces_in_one_subnet_and_placement_group(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    cfg, lt, ng = _pool(plan, "train")
    interfaces = lt.inputs["networkInterfaces"]
    assert len(interfaces) == 32 == max_efa_interfaces(awsdata.instance_facts("p5.48xlarge"))
    first, rest = interfaces[0], interfaces[1:]
    assert (first["networkCardIndex"], first["deviceIndex"], first["interfaceType"]) == (0, 0, "efa")
    assert [i["networkCardIndex"] for i in rest] == list(range(1, 32))
    assert {i["deviceIndex"] for i in rest} == {1} and {i["interfaceType"] for i in rest} == {"efa-only"}
    sg = plan.one("aws:ec2/securityGroup:SecurityGroup", "pool-train-efa-sg")
    cluster_sg = plan.one("aws:eks/cluster:Cluster")
    for i in interfaces:
        assert len(i["securityGroups"]) == 2 and i["securityGroups"][1].startswith("pool-train-efa-sg")
        assert i["deleteOnTermination"] == "true"
    assert "vpcSecurityGroupIds" not in lt.inputs
    ingress = plan.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "pool-train-efa-in")
    egress = plan.one("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "pool-train-efa-out")
    for rule in (ingress, egress):
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.inputs["securityGroupId"] == rule.inputs["referencedSecurityGroupId"]
        assert rule.inputs["securityGroupId"].startswith("pool-train-efa-sg")
    assert sg.parent == rule.parent and cluster_sg is not None
    (subnet,) = ng.inputs["subnetIds"]
    assert subnet.startswith(f"network-private-{cfg['availability_zones'][0]}")
    pg = plan.one("aws:ec2/placementGroup:PlacementGroup")
    assert pg.inputs["strategy"] == "cluster"
    assert lt.inputs["placement"]["groupName"] == pg.inputs["name"]
    assert ng.inputs["labels"]["vpc.amazonaws.com/efa.present"] == "true"


@pytest.mark.parametrize("stack", ["dev-us-train", "prod-hk-infer", "prod-sg-infer"])
def test_non_efa_stacks_have_no_efa_or_placement(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    assert not plan.by_type("aws:ec2/placementGroup:PlacementGroup")
    for lt in plan.by_type("aws:ec2/launchTemplate:LaunchTemplate"):
        assert "networkInterfaces" not in lt.inputs
        assert len(lt.inputs["vpcSecurityGroupIds"]) == 1  # the cluster security group
    for ng in plan.by_type("aws:eks/nodeGroup:NodeGroup"):
        pool = ng.name.removeprefix("pool-").removesuffix("-ng")
        offering = set(awsdata.azs_offering(plan.region, plan.config["node_pools"][pool]["instance_type"]))
        zones = [z for z in plan.outputs["availabilityZones"] if z in offering]
        assert len(ng.inputs["subnetIds"]) == len(zones) >= 1


def test_dev_gpu_pool_is_spot_single_gpu(plan_stack) -> None:
    cfg, _, ng = _pool(plan_stack("dev-us-train"), "gpu")
    assert ng.inputs["capacityType"] == "SPOT"
    assert awsdata.instance_facts(cfg["instance_type"]).gpu_count == 1


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_inference_gpus_come_from_karpenter_types_offered_here(plan_stack, stack: str) -> None:
    # No managed GPU node group idles in an inference region: the model server runs on the Karpenter
    # NodePool, whose types are ones AWS offers in this VPC's zones, from two families or more.
    plan = plan_stack(stack)
    assert not [p for p in plan.config["node_pools"].values() if p["gpu"]]
    (pool,) = plan.by_type("kubernetes:karpenter.sh/v1:NodePool")
    req = {r["key"]: r["values"] for r in pool.inputs["spec"]["template"]["spec"]["requirements"]}
    types, zones = req["node.kubernetes.io/instance-type"], req["topology.kubernetes.io/zone"]
    offered = awsdata.offered_by_az(plan.region)
    for t in types:
        assert any(t in offered[z] for z in zones), t
        assert awsdata.instance_facts(t).gpu_count >= 1, t
    assert len({t.split(".")[0] for t in types}) >= 2
