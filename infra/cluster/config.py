"""The EKS cluster's config section (``cluster``): version, endpoint access, add-ons, access entries."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.cluster import addon_versions
from infra.cluster.calendar import KUBERNETES_MINOR
from infra.core.config import Strict, check_log_retention
from infra.network import cidrs


class AccessPolicy(StrEnum):
    """EKS access policies an access entry can get
    (https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html)."""

    cluster_admin = "AmazonEKSClusterAdminPolicy"
    admin = "AmazonEKSAdminPolicy"
    edit = "AmazonEKSEditPolicy"
    view = "AmazonEKSViewPolicy"


class SupportType(StrEnum):
    """EKS version support policy (``upgradePolicy.supportType``).

    ``standard``: at the end of standard support EKS upgrades the control plane to the next minor.
    ``extended``: the cluster stays on its minor for up to 12 more months, billed at the extended-support
    rate. EKS defaults to extended when not told; we say which explicitly.
    https://docs.aws.amazon.com/eks/latest/userguide/disable-extended-support.html
    """

    standard = "STANDARD"
    extended = "EXTENDED"


class AddonVersions(Strict):
    """EKS managed add-on builds. Unset: the default build recorded for the cluster's Kubernetes minor in
    ``infra/cluster/data/addon_builds.json`` (the one place versions live, each with its source and date;
    ``aiplat addon-versions`` writes it). A build set here must be one recorded for that minor (rule
    ``addon-versions-known``): EKS refuses builds it does not list for the cluster's version.
    """

    vpc_cni: str | None = Field(None, description="vpc-cni build; EFA-only interfaces need a recent one.")
    coredns: str | None = Field(None, description="coredns build.")
    kube_proxy: str | None = Field(None, description="kube-proxy build; must match the Kubernetes minor.")
    aws_ebs_csi_driver: str | None = Field(None, description="aws-ebs-csi-driver build.")
    eks_pod_identity_agent: str | None = Field(None, description="eks-pod-identity-agent build.")
    eks_node_monitoring_agent: str | None = Field(
        None, description="eks-node-monitoring-agent build: node health for GPU auto repair."
    )

    @field_validator("*")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", v):
            raise ValueError(f"{v!r} is not an EKS add-on version like 'v1.19.5-eksbuild.1'")
        return v

    def pinned(self) -> dict[str, str]:
        """EKS add-on name -> build, for the builds set in the stack file."""
        return {
            name.replace("_", "-"): version
            for name, version in self.model_dump().items()
            if version is not None
        }


PrincipalArn = Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")]


class AccessEntryConfig(Strict):
    """Cluster access for an IAM principal (EKS access entries, API authentication mode): a role or user by
    ARN, or a role of the stack's own account by name."""

    principal_arn: (
        Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")] | None
    ) = Field(None, description="IAM role or user ARN (or role_name).")
    role_name: Annotated[str, Field(pattern=r"^[\w+=,.@-]{1,64}$")] | None = Field(
        None,
        description="Name of an IAM role in the account the stack deploys into (or principal_arn), e.g. "
        "the role that runs pulumi up.",
    )
    policy: AccessPolicy = Field(AccessPolicy.view, description="EKS access policy (cluster_admin ... view).")
    namespaces: list[str] = Field(
        default_factory=list, description="Limit the policy to these namespaces; empty = cluster."
    )

    @model_validator(mode="after")
    def _one_principal(self) -> AccessEntryConfig:
        if (self.principal_arn is None) == (self.role_name is None):
            raise ValueError("give exactly one of principal_arn and role_name")
        return self

    def arn(self, partition: str, account_id: str) -> str:
        """The principal's ARN (a role_name is a role of ``account_id``)."""
        return self.principal_arn or f"arn:{partition}:iam::{account_id}:role/{self.role_name}"


class ClusterConfig(Strict):
    """The EKS cluster."""

    # 1.35 is in EKS standard support until 2027-03; older minors cost extended-support fees.
    # https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html
    kubernetes_version: Annotated[str, Field(pattern=KUBERNETES_MINOR)] = Field(
        "1.35", description="Kubernetes minor version, e.g. '1.35'."
    )
    endpoint_public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty = private endpoint only.",
    )
    addons: AddonVersions = Field(default_factory=lambda: AddonVersions())
    access_entries: dict[str, AccessEntryConfig] = Field(
        default_factory=dict, description="Access entries keyed by a short name."
    )
    log_retention_days: int | None = Field(
        None,
        description="Retention of the control-plane log group (days; the EKS audit log among them). Unset: "
        "365 in prod, 90 in dev; prod refuses less than 365.",
    )
    support_type: SupportType = Field(
        SupportType.standard,
        description="STANDARD (upgraded by EKS at the end of standard support) or EXTENDED (stays on the "
        "minor, extended-support fees). EKS's own default would be EXTENDED.",
    )
    deletion_protection: bool | None = Field(
        None,
        description="EKS deletion protection (DeleteCluster is refused until it is turned off); unset = on "
        "for prod, off for dev.",
    )

    @model_validator(mode="after")
    def _kube_proxy_matches(self) -> ClusterConfig:
        # kube-proxy is built per Kubernetes minor; EKS refuses another minor's build for the cluster.
        if self.addons.kube_proxy is None:
            return self
        minor = ".".join(self.addons.kube_proxy.removeprefix("v").split(".")[:2])
        if minor != self.kubernetes_version:
            raise ValueError(
                f"addons.kube_proxy {self.addons.kube_proxy} is for Kubernetes {minor} but "
                f"kubernetes_version is {self.kubernetes_version}; "
                f"pin a v{self.kubernetes_version}.x-eksbuild.N kube-proxy"
            )
        return self

    def addon_versions(self) -> dict[str, str | None]:
        """EKS add-on name -> build: the stack file's, else the default recorded for the minor (None when
        the minor has no records; the rule ``addon-versions-known`` refuses that)."""
        pinned = self.addons.pinned()
        return {
            name: pinned.get(name) or addon_versions.default_version(self.kubernetes_version, name)
            for name in addon_versions.ADDON_NAMES
        }

    @field_validator("endpoint_public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for c in v:
            try:
                ipaddress.IPv4Network(c, strict=True)
            except ValueError as exc:
                raise ValueError(f"{c!r} is not an IPv4 CIDR ({exc})") from None
            if cidrs.is_world(c):  # the one definition the policy pack uses too
                raise ValueError(
                    f"{c!r} opens the API endpoint to the internet; "
                    "list your VPN/office CIDRs or leave it empty"
                )
        # Not only /0: many CIDRs that together cover a large part of the internet are as open (the pack's
        # eks-private-endpoint rule judges by the same function).
        if problem := cidrs.endpoint_span_problem(v):
            raise ValueError(f"{problem}; list your VPN/office egress CIDRs only")
        return v

    @field_validator("access_entries")
    @classmethod
    def _reserved_entry(cls, v: dict[str, AccessEntryConfig]) -> dict[str, AccessEntryConfig]:
        if "break-glass" in v:
            raise ValueError("the access entry name 'break-glass' is the platform's own; pick another name")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int | None) -> int | None:
        return None if v is None else check_log_retention(v)
