"""Physical names: region codes as AWS writes them in zone IDs, account-global prefixes, limits."""

from __future__ import annotations

import pytest

from infra.core import naming
from infra.core.naming import StackNames
from infra.io import snapshot


def test_region_code_is_the_zone_id_prefix_of_every_region_in_the_snapshot() -> None:
    # AWS's own short codes (use1-az1, apse1-az2, ...) for every region the snapshot knows.
    regions = snapshot.regions_with_offerings()
    assert len(regions) >= 20
    for region in regions:
        prefixes = {loc.split("-")[0] for _, loc in snapshot._offerings("availability-zone-id", region)}
        assert prefixes == {naming.region_code(region)}, region


@pytest.mark.parametrize(
    ("region", "code"), [("us-gov-west-1", "usgw1"), ("cn-northwest-1", "cnnw1"), ("ap-east-1", "ape1")]
)
def test_region_code_outside_the_snapshot(region: str, code: str) -> None:
    assert naming.region_code(region) == code


@pytest.mark.parametrize("bad", ["useast1", "us-east", "us-middle-1"])
def test_region_code_refuses_non_regions(bad: str) -> None:
    with pytest.raises(ValueError):
        naming.region_code(bad)


def test_two_regions_of_one_environment_get_different_global_names() -> None:
    hk = StackNames("aiplat", "prod", "infer", "ap-east-1")
    sg = StackNames("aiplat", "prod", "infer", "ap-southeast-1")
    assert hk.stack_prefix == sg.stack_prefix  # regional names may repeat: they live in other regions
    assert hk.role_name("eks-node") == "aiplat-prod-infer-ape1-eks-node"
    assert sg.role_name("eks-node") == "aiplat-prod-infer-apse1-eks-node"
    assert naming.trail_name(hk.global_prefix) != naming.trail_name(sg.global_prefix)


def test_long_role_names_are_cut_with_a_hash() -> None:
    names = StackNames("a" * 20, "prod", "infer", "ap-southeast-1")
    role = names.role_name("ebs-csi-driver-controller")
    assert len(role) <= naming.ROLE_NAME_MAX
    assert role != names.role_name("ebs-csi-driver-controller2")


@pytest.mark.parametrize(
    ("prefix", "purpose", "expected"),
    [("aiplat-prod-train", "ebs", "alias/aiplat-prod-train-ebs"), ("x", "data", "alias/x-data")],
)
def test_kms_alias(prefix: str, purpose: str, expected: str) -> None:
    assert naming.kms_alias(prefix, purpose) == expected


def test_reserved_alias_rejected() -> None:
    with pytest.raises(ValueError, match="reserved"):
        naming.kms_alias("aws-team", "data")
