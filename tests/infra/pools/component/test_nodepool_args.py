"""GpuNodePool built with chosen arguments: EFA layouts, an existing placement group, capacity blocks."""

from __future__ import annotations

import pulumi

from infra.pools.component.nodepool import CapacityReservation, GpuNodePool, GpuNodePoolArgs, PlacementGroup
from infra.pools.documents.efa import EfaInterface
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


def test_plain_pool_puts_one_group_on_the_template_and_the_type_on_the_node_group() -> None:
    plan = _pool()
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup")
    assert len(lt.inputs["vpcSecurityGroupIds"]) == 1  # the cluster's: no EFA group to add
    assert not plan.by_type("aws:ec2/securityGroup:SecurityGroup")
    assert "networkInterfaces" not in lt.inputs and "placement" not in lt.inputs
    assert "instanceType" not in lt.inputs and len(ng.inputs["instanceTypes"]) == 1


def test_pool_tags_name_the_node_group_and_the_pool_on_what_it_launches() -> None:
    plan = _pool(tags={"CostCenter": "ml"})
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup")
    launched = [t["tags"] for t in lt.inputs["tagSpecifications"]]
    for tagged in (lt.inputs["tags"], ng.inputs["tags"], *launched):
        assert tagged["Name"] == ng.inputs["nodeGroupName"] and tagged["aiplat:pool"] and tagged["CostCenter"]


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
