"""Plan-time refusal of node pool configs that would fail at deploy time, each with its message.

Every case starts from the real prod-us-train stack file, changes one thing, and runs the real program
under mocks: the error must name the field, the value and the fix, and nothing may be registered.
"""

from __future__ import annotations

import pytest

from infra.core.errors import ConfigErrors
from infra.io import snapshot as awsdata
from infra.plan import runner
from infra.schema.parse import parse_platform_config
from tests.support.config_cases import FACTS, RULES, SCHEMA, assert_refused, update_pool

P = "aiplat:platform.node_pools"
CR = "cr-0123456789abcdef0"


def _missing_az(itype: str) -> str:
    """A us-east-1 zone that does not offer ``itype``, found from the AWS data."""
    offered = set(awsdata.azs_offering("us-east-1", itype))
    return next(z.name for z in awsdata.availability_zones("us-east-1") if z.name not in offered)


P4D_MISSING = _missing_az("p4d.24xlarge")


def _reserved(az: str, placement_group: str | None = "train-pg", placement: str = "cluster"):
    reservation = {"id": CR, "availability_zone": az}
    if placement_group:
        reservation["placement_group"] = placement_group
    return update_pool(
        "train", capacity_type="capacity_block", capacity_reservation=reservation, placement=placement
    )


def _p4d_in_missing_az(c: dict) -> None:
    zones = sorted({"us-east-1a", "us-east-1b", P4D_MISSING})
    c["network"]["availability_zones"] = zones
    c["node_pools"]["train"].update(instance_type="p4d.24xlarge", availability_zones=[P4D_MISSING])


def _p4d_outside_the_vpc(c: dict) -> None:
    # the VPC's zones are exactly those that do not offer p4d.24xlarge
    c["network"].update(availability_zones=[P4D_MISSING, P4D_MISSING_2], az_count=2)
    c["node_pools"]["train"].update(instance_type="p4d.24xlarge", availability_zones=[P4D_MISSING])


P4D_MISSING_2 = next(
    z.name
    for z in awsdata.availability_zones("us-east-1")
    if z.name != P4D_MISSING and z.name not in awsdata.azs_offering("us-east-1", "p4d.24xlarge")
)
P4D_OFFERED = ", ".join(awsdata.azs_offering("us-east-1", "p4d.24xlarge"))


