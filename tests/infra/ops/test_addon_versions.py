"""``aiplat addon-versions``: DescribeAddonVersions and DescribeClusterVersions (botocore Stubber, which
checks every request and answer against the EKS service model: moto 5.2.5 has neither API) written into the
add-on builds and the calendar data files; the builds then let the minor plan. Before that the plan refuses
the minor and names the command."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from infra.cli.main import main
from infra.cluster import addon_versions, calendar
from infra.core.errors import ConfigErrors
from infra.ops.addon_versions import addon_builds
from infra.plan import runner
from infra.schema.parse import parse_platform_config

MINOR = "1.36"
# One DescribeAddonVersions answer per add-on (see its "about")
ANSWERS = json.loads((Path(__file__).parent / "data" / "describe_addon_versions_1.36.json").read_text())
# DescribeClusterVersions for one minor, shaped as the API reference's ClusterVersionInformation
# (https://docs.aws.amazon.com/eks/latest/APIReference/API_ClusterVersionInformation.html); dates illustrative
VERSION_136 = {
    "clusterVersion": MINOR,
    "clusterType": "eks",
    "defaultPlatformVersion": "eks.1",
    "defaultVersion": False,
    "releaseDate": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    "endOfStandardSupportDate": dt.datetime(2028, 2, 1, tzinfo=dt.UTC),
    "endOfExtendedSupportDate": dt.datetime(2029, 2, 1, tzinfo=dt.UTC),
    "status": "STANDARD_SUPPORT",
    "versionStatus": "STANDARD_SUPPORT",
    "kubernetesPatchVersion": "1.36.0",
}


@pytest.fixture
def eks():
    client = boto3.client("eks", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub


def _expect_all(stub: Stubber, versions: list[dict] | None = None) -> None:
    for addon in addon_versions.ADDON_NAMES:
        stub.add_response(
            "describe_addon_versions",
            ANSWERS["responses"][addon],
            {"kubernetesVersion": MINOR, "addonName": addon},
        )
    if versions is not None:
        stub.add_response(
            "describe_cluster_versions", {"clusterVersions": versions}, {"clusterVersions": [MINOR]}
        )


def test_builds_for_the_minor_default_first(eks) -> None:
    client, stub = eks
    _expect_all(stub)
    builds = addon_builds(client, MINOR)
    stub.assert_no_pending_responses()
    # kube-proxy: EKS marks the older build default for 1.36, so it comes first; the 1.35 build is left out
    answered = ANSWERS["responses"]["kube-proxy"]["addons"][0]["addonVersions"]
    default = next(
        v["addonVersion"]
        for v in answered
        if any(c["clusterVersion"] == MINOR and c["defaultVersion"] for c in v["compatibilities"])
    )
    assert builds["kube-proxy"][0] == default
    assert all(v.startswith("v1.36.") for v in builds["kube-proxy"])
    assert "v1.20.1-eksbuild.3" not in builds["vpc-cni"]  # listed for 1.33 only


@pytest.fixture
def recorded_here(tmp_path, monkeypatch) -> Path:
    """The add-on data file the plan reads, a copy of the shipped one under tmp_path."""
    data = tmp_path / addon_versions.DATA_FILE.name
    data.write_text(addon_versions.DATA_FILE.read_text())
    monkeypatch.setattr(addon_versions, "DATA_FILE", data)
    addon_versions.reload()
    yield data
    addon_versions.reload()


def test_refresh_records_the_minor_and_then_it_plans(
    aws, eks, recorded_here, stack_config, monkeypatch, capsys
) -> None:
    raw = stack_config("dev-us-train")
    raw["cluster"]["kubernetes_version"] = MINOR
    cfg = parse_platform_config(raw)

    with pytest.raises(ConfigErrors) as refused:
        runner.run_plan("dev-us-train", cfg)
    message = str(refused.value)
    assert "cluster.kubernetes_version: '1.36' has no EKS add-on builds recorded" in message
    assert "record them from EKS with `aiplat addon-versions --kubernetes-version 1.36`" in message
    assert ".py" not in message

    client, stub = eks
    _expect_all(stub, [VERSION_136])
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, region: client if service == "eks" else aws.client(service, region),
    )
    out_dir = recorded_here.parent
    assert main(["addon-versions", "--kubernetes-version", MINOR, "--out-dir", str(out_dir)]) == 0
    stub.assert_no_pending_responses()
    printed = " ".join(capsys.readouterr().out.split())
    calendar_file = out_dir / calendar.CALENDAR_FILE.name
    assert f"wrote {recorded_here} and {calendar_file} ({MINOR})" in printed

    # the calendar: the dates EKS answered, the shipped minors kept
    recorded = calendar.from_document(json.loads(calendar_file.read_text()))
    assert set(calendar.CALENDAR) < set(recorded)
    row = recorded[MINOR]
    assert (row.standard_until, row.extended_until) == (
        VERSION_136["endOfStandardSupportDate"].date(),
        VERSION_136["endOfExtendedSupportDate"].date(),
    )
    assert row.source.startswith("eks:DescribeClusterVersions clusterVersions=1.36 (us-east-1")

    doc = json.loads(recorded_here.read_text())
    assert "1.35" in doc["minors"]  # other minors kept
    written = doc["minors"][MINOR]
    assert set(written) == set(addon_versions.ADDON_NAMES)
    for builds in written.values():
        for b in builds:
            assert "eks:DescribeAddonVersions kubernetesVersion=1.36 (us-east-1" in b["source"]
            assert b["date"] and b["aws_published"] is True

    plan = runner.run_plan("dev-us-train", cfg)
    addons = {
        r.inputs["addonName"]: r.inputs["addonVersion"]
        for r in plan.resources
        if r.type == "aws:eks/addon:Addon"
    }
    assert addons == {a: builds[0]["version"] for a, builds in written.items()}
    assert not [f for f in plan.findings if f.rule == "addon-versions-known"]


def test_an_addon_without_a_build_writes_nothing(aws, eks, recorded_here, monkeypatch, capsys) -> None:
    client, stub = eks
    before = recorded_here.read_text()
    for addon in addon_versions.ADDON_NAMES:
        answer = ANSWERS["responses"][addon] if addon != "coredns" else {"addons": []}
        stub.add_response("describe_addon_versions", answer, {"kubernetesVersion": MINOR, "addonName": addon})
    stub.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": [MINOR]})
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, region: client if service == "eks" else aws.client(service, region),
    )
    assert (
        main(["addon-versions", "--kubernetes-version", MINOR, "--out-dir", str(recorded_here.parent)]) == 1
    )
    err = " ".join(capsys.readouterr().err.split())
    assert "coredns: EKS in us-east-1 lists no build for Kubernetes 1.36, nothing written" in err
    assert recorded_here.read_text() == before
    assert not (recorded_here.parent / calendar.CALENDAR_FILE.name).exists()
