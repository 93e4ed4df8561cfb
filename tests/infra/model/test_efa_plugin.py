"""The EFA device plugin chart's instance list per version (aws/eks-charts history) and the minimum version
for a set of EFA types."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.model import efa_plugin
from infra.model.config.services import EfaDevicePluginConfig

UPSTREAM = Path(__file__).parent / "upstream"


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


def test_pinned_version_lists_what_its_values_yaml_lists() -> None:
    # the chart's values.yaml at the pinned version, copied from aws/eks-charts (source in its header)
    pinned = EfaDevicePluginConfig().version
    upstream = yaml.safe_load((UPSTREAM / f"aws-efa-k8s-device-plugin-{pinned}.values.yaml").read_text())
    assert efa_plugin.supported_types(pinned) == frozenset(upstream["supportedInstanceLabels"]["values"])


def test_minimum_version_of_a_set_is_the_latest_of_its_types_minimums() -> None:
    versions = efa_plugin.known_versions()
    first = {t: efa_plugin.minimum_version({t}) for t in ("p5en.48xlarge", "p5.4xlarge", "p4d.24xlarge")}
    assert len(set(first.values())) > 1
    assert efa_plugin.minimum_version(set(first)) == max(first.values(), key=versions.index)


def test_unknown_version_and_type() -> None:
    assert efa_plugin.supported_types("v9.9.9") is None
    assert efa_plugin.minimum_version({"m5.large"}) is None
