"""The EFA device plugin chart's instance list per version (aws/eks-charts history) and the minimum version
for a set of EFA types."""

from __future__ import annotations

import re

import pytest

from infra.model import efa_plugin


def test_versions_are_recorded_in_release_order() -> None:
    # each version's list is the previous one's plus its changes, and the minimum version is the first
    # that lists a type: both read VERSIONS in order
    numbers = [tuple(int(p) for p in re.findall(r"\d+", v)) for v in efa_plugin.known_versions()]
    assert len(numbers) > 1 and all(a < b for a, b in zip(numbers, numbers[1:], strict=False))


@pytest.mark.parametrize(
    ("itype", "first"),
    [
        ("p4d.24xlarge", "v0.4.2"),
        ("p5.48xlarge", "v0.4.2"),
        ("p4de.24xlarge", "v0.4.4"),
        ("p5e.48xlarge", "v0.5.5"),
        ("g6e.48xlarge", "v0.5.5"),
        ("p5en.48xlarge", "v0.5.6"),
        ("p6-b200.48xlarge", "v0.5.9"),
        ("p6e-gb200.36xlarge", "v0.5.14"),
        ("p5.4xlarge", "v0.5.23"),
        ("p6-b300.48xlarge", "v0.5.23"),
    ],
)
def test_first_version_listing_a_type(itype: str, first: str) -> None:
    assert efa_plugin.minimum_version({itype}) == first
    versions = efa_plugin.known_versions()
    before = versions[versions.index(first) - 1] if versions.index(first) else None
    if before:
        assert itype not in (efa_plugin.supported_types(before) or set())


def test_newest_version_drops_dl1_and_knows_every_current_gpu_type() -> None:
    newest = efa_plugin.supported_types("v0.5.30")
    assert newest is not None and "dl1.24xlarge" not in newest
    assert "dl1.24xlarge" in (efa_plugin.supported_types("v0.5.29") or set())
    assert {"p5.48xlarge", "p5en.48xlarge", "g6e.48xlarge", "g7e.48xlarge", "p6-b300.48xlarge"} <= newest
    assert efa_plugin.minimum_version({"p5en.48xlarge", "p5.4xlarge"}) == "v0.5.23"


def test_unknown_version_and_type() -> None:
    assert efa_plugin.supported_types("v9.9.9") is None
    assert efa_plugin.minimum_version({"m5.large"}) is None
