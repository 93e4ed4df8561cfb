"""What ``aiplat preflight`` reads about the global endpoint's zone (``infra/io/global_dns.py``) from a
local moto Route 53 over HTTP, and what the rule makes of it (``infra/edge/rules.py``
``global_dns_findings``). Public DNS is the one input replaced: ``resolve`` answers as a resolver would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.edge.rules import global_dns_findings
from infra.io.global_dns import read_global_dns
from infra.io.stackfiles import load_stack_config
from trainer.tools.moto_server import MotoServer

HK = load_stack_config("prod-hk-infer")
NAME = "api.inference.example.com"


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    with MotoServer() as s:
        yield s


@pytest.fixture
def route53(server: MotoServer):
    server.reset()
    return server.client("route53", "us-east-1")


def _zone(route53, *, private: bool = False) -> tuple[str, tuple[str, ...]]:
    args = {"Name": "example.com", "CallerReference": "zone"}
    if private:
        args["VPC"] = {"VPCRegion": "ap-east-1", "VPCId": "vpc-12345678"}
        args["HostedZoneConfig"] = {"PrivateZone": True}
    zone = route53.create_hosted_zone(**args)
    zone_id = zone["HostedZone"]["Id"].split("/")[-1]
    return zone_id, tuple(zone.get("DelegationSet", {}).get("NameServers", ()))


def _record(route53, zone_id: str, rrset: dict) -> None:
    route53.change_resource_record_sets(
        HostedZoneId=zone_id, ChangeBatch={"Changes": [{"Action": "CREATE", "ResourceRecordSet": rrset}]}
    )


def _problems(route53, zone_id: str, resolve) -> list[str]:
    facts = read_global_dns(route53, zone_id=zone_id, zone_name="example.com", name=NAME, resolve=resolve)
    return [f.one_line() for f in global_dns_findings(HK, facts)]


def test_a_delegated_zone_with_only_our_latency_records_passes(route53) -> None:
    zone_id, servers = _zone(route53)
    assert servers  # moto assigns a delegation set, as Route 53 does
    _record(
        route53,
        zone_id,
        {
            "Name": NAME,
            "Type": "A",
            "SetIdentifier": "ap-southeast-1",
            "Region": "ap-southeast-1",
            "AliasTarget": {
                "HostedZoneId": "Z1LMS91P8CMLE5",
                "DNSName": "k8s-inference-x-1.ap-southeast-1.elb.amazonaws.com.",
                "EvaluateTargetHealth": True,
            },
        },
    )
    assert _problems(route53, zone_id, lambda domain: tuple(s.upper() + "." for s in servers)) == []


def test_a_name_already_in_use_is_refused(route53) -> None:
    zone_id, servers = _zone(route53)
    _record(
        route53,
        zone_id,
        {"Name": NAME, "Type": "CNAME", "TTL": 300, "ResourceRecords": [{"Value": "old.example.org"}]},
    )
    (problem,) = _problems(route53, zone_id, lambda domain: servers)
    assert f"{NAME} is already in use in the zone (CNAME)" in problem
    assert "aiplat:platform.inference.global_endpoint.name" in problem


def test_a_zone_public_dns_does_not_delegate_to_is_refused(route53) -> None:
    zone_id, servers = _zone(route53)
    (problem,) = _problems(route53, zone_id, lambda domain: ("ns1.other-dns.example.net",))
    assert "example.com is delegated to ['ns1.other-dns.example.net'], not to this zone's" in problem
    assert "set the zone's four name servers as the domain's NS records" in problem


def test_no_answer_from_public_dns_is_refused_not_passed(route53) -> None:
    zone_id, _ = _zone(route53)

    def nxdomain(domain: str) -> tuple[str, ...]:
        raise LookupError(f"{domain}: NXDOMAIN")

    (problem,) = _problems(route53, zone_id, nxdomain)
    assert "public DNS did not say who serves example.com" in problem and "NXDOMAIN" in problem


def test_an_unknown_zone_is_refused(route53) -> None:
    (problem,) = _problems(route53, "Z0000000000000EXAMPLE", lambda domain: ())
    assert "Route 53 has no hosted zone Z0000000000000EXAMPLE" in problem


def test_a_private_zone_is_refused(route53) -> None:
    zone_id, servers = _zone(route53, private=True)
    problems = _problems(route53, zone_id, lambda domain: servers or ("ns.example.net",))
    assert any(f"zone {zone_id} is private" in p for p in problems)
