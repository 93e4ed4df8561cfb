"""Record the EKS add-on builds of a Kubernetes minor from DescribeAddonVersions into the data file
``infra/cluster/data/addon_builds.json`` (``aiplat addon-versions``).

https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddonVersions.html: per add-on,
``addonVersions[].addonVersion`` with ``compatibilities[].clusterVersion`` and ``defaultVersion`` (the build
EKS installs for that cluster version when none is named).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.cluster import addon_versions
from infra.cluster.addon_versions import ADDON_NAMES, AddonBuild


def addon_builds(eks: Any, minor: str, addons: Iterable[str] = ADDON_NAMES) -> dict[str, list[str]]:
    """add-on -> the builds EKS lists for ``minor``: EKS's default for that minor first, then the others
    newest first (the order EKS answers in)."""
    out: dict[str, list[str]] = {}
    for addon in addons:
        found: list[str] = []
        default: str | None = None
        pages = eks.get_paginator("describe_addon_versions").paginate(
            kubernetesVersion=minor, addonName=addon
        )
        for page in pages:
            for entry in page.get("addons", []):
                for version in entry.get("addonVersions", []):
                    fits = [c for c in version.get("compatibilities", []) if c.get("clusterVersion") == minor]
                    if fits and version["addonVersion"] not in found:
                        found.append(version["addonVersion"])
                    if any(c.get("defaultVersion") for c in fits):
                        default = default or version["addonVersion"]
        if default is not None:
            found.remove(default)
            found.insert(0, default)
        out[addon] = found
    return out


@dataclass(frozen=True)
class Change:
    """What recording a minor changed for one add-on: the default before and after, builds added/dropped."""

    addon: str
    default_before: str | None
    default_after: str
    added: tuple[str, ...]
    dropped: tuple[str, ...]


def record(
    path: Path, minor: str, found: dict[str, list[str]], source: str, today: datetime.date
) -> list[Change]:
    """Replace ``minor``'s builds in the data file at ``path`` with ``found`` (each with ``source`` and
    ``today``), keep the other minors as they are, and say what changed. Every add-on must have a build."""
    about, table = addon_versions.about(), dict(addon_versions.recorded())
    if path.exists():
        doc = json.loads(path.read_text())
        about, table = str(doc.get("about", about)), addon_versions.from_document(doc)
    before = table.get(minor, {})
    table[minor] = {
        addon: tuple(AddonBuild(v, source, today.isoformat(), True) for v in versions)
        for addon, versions in found.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(addon_versions.to_document(table, about), indent=2) + "\n")
    addon_versions.reload()
    changes = []
    for addon, versions in found.items():
        old = [b.version for b in before.get(addon, ())]
        changes.append(
            Change(
                addon,
                old[0] if old else None,
                versions[0],
                tuple(v for v in versions if v not in old),
                tuple(v for v in old if v not in versions),
            )
        )
    return changes
