"""Create-time constraints of EKS and EC2 that the config can break, refused before any resource.

Each case starts from a real stack file, changes one thing and runs the real program under mocks; the error
names the field, the value and the fix (and the AWS doc where the constraint is written down).
"""

from __future__ import annotations

import pytest

from infra.core.errors import ConfigErrors
from infra.core.facts import AvailabilityZone
from infra.io import snapshot as awsdata
from infra.plan import runner
from infra.schema.parse import parse_platform_config
from tests.support.config_cases import assert_refused, update_pool, variant_name

P = "aiplat:platform"
CR = "cr-0123456789abcdef0"
CB_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"


def _zone_named(region: str, zone_id: str) -> str:
    """The snapshot's name for a zone ID (names are per account; the snapshot holds one mapping)."""
    return next(z.name for z in awsdata.availability_zones(region) if z.zone_id == zone_id)


USE1_AZ3 = _zone_named("us-east-1", "use1-az3")
NO_SPOT = next(
    t
    for t in sorted(awsdata.offered_in_region("us-east-1"))
    if "spot" not in awsdata.describe_instance_type(t).get("SupportedUsageClasses", [])
    and not awsdata.describe_instance_type(t).get("GpuInfo")
)


def _plan(raw: dict) -> runner.Plan:
    return runner.run_plan(variant_name(raw), parse_platform_config(raw))


def _vpc_zones(c: dict, zones: list[str]) -> None:
    c["network"].update(availability_zones=zones, az_count=len(zones))
    c["node_pools"]["train"]["availability_zones"] = [zones[0]]


CASES = [
    pytest.param(
        lambda c: _vpc_zones(c, ["us-east-1a", USE1_AZ3]),
        f"{P}.network.availability_zones: the VPC's zones ['us-east-1a', '{USE1_AZ3}'] leave 1 zone(s) for "
        f"the EKS control plane, CreateCluster needs subnets in at least 2; EKS refuses control-plane "
        f"subnets in {USE1_AZ3} (use1-az3); fix: use at least 2 zones EKS supports",
        id="control-plane-in-use1-az3",
    ),
    pytest.param(
        lambda c: c["network"].update(az_count=1),
        f"{P}.network.az_count: the VPC's zones ['us-east-1a'] leave 1 zone(s) for the EKS control plane",
        id="one-zone",
    ),
    pytest.param(
        update_pool(
            "train",
            capacity_type="capacity_block",
            capacity_reservation={"id": CR, "availability_zone": "us-east-1a"},
            availability_zones=None,
        ),
        f"{P}.node_pools.train.availability_zones: not set, so the pool's subnets span every VPC zone "
        f"offering p5.48xlarge, but reservation {CR} serves us-east-1a only and EKS rejects a Capacity "
        "Block node group with subnets in other zones; fix: set availability_zones: [us-east-1a]",
        id="capacity-block-all-zones",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(
            capacity_type="capacity_block",
            capacity_reservation={"id": CR, "availability_zone": "us-east-1a"},
            availability_zones=["us-east-1a"],
        ),
        f"{P}.node_pools.system.capacity_type: capacity_block but m6i.2xlarge is sold only as on-demand, "
        "spot (DescribeInstanceTypes SupportedUsageClasses); fix: use on_demand or capacity_reservation, "
        "or a type that supports Capacity Blocks",
        id="capacity-block-type",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(instance_type=NO_SPOT, capacity_type="spot"),
        f"{P}.node_pools.system.capacity_type: spot but {NO_SPOT} is sold only as",
        id="spot-type",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(taints={"dedicated": {"value": "infra"}}),
        f"{P}.node_pools: no pool runs system pods at creation: CoreDNS and the EBS CSI controller do not "
        "tolerate the GPU taint",
        id="no-system-pool",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(min_size=0, desired_size=0),
        f"{P}.node_pools: no pool runs system pods at creation (system start with desired_size 0)",
        id="system-pool-empty",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(labels={"team name": "x"}),
        f"{P}.node_pools.system.labels: label key 'team name' is not a Kubernetes label key",
        id="label-key",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(labels={"team": ""}),
        f"{P}.node_pools.system.labels: label 'team' value '' must be 1-63 characters",
        id="label-empty-value",
    ),
    pytest.param(
        lambda c: c["node_pools"]["system"].update(taints={f"t{i}": {} for i in range(50)}),
        f"{P}.node_pools.system.taints: 50 taints but EKS allows at most 50 per node group, ours included",
        id="too-many-taints",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES)
def test_refused_before_any_cloud_resource(stack_config, monitors, mutate, expected) -> None:
    raw = stack_config("prod-us-train")
    mutate(raw)
    assert_refused(raw, expected, monitors)


def test_capacity_block_refusal_links_the_eks_doc(stack_config) -> None:
    raw = stack_config("prod-us-train")
    CASES[2].values[0](raw)
    with pytest.raises(ConfigErrors) as info:
        _plan(raw)
    assert CB_DOC in str(info.value)


def test_control_plane_gets_only_zones_eks_supports(stack_config) -> None:
    raw = stack_config("prod-us-train")
    _vpc_zones(raw, ["us-east-1a", "us-east-1b", USE1_AZ3])
    plan = _plan(raw)
    private = [r for r in plan.by_type("aws:ec2/subnet:Subnet") if "-private-" in r.name]
    assert {r.inputs["availabilityZone"] for r in private} == {"us-east-1a", "us-east-1b", USE1_AZ3}
    used = plan.one("aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"]
    # the mocks give a subnet the id '<resource name>-<digest>'
    cp_zones = {
        r.inputs["availabilityZone"] for r in private if any(s.startswith(r.name + "-") for s in used)
    }
    assert cp_zones == {"us-east-1a", "us-east-1b"}  # nodes may use use1-az3, the control plane not


def test_default_zones_leave_out_the_eks_unsupported_zone(stack_config) -> None:
    raw = stack_config("prod-us-train")
    raw["network"]["az_count"] = 5  # us-east-1 has six zones; the sixth is use1-az3
    plan = _plan(raw)
    assert USE1_AZ3 not in plan.outputs["availabilityZones"]
    assert len(plan.outputs["availabilityZones"]) == 5


def test_local_zones_never_reach_the_vpc(stack_doc, monkeypatch) -> None:
    # A Local Zone the account opted into sorts before the ordinary zones ('us-west-2-lax-1a' <
    # 'us-west-2a'); the program asks for availability zones only.
    real = awsdata.availability_zones("us-west-2")
    local = AvailabilityZone("us-west-2-lax-1a", "usw2-lax1-az1", "local-zone")
    monkeypatch.setattr(awsdata, "availability_zones", lambda region: (local, *real))
    plan = runner.run_plan("dev-us-train")
    assert "us-west-2-lax-1a" not in plan.outputs["availabilityZones"]
    (args,) = [a for t, a in plan.calls if t == "aws:index/getAvailabilityZones:getAvailabilityZones"]
    assert {"name": "zone-type", "values": ["availability-zone"]} in args["filters"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"addons": {"coredns": "v1.11.1-eksbuild.4"}},
            f"{P}.cluster.addons.coredns: v1.11.1-eksbuild.4 is not a build recorded for Kubernetes 1.35 "
            "(recorded: v1.14.3-eksbuild.3, v1.14.2-eksbuild.4); EKS refuses a version it does not list",
        ),
        (
            {"kubernetes_version": "1.36"},
            f"{P}.cluster.kubernetes_version: '1.36' has no EKS add-on builds recorded (recorded: 1.35), "
            "and EKS refuses add-on builds it does not list for the cluster's minor; fix: record them from "
            "EKS with `aiplat addon-versions --kubernetes-version 1.36`",
        ),
    ],
    ids=["unlisted-build", "unrecorded-minor"],
)
def test_addon_builds_must_be_recorded_for_the_minor(stack_config, monitors, change, expected) -> None:
    raw = stack_config("prod-us-train")
    raw["cluster"].update(change)
    with pytest.raises(ConfigErrors) as info:
        _plan(raw)
    assert expected in str(info.value), str(info.value)
    (monitor,) = monitors
    assert monitor.recorded == []  # a config-only rule: refused before the provider


