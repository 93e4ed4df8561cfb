"""Subnet layout: table tests of the CIDR math."""

from __future__ import annotations

import ipaddress

import pytest

from infra.network.documents.cidr import Tier, plan_subnets


@pytest.mark.parametrize(
    ("vpc", "azs", "private0", "public0", "private_usable"),
    [
        ("10.0.0.0/16", ["a", "b", "c"], "10.0.0.0/19", "10.0.224.0/22", 8187),
        ("10.20.0.0/16", ["a", "b"], "10.20.0.0/19", "10.20.224.0/22", 8187),
        ("172.16.0.0/20", ["a"], "172.16.0.0/23", "172.16.14.0/26", 507),
        ("10.0.0.0/18", ["a", "b", "c", "d", "e", "f"], "10.0.0.0/21", "10.0.56.0/24", 2043),
    ],
)
def test_layout(vpc: str, azs: list[str], private0: str, public0: str, private_usable: int) -> None:
    plan = plan_subnets(vpc, azs)
    private = [s for s in plan if s.tier is Tier.private]
    public = [s for s in plan if s.tier is Tier.public]
    assert [s.availability_zone for s in private] == azs == [s.availability_zone for s in public]
    assert private[0].cidr == private0 and public[0].cidr == public0
    assert private[0].usable_addresses == private_usable
    nets = [ipaddress.IPv4Network(s.cidr) for s in plan]
    parent = ipaddress.IPv4Network(vpc)
    assert all(n.subnet_of(parent) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


@pytest.mark.parametrize(
    ("azs", "message"),
    [([], "0 availability zones"), (list("abcdefg"), "7 availability zones"), (["a", "a"], "repeat")],
)
def test_bad_zones(azs: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_subnets("10.0.0.0/16", azs)


@pytest.mark.parametrize(("vpc", "usable"), [("10.0.0.0/16", 1019), ("172.16.0.0/20", 59)])
def test_the_interface_endpoints_get_a_subnet_per_zone_apart_from_the_nodes(vpc: str, usable: int) -> None:
    from infra.network.config import DEFAULT_INTERFACE_ENDPOINTS
    from infra.network.documents.cidr import endpoint_cidrs

    azs = ["a", "b", "c"]
    plan = plan_subnets(vpc, azs)
    endpoints = [s for s in plan if s.tier is Tier.endpoints]
    assert [s.availability_zone for s in endpoints] == azs
    assert endpoint_cidrs(vpc, azs) == tuple(s.cidr for s in endpoints)
    # an interface endpoint takes one address per subnet: room for every default one, and more
    assert endpoints[0].usable_addresses == usable >= 4 * len(DEFAULT_INTERFACE_ENDPOINTS)
    others = [ipaddress.IPv4Network(s.cidr) for s in plan if s.tier is not Tier.endpoints]
    assert not any(ipaddress.IPv4Network(e.cidr).overlaps(o) for e in endpoints for o in others)
