"""What ``aiplat preflight`` reads about the global endpoint's zone: Route 53 GetHostedZone (name, private,
the zone's name servers), ListResourceRecordSets at the global name, and the NS records public DNS gives
for the zone's domain (dnspython's stub resolver). ``infra/edge/rules.py`` judges them.
https://docs.aws.amazon.com/Route53/latest/APIReference/API_GetHostedZone.html
"""

from __future__ import annotations

from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError

from infra.core.facts import DnsRecordFacts, GlobalDnsFacts, Unreadable

ResolveNs = Callable[[str], tuple[str, ...]]
"""``resolve_ns(domain)`` -> the name servers public DNS names for ``domain``; raises on no answer."""


def resolve_ns(domain: str) -> tuple[str, ...]:
    """The NS records of ``domain`` through the machine's resolvers."""
    import dns.resolver

    answer = dns.resolver.resolve(domain, "NS", lifetime=10)
    return tuple(sorted(str(r.target).rstrip(".").lower() for r in answer))


def _fqdn(name: str) -> str:
    return name.rstrip(".") + "."


def read_global_dns(
    route53: object, *, zone_id: str, zone_name: str, name: str, resolve: ResolveNs = resolve_ns
) -> GlobalDnsFacts | Unreadable:
    """The zone ``zone_id`` and the record sets at ``name`` in it; the public delegation of ``zone_name``."""
    try:
        zone = route53.get_hosted_zone(Id=zone_id)  # type: ignore[attr-defined]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchHostedZone":
            return GlobalDnsFacts(zone_id=zone_id, zone_name=None)
        return Unreadable(f"route53:GetHostedZone {zone_id}", str(exc))
    except BotoCoreError as exc:
        return Unreadable(f"route53:GetHostedZone {zone_id}", str(exc))
    info = zone["HostedZone"]
    name_servers = tuple(zone.get("DelegationSet", {}).get("NameServers", ()))
    try:
        listed = route53.list_resource_record_sets(  # type: ignore[attr-defined]
            HostedZoneId=zone_id, StartRecordName=_fqdn(name), MaxItems="100"
        )["ResourceRecordSets"]
    except (ClientError, BotoCoreError) as exc:
        return Unreadable(f"route53:ListResourceRecordSets {zone_id}", str(exc))
    records = tuple(
        DnsRecordFacts(
            type=r["Type"],
            set_identifier=r.get("SetIdentifier", ""),
            alias_target=(r.get("AliasTarget") or {}).get("DNSName", ""),
        )
        for r in listed
        if r["Name"].rstrip(".").lower() == name.rstrip(".").lower()
    )
    try:
        delegated: tuple[str, ...] | Unreadable = resolve(zone_name)
    except Exception as exc:  # NXDOMAIN, no answer, timeout: the delegation cannot be confirmed
        delegated = Unreadable(f"DNS NS {zone_name}", f"{type(exc).__name__}: {exc}")
    return GlobalDnsFacts(
        zone_id=zone_id,
        zone_name=info["Name"],
        private=bool(info.get("Config", {}).get("PrivateZone")),
        name_servers=name_servers,
        delegated_to=delegated,
        records=records,
    )
