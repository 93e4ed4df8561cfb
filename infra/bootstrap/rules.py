"""Bootstrap's pure checks: prod placeholders (AWS's example account in the fields that name who may deploy
and guard the stack) and the steps only a person can take before the first ``pulumi up``, each with the
preflight check that verifies it. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.core.config import Environment
from infra.stack.registry import Finding, RuleContext, at, error, rule, warning

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

# The account of AWS's documentation examples
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html uses 123456789012).
PLACEHOLDER_ACCOUNT = "123456789012"
# the config sections whose strings name accounts and principals: the stack's account and key guards, and
# each team's CI and engineer roles
_SECTIONS = ("security", "teams")


def _strings(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, (*path, str(k)))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, str(i)))


def placeholders(cfg: PlatformConfig) -> list[tuple[str, str]]:
    """(field, value) of every account ID or ARN in ``security`` and ``teams`` that names the placeholder
    account."""
    dump = cfg.model_dump(mode="json", include=set(_SECTIONS))
    return [
        (at(*path), value)
        for path, value in _strings(dump, ())
        if value == PLACEHOLDER_ACCOUNT or f":{PLACEHOLDER_ACCOUNT}:" in value
    ]


@rule("no-placeholder-principals")
def no_placeholder_principals(ctx: RuleContext) -> Iterator[Finding]:
    """A prod stack names real accounts and roles, not AWS's example account 123456789012 (dev: a warning)."""
    cfg = ctx.cfg
    found = placeholders(cfg)
    example = cfg.security.account.example
    if example and cfg.security.account.id not in (None, PLACEHOLDER_ACCOUNT):
        # a warning: pulumi up compares the credentials' account with this one, and aiplat bootstrap
        # creates nothing for a stack marked as an example
        yield warning(
            at("security", "account", "example"),
            f"is true but security.account.id is {cfg.security.account.id}, a real account: an example "
            "stack keeps AWS's placeholder account",
            "remove `example: true` (the placeholders left are then refused on prod)",
        )
    if not found:
        return
    fields = ", ".join(f"{f} ({v})" for f, v in found)
    problem = f"names AWS's example account {PLACEHOLDER_ACCOUNT}: {fields}"
    fix = (
        "replace them with your account ID and the ARNs of your roles (docs/deploy.md step 7); aiplat "
        "bootstrap refuses to create anything for them"
    )
    if cfg.environment is Environment.prod and not example:
        yield error(at("security", "account", "id"), problem, fix)
    else:
        yield warning(at("security", "account", "id"), problem, fix)


@dataclass(frozen=True)
class HumanStep:
    """Something only a person can do before the first ``pulumi up``, and what verifies it."""

    what: str
    how: str
    check: str  # the preflight check (its rule name) that verifies it, or "" when none does
    verified_by: str = "aiplat preflight"


def human_steps(cfg: PlatformConfig, *, stack: str) -> list[HumanStep]:
    """What bootstrap cannot create for ``cfg``: quotas, reservations, opt-in regions, DNS, secrets."""
    steps: list[HumanStep] = []
    steps.append(
        HumanStep(
            f"{cfg.region} enabled for the account, if it is an opt-in region (the regions of "
            "storage.replicate_to are checked with their own stacks)",
            f"AWS console > Account > AWS Regions, or `aws account enable-region --region-name {cfg.region}` "
            "(regions launched after March 2019 are off until enabled)",
            "region-enabled",
        )
    )
    if cfg.node_pools or cfg.cluster_services.karpenter.node_pools:
        steps.append(
            HumanStep(
                "vCPU quotas for every pool at max_size and every Karpenter pool at its GPU limit",
                "Service Quotas > Amazon EC2 > 'Running On-Demand P instances' (and G, Spot): request the "
                "increase (days, not minutes)",
                "vcpu-quotas",
            )
        )
    reserved = [name for name, p in cfg.node_pools.items() if p.capacity_reservation is not None]
    if reserved:
        steps.append(
            HumanStep(
                f"Capacity Blocks / ODCRs of pools {', '.join(reserved)} purchased and active",
                "EC2 console > Capacity Reservations (Capacity Blocks for ML: purchase the block), then copy "
                "its id and zone into node_pools.<pool>.capacity_reservation",
                "capacity-reservations",
            )
        )
    serving = cfg.inference
    if serving is not None and serving.https.dns_zone_name:
        steps.append(
            HumanStep(
                f"Route 53 public zone {serving.https.dns_zone_name} delegated to Route 53",
                "create the hosted zone and set its NS records at the parent domain's registrar; copy its id "
                "into inference.https.dns_zone_id",
                "global-endpoint-dns",
            )
        )
    for name, key in cfg.monitoring.receiver_secret_keys().items():
        steps.append(
            HumanStep(
                f"alert receiver {name}'s URL set as a Pulumi secret",
                f"pulumi config set --secret aiplat:{key} <url> --stack {stack}",
                "",
                "pulumi up (the program reads it; no preflight check)",
            )
        )
    return steps
