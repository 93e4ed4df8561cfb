"""``aiplat addon-versions``: DescribeAddonVersions (botocore Stubber: moto has no EKS add-on API) to rows
that the version table accepts."""

from __future__ import annotations

import datetime

import boto3
import pytest
from botocore.stub import Stubber

from infra.cluster import addon_versions
from infra.cluster.addon_versions import AddonBuild
from infra.ops.addon_versions import addon_builds, table_rows


def _answer(addon: str, versions: list[tuple[str, list[str]]]) -> dict:
    return {
        "addons": [
            {
                "addonName": addon,
                "type": "networking",
                "addonVersions": [
                    {"addonVersion": v, "compatibilities": [{"clusterVersion": c} for c in clusters]}
                    for v, clusters in versions
                ],
            }
        ]
    }


@pytest.fixture
def eks():
    client = boto3.client("eks", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub


def test_builds_for_the_minor_become_table_rows(eks) -> None:
    client, stub = eks
    stub.add_response(
        "describe_addon_versions",
        _answer("coredns", [("v1.14.3-eksbuild.3", ["1.35", "1.36"]), ("v1.13.2-eksbuild.11", ["1.34"])]),
        {"kubernetesVersion": "1.35", "addonName": "coredns"},
    )
    builds = addon_builds(client, "1.35", ["coredns"])
    assert builds == {"coredns": ["v1.14.3-eksbuild.3"]}  # the 1.34-only build is left out
    rows = table_rows("1.35", builds, "us-east-1", datetime.date(2026, 11, 30))
    # the printed rows are valid entries of the table
    table = eval("{" + rows + "}", {"AddonBuild": AddonBuild})  # noqa: S307 (our own output)
    (build,) = table["1.35"]["coredns"]
    assert build.version == "v1.14.3-eksbuild.3" and build.seen == "2026-11-30" and build.aws_published
    assert "describe-addon-versions --kubernetes-version 1.35 (us-east-1)" in build.source


def test_every_platform_addon_is_asked_for(eks) -> None:
    client, stub = eks
    for addon in addon_versions.ADDON_NAMES:
        stub.add_response(
            "describe_addon_versions",
            _answer(addon, []),
            {"kubernetesVersion": "1.36", "addonName": addon},
        )
    assert addon_builds(client, "1.36") == {a: [] for a in addon_versions.ADDON_NAMES}
    stub.assert_no_pending_responses()
