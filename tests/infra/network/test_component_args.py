"""GpuVpc built with chosen arguments: the NAT layouts and flow-log switch no shipped stack exercises."""

from __future__ import annotations

import json

import pulumi
import pytest

from infra.network.component import FlowLogs, GpuVpc, GpuVpcArgs
from tests.conftest import build

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def _vpc(**changes) -> object:
    args = {
        "name_tag_prefix": "t",
        "cidr": "10.1.0.0/16",
        "availability_zones": ZONES,
        "region": "us-east-1",
        "cluster_name": "c",
        "interface_endpoints": ("sts",),
        "account_id": "123456789012",
        **changes,
    }
    return build(lambda p: GpuVpc("net", GpuVpcArgs(**args), opts=pulumi.ResourceOptions(provider=p)))


def _private_routes(plan) -> dict[str, list]:
    return {
        r.name: r.inputs.get("routes") or []
        for r in plan.by_type("aws:ec2/routeTable:RouteTable")
        if "-private-rt-" in r.name
    }


def test_no_nat_leaves_private_subnets_without_default_route() -> None:
    plan = _vpc(nat_zones=())
    assert not plan.by_type("aws:ec2/natGateway:NatGateway")
    assert not plan.by_type("aws:ec2/eip:Eip")
    routes = _private_routes(plan)
    assert sorted(routes) == [f"net-private-rt-{az}" for az in ZONES]
    assert all(r == [] for r in routes.values())
    # S3 still reachable from every private subnet through the gateway endpoint
    (s3,) = [
        e for e in plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e.inputs["vpcEndpointType"] == "Gateway"
    ]
    assert len(s3.inputs["routeTableIds"]) == len(ZONES)


def test_single_nat_serves_every_zone() -> None:
    plan = _vpc(nat_zones=ZONES[:1])
    (nat,) = plan.by_type("aws:ec2/natGateway:NatGateway")
    assert nat.name == f"net-nat-{ZONES[0]}"
    public = {s.name: s for s in plan.by_type("aws:ec2/subnet:Subnet")}
    assert nat.inputs["subnetId"].startswith(f"net-public-{ZONES[0]}")
    assert public[f"net-public-{ZONES[0]}"].inputs["availabilityZone"] == ZONES[0]
    for routes in _private_routes(plan).values():
        assert len(routes) == 1 and routes[0]["cidrBlock"] == "0.0.0.0/0"
        assert routes[0]["natGatewayId"].startswith(f"net-nat-{ZONES[0]}-")


def test_nat_per_zone_routes_each_zone_to_its_own() -> None:
    plan = _vpc(nat_zones=ZONES)
    assert len(plan.by_type("aws:ec2/natGateway:NatGateway")) == 3
    for name, routes in _private_routes(plan).items():
        az = name.removeprefix("net-private-rt-")
        assert routes[0]["natGatewayId"].startswith(f"net-nat-{az}-")


def test_flow_logs_off_and_on() -> None:
    assert not _vpc(flow_logs=None).by_type("aws:ec2/flowLog:FlowLog")
    plan = _vpc(flow_logs=FlowLogs(log_group_name="/x/flow", retention_days=30, traffic_type="REJECT"))
    group, flow = plan.one("aws:cloudwatch/logGroup:LogGroup"), plan.one("aws:ec2/flowLog:FlowLog")
    role = plan.one("aws:iam/role:Role", "net-flow-logs-role")
    delivery = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "net-flow-logs-policy").inputs["policy"])
    # delivered to the group made here, by a role allowed to write to that group only
    assert group.urn in flow.dependencies
    assert all(r.startswith(flow.inputs["logDestination"]) for r in delivery["Statement"][0]["Resource"])
    assert flow.inputs["iamRoleArn"].endswith(f":role/{role.name}")


def test_nat_zone_outside_the_vpc_is_a_bug() -> None:
    with pytest.raises(Exception, match="NAT zones"):
        _vpc(nat_zones=("us-east-1f",))
