"""The global endpoint as data: the Ingress rules for the extra host, the agreement terms between stacks,
and the drain switch's settings. Pure.

Routing: one Route 53 latency alias record per region (same name and type, ``SetIdentifier`` = the region),
``EvaluateTargetHealth`` on its own ALB: an ALB counts as healthy only while every target group that has
targets has a healthy one (Route 53 API reference, AliasTarget.EvaluateTargetHealth). Each record also
carries a health check that is the region's drain switch: a CALCULATED check with no children and
``HealthThreshold`` 1 is always unhealthy ("If you specify a number greater than the number of child health
checks, Route 53 always considers this health check to be unhealthy", Route 53 API reference,
HealthCheckConfig.HealthThreshold), so it is created *inverted*, which makes it healthy: the region serves.
``aiplat rollout`` drains a region by clearing ``Inverted`` (the check is then unhealthy and the region leaves
the answers) and puts it back by setting it again. Not the always-healthy threshold 0: older
terraform-provider-aws releases dropped an explicit 0 and Route 53 refused the check ("Calculated health
checks must have a health threshold specified", hashicorp/terraform-provider-aws#39428, #44004; fixed by
#44006), and a threshold of 1 does not depend on which provider release pulumi-aws bridges.
https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/health-checks-how-route-53-chooses-records.html
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

# The stack output naming the region's entry (its drain switch: what `aiplat rollout` drains).
OUTPUT = "globalEndpoint"
# The record type of an alias to an ALB with ip-address-type ipv4 (alb.ingress.kubernetes.io/ip-address-type).
RECORD_TYPE = "A"
DRAIN_CHECK_TYPE = "CALCULATED"
# 1 healthy child needed and none: always unhealthy unless inverted. Serving is inverted; the drain is not.
DRAIN_HEALTH_THRESHOLD = 1
SERVING_INVERTED = True
DRAINED_INVERTED = False
# The property `aiplat rollout` owns on the live check; `pulumi up` must leave it as the rollout set it.
DRAIN_PROPERTY = "invertHealthcheck"
# How long resolvers may cache an alias answer: the ALB's own record TTL, 60 s, is what Route 53 returns
# for an alias to it (an alias record takes the target's TTL).
ALB_ALIAS_TTL_S = 60


def set_identifier(region: str) -> str:
    """The record of ``region`` among the latency records of the global name (unique per name and type)."""
    return region


def with_hosts(spec: Mapping[str, Any], hosts: Sequence[str]) -> dict[str, Any]:
    """``Ingress.spec`` with one more rule per name in ``hosts``, each a copy of the first rule's paths:
    the ALB answers the global name exactly as it answers the regional one (the path list stays the
    inference capability's)."""
    out = copy.deepcopy(dict(spec))
    rules = out.get("rules") or []
    if not hosts:
        return out
    if not rules:
        raise ValueError("the Ingress spec has no rule whose paths the global name could reuse")
    known = {r.get("host") for r in rules}
    out["rules"] = [*rules, *({**copy.deepcopy(rules[0]), "host": h} for h in hosts if h not in known)]
    return out


def certificate_arns(regional: Any, global_: Any) -> list[Any]:
    """The certificates of the HTTPS listener, default first: the load balancer controller takes a
    comma-separated list in ``alb.ingress.kubernetes.io/certificate-arn`` (the first is the listener's
    default, the others go to its certificate list; SNI picks by name)."""
    return [regional, global_]