CASES = [
    (
        update_pool("train", instance_type="g5.xlarge", gpus_per_node=None),
        FACTS,
        f"{P}.train.efa: true but g5.xlarge does not support EFA; fix: use an EFA type",
    ),
    (
        update_pool("train", efa_interfaces=33),
        FACTS,
        f"{P}.train.efa_interfaces: 33 but p5.48xlarge supports at most 32 EFA interfaces; "
        "fix: set efa_interfaces to at most 32",
    ),
    (
        update_pool("train", availability_zones=["us-east-1a", "us-east-1b"]),
        FACTS,
        f"{P}.train.availability_zones: the pool uses EFA but spans 2 zones/subnets "
        "['us-east-1a', 'us-east-1b']",
    ),
    (
        update_pool("train", availability_zones=None),
        FACTS,
        f"{P}.train.availability_zones: the pool uses EFA but spans 3 zones/subnets",
    ),
    (
        _p4d_in_missing_az,
        FACTS,
        f"{P}.train.availability_zones: p4d.24xlarge is not offered in {P4D_MISSING}; "
        "fix: use a zone that offers it",
    ),
    (
        # the case: the bundled offering data names the region's zones that have the type even
        # when none of them is in this VPC (it used to say "none in this VPC")
        _p4d_outside_the_vpc,
        FACTS,
        f"{P}.train.availability_zones: p4d.24xlarge is not offered in {P4D_MISSING}; "
        f"fix: use a zone that offers it: {P4D_OFFERED} (none in this VPC: add it to "
        "network.availability_zones too)",
    ),
    (
        update_pool("train", availability_zones=["us-east-1f"]),
        FACTS,
        f"{P}.train.availability_zones: 'us-east-1f' is not one of the VPC's zones",
    ),
    (
        _reserved("us-east-1b"),
        FACTS,
        f"{P}.train.capacity_reservation.availability_zone: reservation {CR} is in us-east-1b but the pool's "
        "placement group and nodes are in ['us-east-1a']; fix: set availability_zones: [us-east-1b]",
    ),
    (
        _reserved("us-east-1a", placement_group=None),
        FACTS,
        f"{P}.train.placement: cluster with capacity reservation {CR} "
        "but no capacity_reservation.placement_group",
    ),
    (
        update_pool("train", min_size=5),
        SCHEMA,
        f"{P}.train: min_size 5 is greater than max_size 4; fix: make min_size <= max_size",
    ),
    (
        update_pool("train", gpus_per_node=4),
        FACTS,
        f"{P}.train.gpus_per_node: 4 but p5.48xlarge has 8 GPUs; fix: set gpus_per_node: 8",
    ),
    (
        lambda c: c["node_pools"]["system"].update(placement="cluster"),
        FACTS,
        f"{P}.system.availability_zones: the pool uses a cluster placement group but spans",
    ),
    (
        update_pool("train", efa=False, efa_interfaces=4),
        SCHEMA,
        f"{P}.train: efa_interfaces is 4 but efa is false",
    ),
    (
        update_pool("train", capacity_type="capacity_reservation"),
        SCHEMA,
        f"{P}.train: capacity_type capacity_reservation needs capacity_reservation",
    ),
    (
        lambda c: c["network"].update(nat="none", interface_endpoints=["logs"]),
        SCHEMA,
        "aiplat:platform.network: nat is 'none' but interface_endpoints lacks "
        "['ecr.api', 'ecr.dkr', 'sts', 'ec2']",
    ),
    (
        # the endpoints are all there, but every cluster-service chart pulls from a public registry
        lambda c: c["network"].update(nat="none"),
        RULES,
        "aiplat:platform.network.nat: none, but cluster_services.kubernetes_access is in_vpc: the "
        "cluster services' Helm charts pull their images from public registries (quay.io, "
        "registry.k8s.io, nvcr.io, public.ecr.aws, ghcr.io, docker.io) that a VPC without a NAT gateway "
        "cannot reach (the ECR endpoints serve private ECR only), so every release would wait in "
        "ImagePullBackOff; fix: set network.nat: single (or one_per_az), or "
        "cluster_services.kubernetes_access: skip for an AWS-only stack (mirroring the images through "
        "ECR pull-through cache rules is not supported yet) (see "
        "https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html)",
    ),
    (
        lambda c: c["cluster"].update(endpoint_public_access_cidrs=["0.0.0.0/0"]),
        SCHEMA,
        "aiplat:platform.cluster.endpoint_public_access_cidrs: '0.0.0.0/0' opens the API endpoint "
        "to the internet; fix: list your VPN",
    ),
    (
        update_pool("train", instance_type="p5.48xlarg"),
        FACTS,
        f"{P}.train.instance_type: 'p5.48xlarg' is not offered in us-east-1; fix: use a GPU type with EFA "
        "and 8 GPUs offered there, e.g. p5.48xlarge",
    ),
    (
        lambda c: c.update(region="us-est-1"),
        RULES,
        "aiplat:platform.region: 'us-est-1' is not an AWS region; fix: did you mean 'us-west-1', 'us-east-1'",
    ),
    (
        # the case: a CPU pool far beyond EKS's "Nodes per managed node group" quota
        update_pool("system", max_size=10000),
        RULES,
        f"{P}.system.max_size: 10000 is more than EKS's quota 'Nodes per managed node group' (450); "
        "fix: set max_size to at most 450, or split the pool into several",
    ),
    (
        lambda c: c["node_pools"].update(
            # one pool more than the quota, whatever the stack has
            {
                f"cpu{i}": {"instance_type": "m6i.xlarge", "gpu": False}
                for i in range(31 - len(c["node_pools"]))
            }
        ),
        RULES,
        f"{P}: 31 pools, more than EKS's quota 'Managed node groups per cluster' (30)",
    ),
]
IDS = [
    "efa-unsupported",
    "too-many-interfaces",
    "efa-two-azs",
    "efa-all-azs",
    "type-not-in-az",
    "type-only-outside-vpc",
    "az-not-in-vpc",
    "reservation-other-az",
    "reservation-no-pg",
    "min-gt-max",
    "gpu-count",
    "cluster-pg-multi-az",
    "efa-interfaces-without-efa",
    "reservation-missing",
    "nat-none-no-endpoints",
    "nat-none-public-images",
    "public-endpoint-world",
    "type-misspelt",
    "region-misspelt",
    "pool-size-over-quota",
    "pools-over-quota",
]


