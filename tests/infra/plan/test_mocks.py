"""The offline data source answers the provider's data calls with the snapshot's values."""

from __future__ import annotations

import fnmatch

import pulumi
import pytest

from infra.core.errors import DataSourceError
from infra.io import snapshot as awsdata
from infra.plan.mocks import AwsSnapshotMocks


def _call(mocks: AwsSnapshotMocks, token: str, **args):
    return mocks.call(pulumi.runtime.MockCallArgs(token=token, args=args, provider=""))


def test_instance_type_answer_matches_snapshot() -> None:
    mocks = AwsSnapshotMocks("us-east-1")
    out = _call(mocks, "aws:ec2/getInstanceType:getInstanceType", instanceType="p5.48xlarge")
    raw = awsdata.describe_instance_type("p5.48xlarge")
    assert out["efaMaximumInterfaces"] == raw["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"]
    assert out["maximumNetworkCards"] == raw["NetworkInfo"]["MaximumNetworkCards"]
    assert out["gpuses"][0]["count"] == raw["GpuInfo"]["Gpus"][0]["Count"]
    assert [c["index"] for c in out["networkCards"]] == [
        c["NetworkCardIndex"] for c in raw["NetworkInfo"]["NetworkCards"]
    ]


def test_offerings_filter_by_type_and_location() -> None:
    mocks = AwsSnapshotMocks("us-east-1")
    out = _call(
        mocks,
        "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings",
        locationType="availability-zone",
        filters=[{"name": "instance-type", "values": ["p5en.48xlarge"]}],
    )
    assert set(out["instanceTypes"]) == {"p5en.48xlarge"}
    assert tuple(out["locations"]) == awsdata.azs_offering("us-east-1", "p5en.48xlarge")


def test_availability_zones_for_region_argument() -> None:
    out = _call(
        AwsSnapshotMocks("us-east-1"),
        "aws:index/getAvailabilityZones:getAvailabilityZones",
        region="ap-east-1",
    )
    assert out["names"] == [z.name for z in awsdata.availability_zones("ap-east-1")]


def test_unknown_instance_type_is_an_error() -> None:
    with pytest.raises(DataSourceError, match="InvalidInstanceType"):
        _call(
            AwsSnapshotMocks("us-east-1"), "aws:ec2/getInstanceType:getInstanceType", instanceType="x9.huge"
        )


def test_unanswerable_call_names_the_call() -> None:
    with pytest.raises(DataSourceError, match="aws:ec2/getAmi:getAmi"):
        _call(AwsSnapshotMocks("us-east-1"), "aws:ec2/getAmi:getAmi", owners=["amazon"])


def test_zone_filters_apply_to_the_snapshot_zones() -> None:
    mocks = AwsSnapshotMocks("us-east-1")
    token = "aws:index/getAvailabilityZones:getAvailabilityZones"
    everything = _call(mocks, token)
    plain = _call(mocks, token, filters=[{"name": "zone-type", "values": ["availability-zone"]}])
    assert plain["names"] == everything["names"] == [z.name for z in awsdata.availability_zones("us-east-1")]
    assert _call(mocks, token, filters=[{"name": "zone-type", "values": ["local-zone"]}])["names"] == []
    no_az3 = _call(mocks, token, excludeZoneIds=["use1-az3"])
    assert "use1-az3" not in no_az3["zoneIds"] and len(no_az3["zoneIds"]) == len(everything["zoneIds"]) - 1
    with pytest.raises(DataSourceError, match="filter 'region-name'"):
        _call(mocks, token, filters=[{"name": "region-name", "values": ["us-east-1"]}])


def test_karpenter_families_are_expanded_before_offerings_are_asked(plan_stack) -> None:
    # DescribeInstanceTypes documents wildcards in its instance-type filter; offerings are then asked by
    # exact type name, as preflight does with boto3 (no reliance on wildcards in the offerings filter).
    plan = plan_stack("prod-hk-infer")
    expanded = [a for t, a in plan.calls if t == "aws:ec2/getInstanceTypes:getInstanceTypes"]
    assert len(expanded) == 1
    patterns = expanded[0]["filters"][0]["values"]
    assert patterns and all(p.endswith(".*") for p in patterns)
    offerings = [a for t, a in plan.calls if t == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"]
    for args in offerings:
        for f in args.get("filters") or []:
            assert not any("*" in v or "?" in v for v in f["values"]), f
    # one of them asks for every type of the families the snapshot has, by name
    names = awsdata.instance_type_names()
    family = sorted(t for t in names if any(fnmatch.fnmatchcase(t, p) for p in patterns))
    asked = [f["values"] for a in offerings for f in a.get("filters") or [] if f["name"] == "instance-type"]
    assert family in asked
