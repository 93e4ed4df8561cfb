"""EKS managed add-on builds per Kubernetes minor, as data with the source of every version string.

EKS refuses a version DescribeAddonVersions does not list for the minor
(https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html); rule ``addon-versions-known``
refuses one not listed here. ``aws_published`` False: seen only in a third-party config, so the plan warns
and it must be checked with ``aws eks describe-addon-versions`` before ``pulumi up`` (builds are also
region- and partition-specific). Update with ``aiplat addon-versions --kubernetes-version <minor>``
(docs/how-to/upgrade.md); the first build of each add-on is the default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AddonBuild:
    """One add-on build EKS lists for a Kubernetes minor, where the string was read, and when."""

    version: str
    source: str
    seen: str  # ISO date the source was read
    aws_published: bool


ADDON_NAMES = (
    "vpc-cni",
    "coredns",
    "kube-proxy",
    "aws-ebs-csi-driver",
    "eks-pod-identity-agent",
    "eks-node-monitoring-agent",
)

_JP = "https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/"
# A public third-party CDK configuration whose add-on pins for 1.35 are the result of
# `aws eks describe-addon-versions --kubernetes-version 1.35` "as of 2026-05" (its own comment); read in
# the stored public code index (entry 54559596030). Not an AWS page: aws_published=False.
_THIRD_PARTY_135 = (
    "third-party CDK config, describe-addon-versions for 1.35 as of 2026-05 (code index 54559596030)"
)

# Kubernetes minor -> add-on -> builds, the default first.
ADDON_BUILDS: dict[str, dict[str, tuple[AddonBuild, ...]]] = {
    "1.35": {
        "vpc-cni": (
            # The AWS table rows captured here stop at 1.33 (v1.20.1-eksbuild.3 for 1.27-1.33, AWS JP copy of
            # managing-vpc-cni); a third-party copy of the table dated June 2026 lists v1.21.1-eksbuild.8 for
            # 1.29-1.36 (code index 58372222566).
            AddonBuild("v1.21.1-eksbuild.8", _THIRD_PARTY_135, "2026-11-30", False),
        ),
        "coredns": (
            AddonBuild("v1.14.3-eksbuild.3", _JP + "managing-coredns.md (1.35 row)", "2026-11-30", True),
            AddonBuild(
                "v1.14.2-eksbuild.4",
                "https://docs.amazonaws.cn/en_us/eks/latest/userguide/managing-coredns.md (1.35 row, older "
                "capture)",
                "2026-11-30",
                True,
            ),
        ),
        "kube-proxy": (
            AddonBuild("v1.35.3-eksbuild.13", _JP + "managing-kube-proxy.md (1.35 row)", "2026-11-30", True),
            AddonBuild("v1.35.3-eksbuild.5", _THIRD_PARTY_135, "2026-11-30", False),
            AddonBuild(
                "v1.35.3-eksbuild.2",
                "https://docs.amazonaws.cn/zh_cn/eks/latest/userguide/managing-kube-proxy.md "
                "(1.35 row, older capture)",
                "2026-11-30",
                True,
            ),
        ),
        # No AWS page lists builds per minor for the add-ons below; only DescribeAddonVersions does.
        "aws-ebs-csi-driver": (AddonBuild("v1.59.0-eksbuild.1", _THIRD_PARTY_135, "2026-11-30", False),),
        "eks-pod-identity-agent": (AddonBuild("v1.3.10-eksbuild.3", _THIRD_PARTY_135, "2026-11-30", False),),
        "eks-node-monitoring-agent": (
            AddonBuild("v1.6.4-eksbuild.1", _THIRD_PARTY_135, "2026-11-30", False),
        ),
    },
}


def builds(minor: str, addon: str) -> tuple[AddonBuild, ...]:
    """The builds recorded for ``addon`` on Kubernetes ``minor`` (empty when none are)."""
    return ADDON_BUILDS.get(minor, {}).get(addon, ())


def default_version(minor: str, addon: str) -> str | None:
    """The recorded default build of ``addon`` for ``minor``, or None."""
    found = builds(minor, addon)
    return found[0].version if found else None


def find(minor: str, addon: str, version: str) -> AddonBuild | None:
    """The record of ``version`` of ``addon`` for ``minor``, or None if it is not listed."""
    return next((b for b in builds(minor, addon) if b.version == version), None)