@pytest.mark.parametrize(("mutate", "stage", "expected"), CASES, ids=IDS)
def test_bad_pool_config_is_refused_before_any_resource(
    stack_config, monitors, mutate, stage, expected
) -> None:
    raw = stack_config("prod-us-train")
    mutate(raw)
    assert_refused(raw, expected, monitors, stage)
    assert len(monitors) <= 1  # one program run: nothing else planned first


def test_capacity_block_pool_plans_without_created_placement_group(stack_config) -> None:
    raw = stack_config("prod-us-train")
    _reserved("us-east-1a")(raw)
    plan = runner.run_plan("prod-us-train", parse_platform_config(raw))
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "pool-train-lt")
    ng = plan.one("aws:eks/nodeGroup:NodeGroup", "pool-train-ng")
    assert ng.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationId": CR}
    assert lt.inputs["placement"] == {"groupName": "train-pg"}
    assert not plan.by_type("aws:ec2/placementGroup:PlacementGroup")
    assert len(lt.inputs["networkInterfaces"]) == 32


def test_odcr_with_auto_placement_uses_no_placement_group(stack_config) -> None:
    raw = stack_config("prod-us-train")
    update_pool(
        "train",
        capacity_type="capacity_reservation",
        capacity_reservation={"id": CR, "availability_zone": "us-east-1a"},
    )(raw)
    plan = runner.run_plan("prod-us-train", parse_platform_config(raw))
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "pool-train-lt")
    assert plan.one("aws:eks/nodeGroup:NodeGroup", "pool-train-ng").inputs["capacityType"] == "ON_DEMAND"
    assert "placement" not in lt.inputs and "instanceMarketOptions" not in lt.inputs
    assert (
        lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"]
        == CR
    )


def test_suggestions_for_a_type_not_offered_keep_efa_and_the_gpu_count(stack_config) -> None:
    # the case: prod-us-train's p5.48xlarge EFA pool moved to eu-central-1, where p5 is not offered
    raw = stack_config("prod-us-train")
    raw.update(region="eu-central-1")
    raw["network"]["vpc_cidr"] = "10.0.0.0/16"  # prod-us-train's own range is taken by prod-us-train
    raw["node_pools"]["train"]["availability_zones"] = ["eu-central-1a"]
    assert "p5.48xlarge" not in awsdata.offered_in_region("eu-central-1")
    with pytest.raises(ConfigErrors) as refused:
        runner.run_plan("prod-eu-train", parse_platform_config(raw))
    (line,) = [m for m in str(refused.value).splitlines() if f"{P}.train.instance_type" in m]
    assert "'p5.48xlarge' is not offered in eu-central-1; fix: use a GPU type with EFA and 8 GPUs" in line
    suggested = line.split("e.g. ", 1)[1].split(" (see ", 1)[0].split(", ")
    assert suggested and suggested[0].startswith("p4d")  # the P category first
    for itype in suggested:
        # moto's snapshot: offered there, EFA, as many GPUs as p5.48xlarge
        described = awsdata.describe_instance_type(itype)
        assert itype in awsdata.offered_in_region("eu-central-1")
        assert described["NetworkInfo"]["EfaSupported"]
        assert sum(g["Count"] for g in described["GpuInfo"]["Gpus"]) == 8
        assert not itype.startswith("g5.")
