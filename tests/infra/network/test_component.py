"""GpuVpc on every stack's recorded plan."""

from __future__ import annotations

import ipaddress

import pytest

from tests.conftest import STACKS

NAT_COUNT = {"none": 0, "single": 1, "one_per_az": None}  # None: one per AZ


@pytest.mark.parametrize("stack", STACKS)
def test_subnets_routes_nat(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    net = plan.config["network"]
    zones = plan.outputs["availabilityZones"]
    vpc = ipaddress.IPv4Network(net["vpc_cidr"])
    subnets = plan.by_type("aws:ec2/subnet:Subnet")
    # private, public and the interface endpoints' own, per zone
    assert len(subnets) == 3 * len(zones)
    for s in subnets:
        assert ipaddress.IPv4Network(s.inputs["cidrBlock"]).subnet_of(vpc)
        assert s.inputs["mapPublicIpOnLaunch"] is False
        assert s.inputs["availabilityZone"] in zones
        cluster_tag = f"kubernetes.io/cluster/{plan.outputs['clusterName']}"
        if "-endpoints-" in s.name:  # no load balancer, no Karpenter node: neither role nor cluster tag
            assert not {"kubernetes.io/role/internal-elb", "kubernetes.io/role/elb", cluster_tag} & set(
                s.inputs["tags"]
            )
            continue
        role = "kubernetes.io/role/internal-elb" if "-private-" in s.name else "kubernetes.io/role/elb"
        assert s.inputs["tags"][role] == "1"
        assert s.inputs["tags"][cluster_tag] == "shared"
    nats = plan.by_type("aws:ec2/natGateway:NatGateway")
    expected = NAT_COUNT[net["nat"]]
    assert len(nats) == (len(zones) if expected is None else expected)
    private_rts = [r for r in plan.by_type("aws:ec2/routeTable:RouteTable") if "-private-rt-" in r.name]
    assert len(private_rts) == len(zones)
    for rt in private_rts:
        routes = rt.inputs.get("routes") or []
        assert bool(routes) == bool(nats)
        assert all(r.get("natGatewayId") for r in routes)


@pytest.mark.parametrize("stack", STACKS)
def test_endpoints(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    endpoints = plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    gateway = [e for e in endpoints if e.inputs["vpcEndpointType"] == "Gateway"]
    assert [e.inputs["serviceName"] for e in gateway] == [f"com.amazonaws.{plan.region}.s3"]
    assert len(gateway[0].inputs["routeTableIds"]) == len(plan.outputs["availabilityZones"])
    interface = [e for e in endpoints if e.inputs["vpcEndpointType"] == "Interface"]
    names = {e.inputs["serviceName"] for e in interface}
    assert names == {
        f"com.amazonaws.{plan.region}.{s}" for s in plan.config["network"]["interface_endpoints"]
    }
    assert {f"com.amazonaws.{plan.region}.{s}" for s in ("ecr.api", "ecr.dkr", "sts")} <= names
    for e in interface:
        assert e.inputs["privateDnsEnabled"] is True
        assert len(e.inputs["subnetIds"]) == len(plan.outputs["availabilityZones"])


@pytest.mark.parametrize("stack", STACKS)
def test_flow_logs_encrypted(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    flow = plan.one("aws:ec2/flowLog:FlowLog")
    assert flow.inputs["trafficType"] == plan.config["network"]["flow_logs"]["traffic_type"]
    assert flow.inputs["logDestinationType"] == "cloud-watch-logs"
    group = plan.one("aws:cloudwatch/logGroup:LogGroup", "network-flow-logs")
    assert group.inputs["kmsKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    assert group.inputs["retentionInDays"] == plan.config["network"]["flow_logs"]["retention_days"]
