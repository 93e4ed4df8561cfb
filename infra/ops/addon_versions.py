"""Read the EKS add-on builds for a Kubernetes minor from DescribeAddonVersions, as rows for
``infra/cluster/addon_versions.py`` (``aiplat addon-versions``).

https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddonVersions.html: per add-on,
``addonVersions[].addonVersion`` with ``compatibilities[].clusterVersion`` and ``defaultVersion``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from infra.cluster.addon_versions import ADDON_NAMES


def addon_builds(eks: Any, minor: str, addons: Iterable[str] = ADDON_NAMES) -> dict[str, list[str]]:
    """add-on -> the builds EKS lists for ``minor``, newest first (the order EKS answers in)."""
    out: dict[str, list[str]] = {}
    for addon in addons:
        found: list[str] = []
        pages = eks.get_paginator("describe_addon_versions").paginate(
            kubernetesVersion=minor, addonName=addon
        )
        for page in pages:
            for entry in page.get("addons", []):
                for version in entry.get("addonVersions", []):
                    clusters = {c.get("clusterVersion") for c in version.get("compatibilities", [])}
                    if minor in clusters and version["addonVersion"] not in found:
                        found.append(version["addonVersion"])
        out[addon] = found
    return out


def table_rows(minor: str, builds: dict[str, list[str]], region: str, today: datetime.date) -> str:
    """The ``ADDON_BUILDS[minor]`` entry to paste into ``infra/cluster/addon_versions.py``."""
    source = f"aws eks describe-addon-versions --kubernetes-version {minor} ({region})"
    lines = [f'    "{minor}": {{']
    for addon, versions in builds.items():
        lines.append(f'        "{addon}": (')
        lines += [
            f'            AddonBuild("{v}", "{source}", "{today.isoformat()}", True),' for v in versions
        ]
        lines.append("        ),")
    lines.append("    },")
    return "\n".join(lines)