def test_unverified_builds_are_flagged_in_the_plan(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    flagged = {f.field.rsplit(".", 1)[-1] for f in plan.findings if f.rule == "addon-versions-known"}
    # the builds only seen in third-party configs for 1.35, none of those an AWS page lists
    assert flagged == {"vpc_cni", "aws_ebs_csi_driver", "eks_pod_identity_agent", "eks_node_monitoring_agent"}
    assert all(
        "`aiplat addon-versions --kubernetes-version 1.35`" in (f.fix or "")
        for f in plan.findings
        if f.rule == "addon-versions-known"
    )


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "cluster.endpoint_public_access_cidrs",
            ["1.0.0.0/16", "2.0.0.0/16"],
            [
                "cluster.endpoint_public_access_cidrs",
                "cover 131072 public addresses, more than a /20 (4096)",
            ],
        ),
        (
            "storage.trainer",
            {"namespace": "training", "service_account": "trainer", "prefix": "release"},
            ["aiplat:platform.storage", "trainer.prefix 'release' would let training jobs write release/"],
        ),
        (
            "storage.inference",
            {"namespace": "inference", "service_account": "inference", "prefix": "trainer"},
            ["inference.prefix 'trainer' is outside release/"],
        ),
        (
            "cluster.access_entries",
            {"break-glass": {"role_name": "x", "policy": "AmazonEKSViewPolicy"}},
            ["the access entry name 'break-glass' is the platform's own"],
        ),
        (
            "cluster.access_entries",
            {"ops": {"role_name": "x", "principal_arn": "arn:aws:iam::123456789012:role/x"}},
            ["cluster.access_entries.ops", "give exactly one of principal_arn and role_name"],
        ),
        (
            "security.audit",
            {"trail": "existing"},
            ["security.audit", "trail is 'existing' but existing_trail is not set"],
        ),
    ],
    ids=[
        "cidrs-too-wide",
        "trainer-release",
        "inference-outside-release",
        "reserved-entry",
        "two-principals",
        "no-trail",
    ],
)
def test_security_config_refusals(stack_config, path: str, value: object, expected: list[str]) -> None:
    from tests.conftest import assert_rejected

    assert_rejected(stack_config("prod-us-train"), path, value, expected)


def test_no_cluster_admin_entry_is_refused(stack_config, monitors) -> None:
    raw = stack_config("prod-us-train")
    raw["cluster"]["access_entries"] = {
        "ops": {"role_name": "ops", "policy": "AmazonEKSClusterAdminPolicy", "namespaces": ["ops"]}
    }
    with pytest.raises(ConfigErrors) as info:
        _plan(raw)
    assert (
        f"{P}.cluster.access_entries: no entry has policy AmazonEKSClusterAdminPolicy for the whole cluster"
        in str(info.value)
    )
    (monitor,) = monitors
    assert monitor.recorded == []
