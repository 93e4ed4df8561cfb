"""Config of the global inference endpoint (``inference.global_endpoint``): one name that every infer stack
of an environment serves, answered by Route 53 with the nearest region whose load balancer can serve.

Why Route 53 latency alias records with ``EvaluateTargetHealth`` and not AWS Global Accelerator: see
``docs/inference/global-endpoint.md`` ("Why Route 53 and not Global Accelerator"). Checks that look at the
other stacks (one name, one model policy, one key source) are rules (``infra/edge/rules.py``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infra.core.config import Strict
from infra.core.project import CONFIG_NAMESPACE

# A DNS name (RFC 1123 labels, lower case), at least two labels; the same pattern as inference.https.domain.
DOMAIN = r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$"
# The secret stack config holding the inference API keys (a JSON list of strings), set with
# `pulumi config set --secret --path 'aiplat:inference-api-keys[0]' <key>`: on the environment's train stack
# for the infer stacks of a global endpoint (their one key set), else on an infer stack itself.
API_KEYS_CONFIG = "inference-api-keys"
API_KEYS_KEY = f"{CONFIG_NAMESPACE}:{API_KEYS_CONFIG}"
# A Pulumi stack name of this project (stacks/Pulumi.<stack>.yaml).
STACK = r"^[a-z0-9][a-z0-9-]{0,62}$"


class GlobalEndpointConfig(Strict):
    """One name for the model in every region: each infer stack adds its region's latency record (an alias
    of its own ALB, health evaluated), an ACM certificate for the name in its region, and a drain switch
    that ``aiplat rollout`` turns during the stack's wave. The hosted zone is ``inference.https``'s
    (``dns_zone_id``/``dns_zone_name``); the regional name (``https.domain``) stays for debugging and the
    rollout's health gate."""

    name: Annotated[str, Field(pattern=DOMAIN, max_length=253)] = Field(
        description="The global name clients use, e.g. api.inference.example.com: in https.dns_zone_name's "
        "zone, the same in every infer stack of the environment, never a stack's regional https.domain."
    )
    validation_record_owner: Annotated[str, Field(pattern=STACK)] = Field(
        description="The one infer stack that declares the name's ACM DNS validation record (ACM asks every "
        "region's certificate for the same CNAME; one owner, the others' certificates wait for it). The "
        "same in every stack serving the name."
    )
