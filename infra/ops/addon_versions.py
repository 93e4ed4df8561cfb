"""Record what the plan and the pack need to know about a Kubernetes minor (``aiplat addon-versions``): its
EKS add-on builds from DescribeAddonVersions into ``infra/cluster/data/addon_builds.json``, and its support
dates from DescribeClusterVersions into ``infra/cluster/data/eks_versions.json``.

https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddonVersions.html: per add-on,
``addonVersions[].addonVersion`` with ``compatibilities[].clusterVersion`` and ``defaultVersion`` (the build
EKS installs for that cluster version when none is named).
https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeClusterVersions.html: per version,
``endOfStandardSupportDate`` and ``endOfExtendedSupportDate``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.cluster import addon_versions, calendar
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
    doc = json.loads((path if path.exists() else addon_versions.DATA_FILE).read_text())
    about, table = str(doc.get("about", "")), addon_versions.from_document(doc)
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


def support_dates(eks: Any, minor: str) -> tuple[datetime.date, datetime.date] | None:
    """(last day of standard support, of extended support) EKS gives ``minor``; None when EKS does not list
    the minor (or gives no dates for it)."""
    pages = eks.get_paginator("describe_cluster_versions").paginate(clusterVersions=[minor])
    for page in pages:
        for v in page.get("clusterVersions", []):
            standard, extended = v.get("endOfStandardSupportDate"), v.get("endOfExtendedSupportDate")
            if v.get("clusterVersion") == minor and standard and extended:
                return standard.date(), extended.date()
    return None


def record_calendar(
    path: Path, minor: str, dates: tuple[datetime.date, datetime.date], source: str, today: datetime.date
) -> calendar.EksVersion | None:
    """Write ``minor``'s support dates into the calendar data file at ``path`` (other minors kept); the row
    it had before, if any."""
    doc = json.loads((path if path.exists() else calendar.CALENDAR_FILE).read_text())
    before = calendar.from_document(doc).get(minor)
    doc["versions"][minor] = {
        "standard_until": dates[0].isoformat(),
        "extended_until": dates[1].isoformat(),
        "source": source,
        "date": today.isoformat(),
    }
    doc["versions"] = dict(sorted(doc["versions"].items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return before
