"""The EKS Kubernetes version calendar, as data. Pure.

A minor version is in standard support for 14 months after its EKS release, then in extended support (at
an extra charge per cluster-hour) for 12 more; clusters default to extended support unless their upgrade
policy says ``STANDARD``. https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html

End dates from the AWS-maintained EKS version calendar (aws-samples "eks-operation-review" cluster
lifecycle reference, verified against the EKS release calendar on 2026-04-24:
https://aws-samples.github.io/sample-apex-skills/docs/skills/eks-operation-review/references/cluster-lifecycle).
Add a row when EKS releases a version.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class EksVersion:
    """One Kubernetes minor on EKS and the last days of its standard and extended support."""

    version: str
    standard_until: dt.date
    extended_until: dt.date


CALENDAR: dict[str, EksVersion] = {
    v.version: v
    for v in (
        EksVersion("1.31", dt.date(2025, 11, 26), dt.date(2026, 11, 26)),
        EksVersion("1.32", dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
        EksVersion("1.33", dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
        EksVersion("1.34", dt.date(2026, 12, 2), dt.date(2027, 12, 2)),
        EksVersion("1.35", dt.date(2027, 3, 27), dt.date(2028, 3, 27)),
    )
}

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
