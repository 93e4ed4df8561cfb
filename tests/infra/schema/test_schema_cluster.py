"""Schema of the network, cluster and node pool fields: each bad value named."""

from __future__ import annotations

import pytest

from infra.cluster.config import AddonVersions
from infra.network.config import NatStrategy
from infra.pools.config import Placement
from infra.schema.parse import parse_platform_config
from tests.conftest import assert_rejected

BAD = [
    ("network.nat", "two", ["aiplat:platform.network.nat", "'none', 'single' or 'one_per_az'"]),
    ("network.interface_endpoints", ["s3"], ["'s3' gets a gateway endpoint already"]),
    ("network.interface_endpoints", ["sts", "sts"], ["lists a service twice"]),
    ("network.interface_endpoints", ["ECR API"], ["'ECR API' is not an AWS service short name"]),
    (
        "network.flow_logs.retention_days",
        10,
        ["network.flow_logs.retention_days", "10 is not a CloudWatch", "e.g. 7"],
    ),
    ("network.flow_logs.aggregation_interval_s", 300, ["300 is not 60 or 600"]),
    ("network.availability_zones", ["us-west-2a"], ["names 1 zones but az_count is 2", "make them agree"]),
    ("cluster.kubernetes_version", "1.3", ["aiplat:platform.cluster.kubernetes_version"]),
    (
        "cluster",
        {"kubernetes_version": "1.34", "addons": {"kube_proxy": "v1.35.3-eksbuild.2"}},
        [
            "aiplat:platform.cluster",
            "kube_proxy v1.35.3-eksbuild.2 is for Kubernetes 1.35",
            "v1.34.x-eksbuild.N",
        ],
    ),
    ("cluster.addons.coredns", "latest", ["cluster.addons.coredns", "'latest' is not an EKS add-on version"]),
    ("cluster.addons.cilium", "v1.0.0-eksbuild.1", ["cluster.addons.cilium: unknown key"]),
    ("cluster.endpoint_public_access_cidrs", ["10.0.0.0/33"], ["'10.0.0.0/33' is not an IPv4 CIDR"]),
    (
        "cluster.access_entries",
        {"ops": {"principal_arn": "ops-role", "policy": "view"}},
        ["cluster.access_entries.ops.principal_arn"],
    ),
    (
        "cluster.access_entries",
        {"ops": {"principal_arn": "arn:aws:iam::123456789012:role/ops", "policy": "root"}},
        ["cluster.access_entries.ops.policy", "'root' is not allowed"],
    ),
    ("node_pools.gpu.placement", "spread", ["node_pools.gpu.placement", "'auto', 'cluster' or 'none'"]),
    ("node_pools.gpu.taints", {"team": {"effect": "Never"}}, ["node_pools.gpu.taints.team.effect"]),
    ("node_pools.gpu.root_volume_gib", 8, ["node_pools.gpu.root_volume_gib", "greater than or equal to 20"]),
    (
        "node_pools.gpu.capacity_reservation",
        {"id": "r-1", "availability_zone": "us-west-2a"},
        ["capacity_reservation.id"],
    ),
    ("node_pools.gpu.efa_interfaces", 0, ["node_pools.gpu.efa_interfaces", "greater than or equal to 1"]),
]


@pytest.mark.parametrize(("path", "value", "expected"), BAD, ids=[f"{p}={v!r}"[:40] for p, v, _ in BAD])
def test_bad_value_is_named(stack_config, path: str, value: object, expected: list[str]) -> None:
    assert_rejected(stack_config("dev-us-train"), path, value, expected)


def test_defaults_and_stack_values(stack_config) -> None:
    dev = parse_platform_config(stack_config("dev-us-train"))
    prod = parse_platform_config(stack_config("prod-us-train"))
    assert dev.network.nat is NatStrategy.single and prod.network.nat is NatStrategy.one_per_az
    train = prod.node_pools["train"]
    assert train.efa and train.placement is Placement.auto and train.placement_group_wanted
    assert not prod.node_pools["system"].placement_group_wanted
    assert prod.cluster.endpoint_public_access_cidrs == []
    assert AddonVersions().pinned() == {}
    names = prod.cluster.addon_versions()
    assert set(names) == {
        "vpc-cni",
        "coredns",
        "kube-proxy",
        "aws-ebs-csi-driver",
        "eks-pod-identity-agent",
        "eks-node-monitoring-agent",
    }
    assert names["kube-proxy"].startswith(f"v{prod.cluster.kubernetes_version}.")
