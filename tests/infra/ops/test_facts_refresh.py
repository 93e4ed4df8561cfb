"""``aiplat facts refresh``: EC2's answers (a moto server over HTTP) written as a dated facts file, and the
offline plan reading that file, and naming it, instead of moto's bundled snapshot."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from infra.cli.main import main
from infra.core.errors import ConfigErrors
from infra.io import snapshot
from infra.io.facts_file import FACTS_DIR_ENV, facts_path, read_facts_file
from infra.plan import runner
from tests.conftest import REPO

REGION = "eu-west-1"


def _pages(client, op: str, key: str, **kwargs) -> list[dict]:
    return [item for page in client.get_paginator(op).paginate(**kwargs) for item in page[key]]


def test_refresh_writes_what_ec2_answered(aws, tmp_path, capsys) -> None:
    ec2 = aws.client("ec2", REGION)
    assert main(["facts", "refresh", "--region", REGION, "--out-dir", str(tmp_path)]) == 0

    facts = read_facts_file(REGION, tmp_path)
    assert facts is not None
    assert str(facts_path(REGION, tmp_path)) in capsys.readouterr().out
    types = _pages(ec2, "describe_instance_types", "InstanceTypes")
    assert set(facts.instance_types) == {t["InstanceType"] for t in types}
    assert facts.instance_types["p4d.24xlarge"] == next(
        t for t in types if t["InstanceType"] == "p4d.24xlarge"
    )
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    assert [(z.name, z.zone_id) for z in facts.zones] == sorted((z["ZoneName"], z["ZoneId"]) for z in zones)
    region_rows = _pages(
        ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="region"
    )
    assert facts.region_offerings == {o["InstanceType"] for o in region_rows}
    az_rows = _pages(
        ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone"
    )
    assert {(t, az) for az, ts in facts.zone_offerings.items() for t in ts} == {
        (o["InstanceType"], o["Location"]) for o in az_rows
    }
    # dated and attributed: today (UTC), and the endpoint that answered
    assert facts.fetched_at.date() == dt.datetime.now(dt.UTC).date()
    assert facts.endpoint == aws.endpoint
    assert facts.label == f"AWS facts {facts.path}, read from {aws.endpoint} on {facts.fetched_at:%Y-%m-%d}"


def test_refresh_reads_every_page(monkeypatch) -> None:
    """moto answers these calls in one page; EC2 pages them (NextToken): botocore's Stubber plays two."""
    import boto3
    from botocore.stub import Stubber

    from infra.io.facts_refresh import read_region_snapshot

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    p4d, p5 = (snapshot.describe_instance_type(t) for t in ("p4d.24xlarge", "p5.48xlarge"))
    zone = {
        "ZoneName": "eu-west-1a",
        "ZoneId": "euw1-az3",
        "ZoneType": "availability-zone",
        "State": "available",
    }

    def offering(t: str, loc: str, kind: str) -> dict:
        return {"InstanceType": t, "Location": loc, "LocationType": kind}

    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [zone]})
        for kind, loc in (("availability-zone", "eu-west-1a"), ("region", REGION)):
            if kind == "region":
                stub.add_response(
                    "describe_instance_types", {"InstanceTypes": [p4d], "NextToken": "page2"}, {}
                )
                stub.add_response("describe_instance_types", {"InstanceTypes": [p5]}, {"NextToken": "page2"})
            stub.add_response(
                "describe_instance_type_offerings",
                {"InstanceTypeOfferings": [offering("p4d.24xlarge", loc, kind)], "NextToken": "t"},
                {"LocationType": kind},
            )
            stub.add_response(
                "describe_instance_type_offerings",
                {"InstanceTypeOfferings": [offering("p5.48xlarge", loc, kind)]},
                {"LocationType": kind, "NextToken": "t"},
            )
        facts = read_region_snapshot(ec2, REGION)
        stub.assert_no_pending_responses()
    assert set(facts.instance_types) == {"p4d.24xlarge", "p5.48xlarge"}
    assert facts.region_offerings == {"p4d.24xlarge", "p5.48xlarge"}
    assert facts.zone_offerings == {"eu-west-1a": frozenset({"p4d.24xlarge", "p5.48xlarge"})}


def test_refresh_without_credentials_is_one_line_exit_6(tmp_path, monkeypatch, capsys) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    assert main(["facts", "refresh", "--region", REGION, "--out-dir", str(tmp_path)]) == 6

    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ec2:DescribeAvailabilityZones"), err
    assert "NoCredentialsError" in err[0] and "fix: sign in" in err[0]
    assert not facts_path(REGION, tmp_path).exists()


