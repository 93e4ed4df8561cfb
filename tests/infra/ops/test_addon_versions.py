"""``aiplat addon-versions``: DescribeAddonVersions (botocore Stubber, which checks every answer against the
EKS service model: moto 5.2.5 has no add-on API) written into the add-on data file, which then lets the
minor plan; before that the plan refuses the minor and names the command."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from infra.cli.main import main
from infra.cluster import addon_versions
from infra.core.errors import ConfigErrors
from infra.ops.addon_versions import addon_builds
from infra.plan import runner
from infra.schema.parse import parse_platform_config

MINOR = "1.36"
# One DescribeAddonVersions answer per add-on (see its "about")
ANSWERS = json.loads((Path(__file__).parent / "data" / "describe_addon_versions_1.36.json").read_text())


@pytest.fixture
def eks():
    client = boto3.client("eks", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub


def _expect_all(stub: Stubber) -> None:
    for addon in addon_versions.ADDON_NAMES:
        stub.add_response(
            "describe_addon_versions",
            ANSWERS["responses"][addon],
            {"kubernetesVersion": MINOR, "addonName": addon},
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
    data = tmp_path / "addon_builds.json"
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
    _expect_all(stub)
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, region: client if service == "eks" else aws.client(service, region),
    )
    assert main(["addon-versions", "--kubernetes-version", MINOR, "--out", str(recorded_here)]) == 0
    stub.assert_no_pending_responses()
    assert f"wrote {recorded_here} ({MINOR})" in " ".join(capsys.readouterr().out.split())

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
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, region: client if service == "eks" else aws.client(service, region),
    )
    assert main(["addon-versions", "--kubernetes-version", MINOR, "--out", str(recorded_here)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "coredns: EKS in us-east-1 lists no build for Kubernetes 1.36, nothing written" in err
    assert recorded_here.read_text() == before
