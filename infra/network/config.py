"""Config of the stack's VPC: CIDR, zones, NAT strategy, endpoints, flow logs."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.core.config import Strict, check_log_retention
from infra.network import cidrs


class NatStrategy(StrEnum):
    """How private subnets reach the internet.

    ``none``: no NAT gateway (nodes reach AWS only through VPC endpoints; images from public registries
    cannot be pulled, so the cluster services must be off: ``cluster_services.kubernetes_access: skip``,
    rule ``nat-none-no-public-images``); ``single``: one NAT gateway in the first AZ (cheap, one AZ's outage
    cuts egress everywhere); ``one_per_az``: a NAT gateway per AZ (production).
    """

    none = "none"
    single = "single"
    one_per_az = "one_per_az"


class FlowLogTraffic(StrEnum):
    ALL = "ALL"
    ACCEPT = "ACCEPT"
    REJECT = "REJECT"


DEFAULT_INTERFACE_ENDPOINTS = (
    "ecr.api",
    "ecr.dkr",
    "sts",
    "ec2",
    "eks",
    "eks-auth",
    "logs",
    "elasticloadbalancing",
    "ssm",
    "ssmmessages",
    "ec2messages",
    # the release publisher signs manifests with KMS (trainer/release/signing.py) and the workload pods reach
    # no
    # public AWS address (infra/core/namespaces.py https_egress_cidrs): rule 'publisher-reaches-kms'
    "kms",
)
NAT_FREE_ENDPOINTS = ("ecr.api", "ecr.dkr", "sts", "ec2")


class DnsFirewallMode(StrEnum):
    """What the VPC's Route 53 Resolver DNS Firewall does with a name outside the allow-list: ``block``
    (answer NXDOMAIN), ``alert`` (resolve it and log an alert: to find what a stack needs before blocking),
    ``off`` (no firewall)."""

    block = "block"
    alert = "alert"
    off = "off"


class DnsFirewallConfig(Strict):
    """Route 53 Resolver DNS Firewall on the VPC: nodes and pods (CoreDNS forwards to the VPC resolver)
    resolve only AWS's names, the VPC's own, the registries the cluster pulls from and these."""

    mode: DnsFirewallMode = Field(DnsFirewallMode.block, description="block, alert or off.")
    allowed_domains: list[str] = Field(
        default_factory=list,
        description="More names the VPC may resolve, e.g. a webhook receiver's host or a package mirror "
        "(DNS Firewall syntax: 'example.com', or '*.example.com' for its subdomains). The platform's own "
        "needs are derived (rule 'dns-firewall-domains' checks the whole list).",
    )


class FlowLogsConfig(Strict):
    """VPC flow logs to a CloudWatch log group encrypted with the stack's logs key."""

    enabled: bool = Field(True, description="Record flow logs for the whole VPC.")
    traffic_type: FlowLogTraffic = Field(FlowLogTraffic.ALL, description="ALL, ACCEPT or REJECT.")
    retention_days: int = Field(
        90, description="Days CloudWatch keeps the records (CloudWatch's allowed values)."
    )
    aggregation_interval_s: int = Field(600, description="60 or 600 seconds per record.")

    @field_validator("retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)

    @field_validator("aggregation_interval_s")
    @classmethod
    def _interval(cls, v: int) -> int:
        if v not in (60, 600):
            raise ValueError(f"{v} is not 60 or 600; VPC flow logs aggregate per 60 or 600 seconds")
        return v


class NetworkConfig(Strict):
    """The stack's VPC."""

    vpc_cidr: str = Field("10.0.0.0/16", description="IPv4 CIDR of the VPC, /16 to /20.")
    az_count: Annotated[int, Field(ge=1, le=6)] = Field(
        3, description="How many availability zones the VPC spans (EKS needs subnets in at least two)."
    )
    availability_zones: list[str] = Field(
        default_factory=list,
        description="The VPC's zones by name; empty = the region's first az_count zones. When set, its "
        "length must equal az_count. Name a zone here to pin an EFA pool to it.",
    )
    nat: NatStrategy = Field(
        NatStrategy.one_per_az,
        description="NAT gateways: none, single, one_per_az. none pulls images only from the account's ECR, "
        "so it needs cluster_services.kubernetes_access: skip (the cluster services' images are public).",
    )
    interface_endpoints: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INTERFACE_ENDPOINTS),
        description="AWS services reached through interface VPC endpoints (service short names, e.g. "
        "'ecr.api'); S3 always gets a gateway endpoint. With nat: none, ECR (api, dkr), STS and EC2 "
        "are needed.",
    )
    flow_logs: FlowLogsConfig = Field(default_factory=lambda: FlowLogsConfig())
    dns_firewall: DnsFirewallConfig = Field(default_factory=lambda: DnsFirewallConfig())
    workload_egress_cidrs: list[str] = Field(
        default_factory=list,
        description="IPv4 CIDRs outside AWS's endpoints that the workload pods (trainer, publisher, "
        "inference, teams) may reach on HTTPS, e.g. a package mirror or an experiment tracker. Default "
        "empty: HTTPS only to the interface endpoints' subnets and S3's prefix list. Not 0.0.0.0/0.",
    )

    @field_validator("workload_egress_cidrs")
    @classmethod
    def _egress(cls, v: list[str]) -> list[str]:
        for c in v:
            try:
                ipaddress.IPv4Network(c, strict=True)
            except ValueError as exc:
                raise ValueError(f"{c!r} is not an IPv4 CIDR ({exc})") from None
            if cidrs.is_world(c):
                raise ValueError(f"{c!r} is the whole internet; list the hosts' CIDRs the pods need")
        return v

    @field_validator("interface_endpoints")
    @classmethod
    def _endpoints(cls, v: list[str]) -> list[str]:
        for svc in v:
            if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", svc):
                raise ValueError(f"{svc!r} is not an AWS service short name like 'ecr.api'")
            if svc == "s3":
                raise ValueError("'s3' gets a gateway endpoint already; remove it from interface_endpoints")
        if len(set(v)) != len(v):
            raise ValueError("interface_endpoints lists a service twice; list each once")
        return v

    @model_validator(mode="after")
    def _zones(self) -> NetworkConfig:
        if self.availability_zones and len(self.availability_zones) != self.az_count:
            raise ValueError(
                f"availability_zones names {len(self.availability_zones)} zones but az_count is "
                f"{self.az_count}; make them agree"
            )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError("availability_zones names a zone twice; name each once")
        if self.nat is NatStrategy.none:
            missing = [s for s in NAT_FREE_ENDPOINTS if s not in self.interface_endpoints]
            if missing:
                raise ValueError(
                    f"nat is 'none' but interface_endpoints lacks {missing}; nodes could not pull images "
                    "or join the cluster. Add them, or set nat: single"
                )
        return self

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"{v!r} is not an IPv4 CIDR block ({exc}); use e.g. '10.0.0.0/16'") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{v!r} has prefix /{net.prefixlen}; a GPU VPC needs /16 to /20")
        if not net.is_private:
            raise ValueError(f"{v!r} is not a private (RFC 1918) range; use e.g. '10.0.0.0/16'")
        return v
