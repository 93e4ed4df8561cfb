"""The production ``Drainer`` of ``aiplat rollout``: a region leaves the global endpoint when its drain
switch (a Route 53 health check, ``infra/edge/documents.py``: always unhealthy unless inverted, so a serving
region's switch is inverted) is not inverted, and comes back when it is inverted again.

The switch is named by the stack's ``globalEndpoint.drainSwitch`` output (read before the update: the
stack as it is deployed). A stack without that output is not in the global endpoint yet (its first
deploy): nothing to drain. After inverting, the drain waits ``wait_s`` (the alias answer's 60 s TTL in
resolvers and clients, plus Route 53's propagation) before the update may start, so that clients which
resolved the name before the drain have let go of the region. API: Route 53 UpdateHealthCheck ``Inverted``
and GetHealthCheck (https://docs.aws.amazon.com/Route53/latest/APIReference/API_UpdateHealthCheck.html).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from infra.edge.documents import DRAINED_INVERTED, OUTPUT, SERVING_INVERTED
from infra.io.aws_live import Clients
from infra.ops.rollout import DrainStep
from infra.schema.platform import PlatformConfig

# Route 53 is a global service; its API endpoint is in us-east-1.
ROUTE53_REGION = "us-east-1"
# 60 s alias TTL (the ALB's record) + 30 s for Route 53 to apply the health check change at its edges.
DEFAULT_WAIT_S = 90.0

Outputs = Callable[[str], Mapping[str, Any]]
"""``outputs(stack)`` -> the stack's current outputs (empty before its first deploy)."""


class Route53Drainer:
    """Drains a region by clearing its switch's Inverted flag (unhealthy), undrains by setting it again."""

    def __init__(
        self,
        clients: Clients,
        outputs: Outputs,
        *,
        configs: Mapping[str, PlatformConfig] | None = None,
        wait_s: float = DEFAULT_WAIT_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``configs``: the project's stacks; a region is not drained while another region of the same
        global name is (Route 53 would then answer with every region, the one being updated included)."""
        self.clients = clients
        self.outputs = outputs
        self.configs = dict(configs or {})
        self.wait_s = wait_s
        self.sleep = sleep

    def _drained_peers(self, stack: str, name: str) -> list[str]:
        """The other stacks of the global ``name`` that are drained now (their switch not inverted)."""
        route53 = self.clients("route53", ROUTE53_REGION)
        out = []
        for peer, cfg in sorted(self.configs.items()):
            ge = cfg.inference.global_endpoint if cfg.inference is not None else None
            switch = self._switch(peer) if peer != stack and ge is not None and ge.name == name else None
            if switch is None:
                continue
            check = route53.get_health_check(HealthCheckId=switch)["HealthCheck"]["HealthCheckConfig"]
            if bool(check.get("Inverted")) is DRAINED_INVERTED:
                out.append(peer)
        return out

    def _switch(self, stack: str) -> str | None:
        entry = self.outputs(stack).get(OUTPUT) or {}
        return entry.get("drainSwitch") if isinstance(entry, Mapping) else None

    def _set(self, stack: str, cfg: PlatformConfig, *, drained: bool) -> DrainStep:
        action = "drain" if drained else "undrain"
        inverted = DRAINED_INVERTED if drained else SERVING_INVERTED
        ge = cfg.inference.global_endpoint if cfg.inference is not None else None
        name = ge.name if ge is not None else "the global endpoint"
        switch = self._switch(stack)
        if switch is None:
            # first deploy: the stack creates its record with the switch on, health evaluated
            return DrainStep(
                action, True, f"{stack} has no {OUTPUT} output yet: not in {name}, nothing to {action}"
            )
        route53 = self.clients("route53", ROUTE53_REGION)
        try:
            peers = self._drained_peers(stack, name) if drained else []
            if peers:
                return DrainStep(
                    action,
                    False,
                    f"{', '.join(peers)} is out of {name} already: draining {stack} too would leave no "
                    "region to answer it (Route 53 then answers with all of them); put it back first",
                )
            route53.update_health_check(HealthCheckId=switch, Inverted=inverted)
            seen = route53.get_health_check(HealthCheckId=switch)["HealthCheck"]["HealthCheckConfig"]
        except (ClientError, BotoCoreError) as exc:
            return DrainStep(action, False, f"route53: {switch}: {exc}")
        if bool(seen.get("Inverted")) is not inverted:
            return DrainStep(
                action, False, f"health check {switch} still has Inverted={seen.get('Inverted')}"
            )
        if drained:
            self.sleep(self.wait_s)
            return DrainStep(
                action,
                True,
                f"{cfg.region} out of {name} (health check {switch} no longer inverted: unhealthy; waited "
                f"{self.wait_s:g} s for "
                "cached answers to expire)",
            )
        return DrainStep(action, True, f"{cfg.region} back in {name} (health check {switch})")

    def drain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        return self._set(stack, cfg, drained=True)

    def undrain(self, stack: str, cfg: PlatformConfig) -> DrainStep:
        return self._set(stack, cfg, drained=False)
