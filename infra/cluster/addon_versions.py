"""EKS managed add-on builds per Kubernetes minor: the data file ``data/addon_builds.json``, every build with
its source and date.

EKS refuses a version DescribeAddonVersions does not list for the minor
(https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html); rule ``addon-versions-known``
refuses one not recorded here. ``aws_published`` False: seen only in a third-party config, so the plan warns
and it must be checked with ``aws eks describe-addon-versions`` before ``pulumi up`` (builds are also
region- and partition-specific). ``REFRESH`` records a minor from the API (docs/how-to/upgrade.md); the first
build of each add-on is the default.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The shipped data file; `aiplat addon-versions` writes it (or the file given with --out).
DATA_FILE = Path(__file__).with_name("data") / "addon_builds.json"
# The command that records a minor's builds: named in every refusal of an unrecorded minor.
REFRESH = "aiplat addon-versions --kubernetes-version {minor}"


@dataclass(frozen=True)
class AddonBuild:
    """One add-on build EKS lists for a Kubernetes minor, where the string was read, and when."""

    version: str
    source: str
    date: str  # ISO date the source was read
    aws_published: bool
    note: str = ""


ADDON_NAMES = (
    "vpc-cni",
    "coredns",
    "kube-proxy",
    "aws-ebs-csi-driver",
    "eks-pod-identity-agent",
    "eks-node-monitoring-agent",
)

Table = dict[str, dict[str, tuple[AddonBuild, ...]]]


def from_document(doc: Mapping[str, Any]) -> Table:
    """Kubernetes minor -> add-on -> builds, from the data file's JSON (``minors``)."""
    return {
        minor: {addon: tuple(AddonBuild(**b) for b in builds) for addon, builds in addons.items()}
        for minor, addons in doc["minors"].items()
    }


def to_document(table: Table, about: str) -> dict[str, Any]:
    """The data file's JSON for ``table``, minors in version order, empty notes left out."""
    ordered = sorted(table, key=lambda m: tuple(int(p) for p in m.split(".")))
    return {
        "about": about,
        "minors": {
            m: {
                a: [{k: v for k, v in asdict(b).items() if k != "note" or v} for b in builds]
                for a, builds in table[m].items()
            }
            for m in ordered
        },
    }


@functools.cache
def _load(path: Path) -> Table:
    return from_document(json.loads(path.read_text()))


def recorded() -> Table:
    """Every recorded minor's builds (the data file at ``DATA_FILE``)."""
    return _load(DATA_FILE)


def reload() -> None:
    """Forget what was read, after the data file was rewritten."""
    _load.cache_clear()


def builds(minor: str, addon: str) -> tuple[AddonBuild, ...]:
    """The builds recorded for ``addon`` on Kubernetes ``minor`` (empty when none are)."""
    return recorded().get(minor, {}).get(addon, ())


def default_version(minor: str, addon: str) -> str | None:
    """The recorded default build of ``addon`` for ``minor``, or None."""
    found = builds(minor, addon)
    return found[0].version if found else None


def find(minor: str, addon: str, version: str) -> AddonBuild | None:
    """The record of ``version`` of ``addon`` for ``minor``, or None if it is not listed."""
    return next((b for b in builds(minor, addon) if b.version == version), None)
