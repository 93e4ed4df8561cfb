"""Rules on the global inference endpoint (``inference.global_endpoint``): its zone, what the infer stacks
serving one name must agree on, and (preflight) whether the zone answers for the domain and the name is
free.

Agreement: clients of the global name land in either region (Route 53 answers by latency and health, never
by the model a request names: DNS does not see the request), so every region must serve the same set of
served names (models and adapters; their release versions may differ while a promotion moves through the
regions in waves) and accept the same API keys; the keys come from one source, the environment's train
stack (``storage.source_stack``, whose secret output both infer stacks read), so the stacks agree on it
(docs/inference/global-endpoint.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from infra.core.config import Role
from infra.core.facts import GlobalDnsFacts, Unreadable
from infra.stack.registry import Finding, Need, Phase, RuleContext, at, error, info, rule, skipped, warning

if TYPE_CHECKING:
    from infra.inference.config import InferenceConfig
    from infra.schema.platform import PlatformConfig

LATENCY_DOC = "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/routing-policy-latency.html"
DELEGATION_DOC = (
    "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/migrate-dns-domain-in-use.html"
    "#migrate-dns-update-domain-configuration"
)
ACM_DNS_DOC = "https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html"
# Terms of the inference section every stack serving one global name must share: the name and its record
# owner, the served names (MODELS_TERM), and any authentication setting of the section.
AGREED_FIELDS = ("global_endpoint",)
KEY_SOURCE = "storage.source_stack"
MODELS_TERM = "inference.models"


def _agreed(field_name: str) -> bool:
    return field_name in AGREED_FIELDS or "auth" in field_name or "api_key" in field_name


def serving_terms(inference: InferenceConfig | None, source_stack: str) -> tuple[tuple[str, str], ...]:
    """What an infer stack serving a global name must share with the others, from its validated
    ``inference`` section and its ``storage.source_stack`` (the API keys' source):
    ``(("inference.<field>", json), ...)``, the served names (models and adapters) sorted under
    ``MODELS_TERM``. Empty without a global endpoint."""
    if inference is None or not inference.global_endpoint:
        return ()
    section = inference.model_dump(mode="json")
    terms = {f"inference.{k}": json.dumps(v, sort_keys=True) for k, v in section.items() if _agreed(k)}
    terms[MODELS_TERM] = json.dumps(sorted(inference.served_names()))
    terms[KEY_SOURCE] = json.dumps(source_stack)
    return tuple(sorted(terms.items()))


def own_terms(cfg: PlatformConfig) -> dict[str, str]:
    """``serving_terms`` of the stack being checked, from its validated config."""
    return dict(serving_terms(cfg.inference, cfg.storage.source_stack or ""))


def _global(cfg: PlatformConfig):  # -> GlobalEndpointConfig | None
    if cfg.role is not Role.infer or cfg.inference is None:
        return None
    return cfg.inference.global_endpoint


def _ge(*parts: str) -> str:
    return at("inference", "global_endpoint", *parts)


def _partners(ctx: RuleContext) -> dict[str, dict[str, str]]:
    """The other infer stacks serving the same global name, with their terms."""
    assert ctx.stacks is not None
    mine = own_terms(ctx.cfg)
    name = mine.get("inference.global_endpoint")
    out = {}
    for stack, s in ctx.stacks.others(ctx.stack).items():
        terms = dict(s.serving)
        if s.role == "infer" and name is not None:
            theirs = json.loads(terms.get("inference.global_endpoint", "null")) or {}
            if theirs.get("name") == json.loads(name)["name"]:
                out[stack] = terms
    return out


@rule("global-endpoint-zone")
def global_endpoint_zone(ctx: RuleContext) -> Iterator[Finding]:
    """The global name lies in the stack's Route 53 zone and is not the regional name."""
    ge = _global(ctx.cfg)
    if ge is None:
        return
    https = ctx.cfg.inference.https  # type: ignore[union-attr]
    if https.dns_zone_id is None or https.dns_zone_name is None:
        yield error(
            _ge("name"),
            f"{ge.name} needs a Route 53 zone for its latency records and certificate validation, and "
            "inference.https names none",
            "set inference.https.dns_zone_id and dns_zone_name (the public zone the global name is in)",
            LATENCY_DOC,
        )
        return
    if not ge.name.endswith("." + https.dns_zone_name):
        yield error(
            _ge("name"),
            f"{ge.name} is not below the zone {https.dns_zone_name} (inference.https.dns_zone_name)",
            f"use a name ending in .{https.dns_zone_name}",
        )
    if ge.name == https.domain:
        yield error(
            _ge("name"),
            f"{ge.name} is also this region's name (inference.https.domain); the regional name stays "
            "for debugging and the rollout gate, pointing at this region only",
            "give the global name its own label, e.g. api.<zone>",
        )


def _models_agree(stack: str, name: str, mine: list[str], theirs: list[str]) -> Iterator[Finding]:
    """One error per served name one side has and the other lacks."""
    for model in sorted(set(mine) - set(theirs)):
        yield error(
            at("inference", "models"),
            f"{model!r} is served here but not by {stack}, which serves the same global name {name}: "
            f"Route 53 sends a client to either region by latency, never by the model it asks for, so a "
            f"request for {model!r} landing in {stack} would get 404",
            f"serve {model!r} in {stack} too (its models or a model's adapters), or remove it here",
            LATENCY_DOC,
        )
    for model in sorted(set(theirs) - set(mine)):
        yield error(
            at("inference", "models"),
            f"{stack} serves {model!r} under the same global name {name}, this stack does not: a request "
            f"for {model!r} routed here by latency would get 404",
            f"serve {model!r} here too, or remove it from {stack}",
            LATENCY_DOC,
        )


@rule("global-endpoint-agreement", needs=[Need.stacks])
def global_endpoint_agreement(ctx: RuleContext) -> Iterator[Finding]:
    """Every infer stack serving one global name serves the same set of served names (models and adapters;
    versions may differ during a promotion's waves) and API keys, and names the same validation record
    owner, which is one of them."""
    ge = _global(ctx.cfg)
    if ge is None:
        return
    mine = own_terms(ctx.cfg)
    partners = _partners(ctx)
    for stack, theirs in sorted(partners.items()):
        for term in sorted(set(mine) | set(theirs)):
            a, b = mine.get(term, "null"), theirs.get(term, "null")
            if term == MODELS_TERM:
                yield from _models_agree(stack, ge.name, json.loads(a) or [], json.loads(b) or [])
            elif a != b:
                yield error(
                    at(*term.split(".")) if term != KEY_SOURCE else at("storage", "source_stack"),
                    f"{term} is {a} here and {b} in {stack}, which serves the same global name {ge.name}: "
                    "a client would get a different answer depending on the region it lands in",
                    f"set the same {term} in both stacks",
                )
    serving = {ctx.stack, *partners}
    if ge.validation_record_owner not in serving:
        yield error(
            _ge("validation_record_owner"),
            f"{ge.validation_record_owner!r} is not an infer stack serving {ge.name} (those are: "
            f"{', '.join(sorted(serving))}); no stack would declare the certificate's validation record",
            f"name one of {', '.join(sorted(serving))}",
            ACM_DNS_DOC,
        )


@rule("global-endpoint-one-account", needs=[Need.stacks])
def global_endpoint_one_account(ctx: RuleContext) -> Iterator[Finding]:
    """The infer stacks serving one global name deploy into one AWS account. Its certificate in each
    region is validated by one DNS record, declared by the validation record owner; but ACM derives that
    record from the domain *and the account* ("ACM uses the same CNAME record for all certificate requests
    for a given domain name in a given account"), so a stack in another account would wait for a record
    nobody creates, until the certificate validation times out (75 minutes) and its `pulumi up` fails."""
    ge = _global(ctx.cfg)
    if ge is None:
        return
    assert ctx.stacks is not None
    mine = ctx.cfg.security.account.id or ""
    for stack in sorted(_partners(ctx)):
        theirs = ctx.stacks.stacks[stack].account_id
        if mine and theirs and mine != theirs:
            yield error(
                at("security", "account", "id"),
                f"this stack deploys into account {mine} and {stack}, which serves the same global name "
                f"{ge.name}, into {theirs}: ACM validation records are per domain and account, and only "
                f"{ge.validation_record_owner} declares one, so the certificate in the other account would "
                "never validate (pulumi up waits 75 minutes and fails)",
                "deploy every stack of one global name into one account, or give each account its own "
                "global name",
                ACM_DNS_DOC,
            )
        elif bool(mine) != bool(theirs):
            unset = ctx.stack if not mine else stack
            yield warning(
                at("security", "account", "id"),
                f"{unset} names no security.account.id, so the plan cannot tell whether the stacks serving "
                f"{ge.name} share an account (its certificate validation record is per account)",
                f"set security.account.id in {unset}",
                ACM_DNS_DOC,
            )


@rule("global-endpoint-regions", needs=[Need.stacks])
def global_endpoint_regions(ctx: RuleContext) -> Iterator[Finding]:
    """A global name served by one region only has nothing to fail over to."""
    ge = _global(ctx.cfg)
    if ge is None:
        return
    assert ctx.stacks is not None
    regions = {ctx.cfg.region} | {ctx.stacks.stacks[s].region for s in _partners(ctx)}
    if len(regions) < 2:
        yield warning(
            _ge("name"),
            f"{ge.name} is served from {ctx.cfg.region} only: when that region cannot serve, neither can "
            "the global name",
            "add the same inference.global_endpoint to an infer stack in another region",
            LATENCY_DOC,
        )


def global_dns_findings(cfg: PlatformConfig, facts: GlobalDnsFacts | Unreadable | None) -> list[Finding]:
    """The zone exists, is public and is the one public DNS delegates the domain to; nothing but this
    platform's latency records is at the global name."""
    ge = _global(cfg)
    if ge is None or facts is None:
        return []
    https = cfg.inference.https  # type: ignore[union-attr]
    zone = at("inference", "https", "dns_zone_id")
    if isinstance(facts, Unreadable):
        return [error(zone, f"the zone could not be read ({facts})", "allow route53:GetHostedZone")]
    if facts.zone_name is None:
        return [error(zone, f"Route 53 has no hosted zone {facts.zone_id}", "name an existing public zone")]
    out: list[Finding] = []
    if facts.zone_name.rstrip(".") != https.dns_zone_name:
        out.append(
            error(
                zone,
                f"zone {facts.zone_id} is {facts.zone_name.rstrip('.')}, not {https.dns_zone_name}",
                "set dns_zone_name to the zone's name or dns_zone_id to the zone of that name",
            )
        )
    if facts.private:
        out.append(
            error(zone, f"zone {facts.zone_id} is private", "use the public zone of the domain", LATENCY_DOC)
        )
    if isinstance(facts.delegated_to, Unreadable):
        out.append(
            error(
                zone,
                f"public DNS did not say who serves {https.dns_zone_name} ({facts.delegated_to})",
                "check that the domain is registered and delegated",
                DELEGATION_DOC,
            )
        )
    else:
        ours = {n.rstrip(".").lower() for n in facts.name_servers}
        theirs = {n.rstrip(".").lower() for n in facts.delegated_to}
        if not theirs or theirs != ours:
            out.append(
                error(
                    zone,
                    f"{https.dns_zone_name} is delegated to {sorted(theirs) or 'no name servers'}, not to "
                    f"this zone's {sorted(ours)}: records created here would not be seen",
                    "set the zone's four name servers as the domain's NS records at the registrar (or the "
                    "parent zone)",
                    DELEGATION_DOC,
                )
            )
    foreign = [r for r in facts.records if not _ours(r)]
    if foreign:
        shown = ", ".join(f"{r.type}{' ' + r.set_identifier if r.set_identifier else ''}" for r in foreign)
        out.append(
            error(
                _ge("name"),
                f"{ge.name} is already in use in the zone ({shown}): the latency records would be refused "
                "or would take the name over",
                "choose another global name, or remove those records if nothing uses them",
            )
        )
    return out


def _ours(r: Any) -> bool:
    """A record set this platform writes at the global name: an A latency alias to an ALB, one per region
    (set identifier = region, infra/edge/documents.py)."""
    return (
        r.type == "A" and bool(r.set_identifier) and r.alias_target.rstrip(".").endswith(".elb.amazonaws.com")
    )


@rule("global-endpoint-dns", phases=[Phase.preflight], needs=[Need.credentials])
def global_endpoint_dns(ctx: RuleContext) -> Iterator[Finding]:
    """The global endpoint's zone is public and authoritative for its domain, and its name is free."""
    assert ctx.live is not None
    ge = _global(ctx.cfg)
    if ge is None:
        yield skipped(_ge("name"), "the stack serves no global endpoint (inference.global_endpoint unset)")
    elif ctx.live.global_dns is None:
        yield skipped(_ge("name"), "the zone and the name were not read")
    else:
        found = global_dns_findings(ctx.cfg, ctx.live.global_dns)
        free = info(_ge("name"), f"{ge.name}: the zone is public and delegated, the name is free")
        yield from found or [free]
