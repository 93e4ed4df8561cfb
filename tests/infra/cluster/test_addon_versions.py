"""The add-on data file (infra/cluster/data/addon_builds.json): well-formed, sourced, dated, complete per
minor."""

from __future__ import annotations

import datetime
import re

import pytest

from infra.cluster import addon_versions

ROWS = [
    (minor, addon, build)
    for minor, table in addon_versions.recorded().items()
    for addon, builds in table.items()
    for build in builds
]


@pytest.mark.parametrize("minor", sorted(addon_versions.recorded()))
def test_every_addon_has_builds_for_every_recorded_minor(minor: str) -> None:
    assert set(addon_versions.recorded()[minor]) == set(addon_versions.ADDON_NAMES)
    for addon in addon_versions.ADDON_NAMES:
        versions = [b.version for b in addon_versions.builds(minor, addon)]
        assert versions and len(set(versions)) == len(versions), addon


@pytest.mark.parametrize(("minor", "addon", "build"), ROWS, ids=[f"{m}-{a}-{b.version}" for m, a, b in ROWS])
def test_each_build_is_sourced_and_dated(minor: str, addon: str, build: addon_versions.AddonBuild) -> None:
    assert re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", build.version)
    assert build.source and datetime.date.fromisoformat(build.date)
    if build.aws_published:
        # an AWS documentation host, or AWS's own API (rows written by `aiplat addon-versions`)
        assert "amazon" in build.source or "eks:DescribeAddonVersions" in build.source
    if addon == "kube-proxy":
        assert build.version.startswith(f"v{minor}.")


def test_lookup() -> None:
    assert addon_versions.default_version("1.35", "kube-proxy") == "v1.35.3-eksbuild.13"
    assert addon_versions.find("1.35", "coredns", "v1.14.2-eksbuild.4") is not None
    assert addon_versions.find("1.35", "coredns", "v9.9.9-eksbuild.1") is None
    assert addon_versions.default_version("1.20", "coredns") is None
