"""The EKS Kubernetes version calendar, as data (``data/eks_versions.json``). Pure.

A minor version is in standard support for 14 months after its EKS release, then in extended support (at
an extra charge per cluster-hour) for 12 more; clusters default to extended support unless their upgrade
policy says ``STANDARD``. https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html

Each minor's end dates carry their source and date; ``aiplat addon-versions --kubernetes-version <minor>``
records a new minor from eks:DescribeClusterVersions (``CALENDAR_REFRESH``) with its add-on builds.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALENDAR_FILE = Path(__file__).with_name("data") / "eks_versions.json"
CALENDAR_REFRESH = "aiplat addon-versions --kubernetes-version {minor}"


@dataclass(frozen=True)
class EksVersion:
    """One Kubernetes minor on EKS and the last days of its standard and extended support."""

    version: str
    standard_until: dt.date
    extended_until: dt.date
    source: str = ""
    date: str = ""


def from_document(doc: Mapping[str, Any]) -> dict[str, EksVersion]:
    """Kubernetes minor -> its support dates, from the data file's JSON (``versions``)."""
    return {
        minor: EksVersion(
            minor,
            dt.date.fromisoformat(row["standard_until"]),
            dt.date.fromisoformat(row["extended_until"]),
            row["source"],
            row["date"],
        )
        for minor, row in doc["versions"].items()
    }


CALENDAR: dict[str, EksVersion] = from_document(json.loads(CALENDAR_FILE.read_text()))

# The shape of a Kubernetes minor as EKS names it ('1.35'): the config's cluster.kubernetes_version and the
# CLI's --kubernetes-version.
KUBERNETES_MINOR = r"^1\.\d{2}$"

# The EKS upgrade policy values (UpgradePolicyRequest.supportType); EKS uses EXTENDED when none is set.
# https://docs.aws.amazon.com/eks/latest/APIReference/API_UpgradePolicyRequest.html
SUPPORT_STANDARD = "STANDARD"
SUPPORT_EXTENDED = "EXTENDED"


def in_standard_support(version: str, on: dt.date) -> bool:
    """Whether EKS still gives ``version`` standard support on ``on`` (unknown versions: no)."""
    entry = CALENDAR.get(version)
    return entry is not None and on <= entry.standard_until
