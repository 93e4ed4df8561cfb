"""Subnet layout of the GPU VPC: pure CIDR math, no Pulumi.

The VPC is cut into eight equal blocks. Blocks 0..5 are the private subnets, one per AZ (at most six
AZs): pods take their IPs from these with the VPC CNI, and a p5.48xlarge alone can hold hundreds, so
they get almost everything. Block 6 is cut again into eight: the first ones, one per AZ, hold the interface
VPC endpoints alone, so the workloads' HTTPS egress names these ranges instead of the whole VPC
(``endpoint_cidrs``); the last two stay free for growth. Block 7 is cut again into eight public subnets,
one per AZ: only NAT gateways and load balancers live there. For a /16 that gives /19 private subnets
(8,187 usable addresses each), /22 endpoint and /22 public ones; for a /20, /26 endpoint subnets (59
addresses: an interface endpoint takes one per subnet).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum

MAX_AZS = 6
# AWS reserves five addresses in every subnet (network, VPC router, DNS, future use, broadcast):
# https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html
AWS_RESERVED_PER_SUBNET = 5


class Tier(StrEnum):
    private = "private"
    public = "public"
    endpoints = "endpoints"


@dataclass(frozen=True)
class SubnetPlan:
    """One subnet: which AZ, which tier, which CIDR."""

    availability_zone: str
    tier: Tier
    cidr: str

    @property
    def usable_addresses(self) -> int:
        return ipaddress.IPv4Network(self.cidr).num_addresses - AWS_RESERVED_PER_SUBNET


def plan_subnets(vpc_cidr: str, availability_zones: tuple[str, ...] | list[str]) -> tuple[SubnetPlan, ...]:
    """Private, public and endpoint subnet per AZ, in AZ order (private ones first, then public)."""
    azs = tuple(availability_zones)
    if not 1 <= len(azs) <= MAX_AZS:
        raise ValueError(f"{len(azs)} availability zones; the layout supports 1 to {MAX_AZS}")
    if len(set(azs)) != len(azs):
        raise ValueError(f"availability zones repeat: {list(azs)}")
    vpc = ipaddress.IPv4Network(vpc_cidr, strict=True)
    if vpc.prefixlen > 24:
        raise ValueError(f"{vpc_cidr} is too small to split into subnets; use /16 to /20")
    blocks = list(vpc.subnets(prefixlen_diff=3))
    public_blocks = list(blocks[7].subnets(prefixlen_diff=3))
    endpoint_blocks = list(blocks[6].subnets(prefixlen_diff=3))
    private = tuple(SubnetPlan(az, Tier.private, str(blocks[i])) for i, az in enumerate(azs))
    public = tuple(SubnetPlan(az, Tier.public, str(public_blocks[i])) for i, az in enumerate(azs))
    endpoints = tuple(SubnetPlan(az, Tier.endpoints, str(endpoint_blocks[i])) for i, az in enumerate(azs))
    return private + public + endpoints


def endpoint_cidrs(vpc_cidr: str, availability_zones: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The ranges of the interface endpoints' subnets: where the workloads' HTTPS to AWS goes."""
    return tuple(s.cidr for s in plan_subnets(vpc_cidr, availability_zones) if s.tier is Tier.endpoints)