def test_refresh_refuses_a_region_that_is_not_one(tmp_path, capsys) -> None:
    assert main(["facts", "refresh", "--region", "eu-west-9", "--out-dir", str(tmp_path)]) == 2
    assert (
        "error: --region: 'eu-west-9' is not an AWS region; fix: did you mean eu-west-3, eu-west-2, "
        "eu-west-1?" in capsys.readouterr().err
    )


def _eu_stack(folder: Path, gpu_type: str) -> Path:
    """dev-us-train moved to eu-west-1 with ``gpu_type`` on its GPU pool."""
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.dev-us-train.yaml").read_text())
    platform = doc["config"]["aiplat:platform"]
    platform["region"] = REGION
    platform["node_pools"]["gpu"]["instance_type"] = gpu_type
    path = folder / "Pulumi.eu-dev.yaml"
    path.write_text(yaml.safe_dump(doc))
    return folder


def test_offline_plan_uses_the_refreshed_file_for_its_region(aws, tmp_path, monkeypatch) -> None:
    facts_dir = tmp_path / "facts"
    monkeypatch.setenv(FACTS_DIR_ENV, str(facts_dir))
    assert main(["facts", "refresh", "--region", REGION]) == 0  # into $AIPLAT_FACTS_DIR
    path = facts_path(REGION, facts_dir)
    # The snapshot offers g5.xlarge in eu-west-1; in this account's (edited) answer it is gone.
    assert "g5.xlarge" in snapshot.offered_in_region(REGION)
    raw = json.loads(path.read_text())
    raw["offerings"]["region"].remove("g5.xlarge")
    for types in raw["offerings"]["availability-zone"].values():
        if "g5.xlarge" in types:
            types.remove("g5.xlarge")
    path.write_text(json.dumps(raw))
    stacks = _eu_stack(tmp_path, "g5.xlarge")

    with pytest.raises(ConfigErrors) as info:
        runner.run_plan("eu-dev", None, stacks)

    message = str(info.value)
    assert "aiplat:platform.node_pools.gpu.instance_type: 'g5.xlarge' is not offered in eu-west-1" in message
    assert f"[data: AWS facts {path}, read from {aws.endpoint} on " in message
    assert "moto" not in message


def test_not_offered_gpu_type_names_the_snapshot_and_suggests_gpu_types(tmp_path) -> None:
    # g6e.12xlarge is not in moto's eu-west-1 offerings (the new user's case)
    assert "g6e.12xlarge" not in snapshot.offered_in_region(REGION)
    stacks = _eu_stack(tmp_path, "g6e.12xlarge")

    with pytest.raises(ConfigErrors) as info:
        runner.run_plan("eu-dev", None, stacks)

    (line,) = [x for x in str(info.value).splitlines() if "instance_type" in x]
    built = snapshot.SNAPSHOT_BUILT[snapshot.metadata.version("moto")]
    assert (
        f"[data: moto 5.2.5's bundled AWS snapshot, built {built}; current facts: aiplat facts refresh "
        in line
    )
    suggested = line.split("e.g. ", 1)[1].split(" (see", 1)[0].split(", ")
    assert len(suggested) == 3
    for itype in suggested:
        assert itype in snapshot.offered_in_region(REGION)
        facts = snapshot.instance_facts(itype, REGION)
        assert facts is not None and facts.gpu_count > 0, itype


def test_the_installed_moto_has_a_recorded_snapshot_date() -> None:
    # a moto upgrade must record its snapshot's date, or refusals say the date is unknown
    assert snapshot.metadata.version("moto") in snapshot.SNAPSHOT_BUILT
    assert "date unknown" not in snapshot.snapshot_label(REGION)


def test_a_damaged_facts_file_is_refused_with_the_file_and_fix(tmp_path) -> None:
    path = facts_path(REGION, tmp_path)
    path.write_text(json.dumps({"format": 1, "region": "us-east-1"}))
    with pytest.raises(ConfigErrors) as info:
        read_facts_file(REGION, tmp_path)
    assert str(info.value) == (
        f"{path}: region: 'us-east-1' but the file is named for 'eu-west-1'; fix: run aiplat facts refresh "
        f"--region eu-west-1 again, or delete {path} to use moto's snapshot"
    )
