"""How far an address range reaches: world-open and public CIDRs. Pure.

One definition for the config schema (``cluster.endpoint_public_access_cidrs``) and the policy pack
(security group ingress, the EKS public endpoint), so that "open to the world" means the same in the plan
and in ``pulumi preview --policy-pack policies``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network(cidr: str) -> Network | None:
    """The network of ``cidr`` (host bits allowed, as AWS accepts them), or None if it is not a CIDR."""
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return None


def is_world(cidr: str) -> bool:
    """``0.0.0.0/0`` or ``::/0`` (any spelling with prefix length 0): every address on the internet."""
    net = network(cidr)
    return net is not None and net.prefixlen == 0


def is_private(cidr: str) -> bool:
    """Whether the whole range is private (RFC 1918, RFC 4193, carrier-grade NAT, loopback ...)."""
    net = network(cidr)
    if net is None:
        return False
    if isinstance(net, ipaddress.IPv4Network) and net.subnet_of(ipaddress.IPv4Network("100.64.0.0/10")):
        return True  # RFC 6598 shared space: never routed on the internet
    return net.is_private


def public_addresses(cidrs: Iterable[str]) -> int:
    """How many addresses the ranges that are not entirely private cover together (overlaps counted once).

    A range such as ``0.0.0.0/1`` that contains private space is counted whole: it still reaches half the
    internet. Strings that are not CIDRs count as nothing (the caller reports them).
    """
    nets = [n for c in cidrs if (n := network(c)) is not None and not is_private(str(n))]
    total = 0
    for version in (4, 6):
        same = [n for n in nets if n.version == version]
        total += sum(n.num_addresses for n in ipaddress.collapse_addresses(same))  # type: ignore[arg-type]
    return total


# The most public addresses the EKS API endpoint may be open to, all CIDRs together: a /20. Office and VPN
# egress ranges are far smaller; anything wider is effectively public. The schema and the pack's
# eks-private-endpoint rule both judge by endpoint_span_problem(), so `aiplat plan` and `aiplat review` agree.
MAX_PUBLIC_ENDPOINT_PREFIX = 20
MAX_PUBLIC_ENDPOINT_ADDRESSES = 2 ** (32 - MAX_PUBLIC_ENDPOINT_PREFIX)


def endpoint_span_problem(cidrs: Iterable[str], limit: int = MAX_PUBLIC_ENDPOINT_ADDRESSES) -> str | None:
    """Why ``cidrs`` open the public API endpoint too wide (more than ``limit`` public addresses), or None."""
    ranges = list(cidrs)
    span = public_addresses(ranges)
    if span <= limit:
        return None
    prefix = 32 - (limit.bit_length() - 1) if limit & (limit - 1) == 0 else None
    most = f"a /{prefix} ({limit})" if prefix is not None else f"{limit:g}"
    return f"the public endpoint CIDRs {ranges} cover {span} public addresses, more than {most}"
