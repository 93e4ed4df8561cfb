"""GpuNodePool built with chosen arguments: EFA layouts, an existing placement group, capacity blocks."""

from __future__ import annotations

import pulumi

from infra.components.aws.nodepool import CapacityReservation, GpuNodePool, GpuNodePoolArgs, PlacementGroup
from infra.lib.efa import EfaInterface
from infra.lib.nodes import Taint
from tests.conftest import build


def _pool(**changes):
    args = {
        "pool_name": "p",
        "node_group_name": "t-p",
        "launch_template_name": "t-p",
        "instance_type": "p4d.24xlarge",
        "ami_type": "AL2023_x86_64_NVIDIA",
        "capacity_type": "ON_DEMAND",
        "min_size": 0,
        "desired_size": 1,
        "max_size": 2,
        "cluster_name": "c",
        "kubernetes_version": "1.35",
        "node_role_arn": "arn:aws:iam::123456789012:role/n",
        "cluster_security_group_id": "sg-cluster",
        "vpc_id": "vpc-1",
        "subnet_ids": ["subnet-1"],
        "ebs_key_arn": "arn:aws:kms:us-east-1:123456789012:key/ebs",
        **changes,
    }
    return build(
        lambda p: GpuNodePool("pool", GpuNodePoolArgs(**args), opts=pulumi.ResourceOptions(provider=p))
    )


def test_plain_pool_puts_groups_on_the_template() -> None:
    plan = _pool(taints=(Taint("nvidia.com/gpu", "true", "NO_SCHEDULE"),), labels={"a": "b"})
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert lt.inputs["vpcSecurityGroupIds"] == ["sg-cluster"]
    assert "networkInterfaces" not in lt.inputs and "placement" not in lt.inputs
    assert not plan.by_type("aws:ec2/securityGroup:SecurityGroup")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup")
    assert ng.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert ng.inputs["labels"] == {"a": "b"}


def test_efa_interfaces_as_given_with_the_self_referencing_group() -> None:
    layout = (EfaInterface(0, 0, "efa"), EfaInterface(1, 1, "efa"))
    plan = _pool(efa_interfaces=layout)
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert "vpcSecurityGroupIds" not in lt.inputs
    nics = lt.inputs["networkInterfaces"]
    assert [(n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in nics] == [
        (0, 0, "efa"),
        (1, 1, "efa"),
    ]
    sg = plan.one("aws:ec2/securityGroup:SecurityGroup")
    assert all(len(n["securityGroups"]) == 2 for n in nics)
    ingress = plan.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert ingress.inputs["ipProtocol"] == "-1"
    assert ingress.inputs["securityGroupId"] == ingress.inputs["referencedSecurityGroupId"]
    assert ingress.inputs["securityGroupId"].startswith(sg.name)


def test_existing_placement_group_is_not_created() -> None:
    plan = _pool(placement_group=PlacementGroup(name="reserved-pg", create=False))
    assert not plan.by_type("aws:ec2/placementGroup:PlacementGroup")
    assert plan.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["placement"] == {
        "groupName": "reserved-pg"
    }


def test_created_placement_group_is_cluster_strategy() -> None:
    plan = _pool(placement_group=PlacementGroup(name="t-p-cluster", create=True))
    pg = plan.one("aws:ec2/placementGroup:PlacementGroup")
    assert pg.inputs["strategy"] == "cluster" and pg.inputs["name"] == "t-p-cluster"


def test_capacity_block_and_odcr_targets() -> None:
    block = _pool(
        capacity_type="CAPACITY_BLOCK",
        capacity_reservation=CapacityReservation(reservation_id="cr-0123456789abcdef0", capacity_block=True),
    ).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert block.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    target = block.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationId": "cr-0123456789abcdef0"}
    odcr = _pool(capacity_reservation=CapacityReservation(reservation_id="cr-0123456789abcdef0")).one(
        "aws:ec2/launchTemplate:LaunchTemplate"
    )
    assert "instanceMarketOptions" not in odcr.inputs
