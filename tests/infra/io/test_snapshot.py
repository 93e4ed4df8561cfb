"""The offline AWS facts are AWS's own data as moto bundles it, not numbers of ours."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import pytest

from infra.io import snapshot as awsdata
from infra.io.regions import known_regions


def _raw(name: str) -> dict:
    path = resources.files("moto.ec2.resources").joinpath("instance_types.json.gz")
    with path.open("rb") as fh, gzip.open(fh, "rt") as text:
        return json.load(text)[name]


@pytest.mark.parametrize("itype", ["p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "g5.xlarge", "m6i.xlarge"])
def test_facts_follow_the_snapshot(itype: str) -> None:
    raw = _raw(itype)
    facts = awsdata.instance_facts(itype)
    assert facts is not None
    assert facts.gpu_count == sum(g["Count"] for g in raw.get("GpuInfo", {}).get("Gpus", []))
    assert facts.efa_supported == raw["NetworkInfo"].get("EfaSupported", False)
    assert facts.max_efa_interfaces == raw["NetworkInfo"].get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
    assert facts.max_network_cards == raw["NetworkInfo"]["MaximumNetworkCards"]
    assert len(facts.network_cards) == len(raw["NetworkInfo"]["NetworkCards"])


def test_known_gpu_shapes() -> None:
    # Sanity of the snapshot against AWS's published specs (EFA docs): p5 has 32 EFA interfaces, p4d 4.
    assert awsdata.instance_facts("p5.48xlarge").max_efa_interfaces == 32
    assert awsdata.instance_facts("p4d.24xlarge").max_efa_interfaces == 4
    assert awsdata.instance_facts("p5.48xlarge").gpu_count == 8
    assert awsdata.instance_facts("no-such.type") is None


def test_regions_have_offerings() -> None:
    assert {"us-east-1", "us-west-2", "ap-east-1", "ap-southeast-1"} <= set(awsdata.regions_with_offerings())
    assert set(awsdata.regions_with_offerings()) <= known_regions()


def test_offerings_by_az_are_consistent_with_region() -> None:
    by_az = awsdata.offered_by_az("us-east-1")
    assert all(az.startswith("us-east-1") for az in by_az)
    union = set().union(*by_az.values())
    assert union == set(awsdata.offered_in_region("us-east-1"))
    assert awsdata.azs_offering("us-east-1", "p5.48xlarge")


def test_availability_zones_have_ids() -> None:
    zones = awsdata.availability_zones("ap-east-1")
    assert [z.name for z in zones] == sorted(awsdata.offered_by_az("ap-east-1"))
    assert all(z.zone_id.startswith("ape1-az") for z in zones)
