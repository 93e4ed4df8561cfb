"""The rollout's health gate after ``up`` (production ``HealthGate``).

1. **outputs**: every output ``rollout.yaml`` requires is present and not empty (infer stacks also the
   inference URL output);
2. **nodes**: every node group of the ``nodeGroups`` output is ACTIVE without health issues, and the
   Kubernetes API lists at least its desired number of Ready nodes (label ``eks.amazonaws.com/nodegroup``),
   polled until ``nodes_ready_timeout_s``;
3. **inference** (infer stacks): ``GET <inferenceUrl><inference_health_path>`` answers 200.
The judging is pure (``outputs_check``, ``nodes_check``); the calls are in ``infra/io/cluster_health.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from infra.io.aws_live import Clients
from infra.io.cluster_health import (
    NodeGroupHealth,
    cluster_access,
    eks_token,
    http_status,
    list_nodes,
    nodegroup_health,
)
from infra.model.config.base import Role
from infra.model.config.schema import PlatformConfig
from infra.model.rollout import HealthGateConfig
from infra.ops.rollout import GateCheck

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"  # set by EKS on managed node group nodes


def required_outputs(cfg: PlatformConfig, health: HealthGateConfig) -> list[str]:
    names = list(health.required_outputs)
    if cfg.role is Role.infer:
        names.append(health.inference_url_output)
    return names


def outputs_check(outputs: Mapping[str, Any], required: list[str]) -> GateCheck:
    missing = [k for k in required if outputs.get(k) in (None, "", [], {})]
    if missing:
        return GateCheck("outputs", False, f"missing stack outputs: {', '.join(missing)}")
    return GateCheck("outputs", True, f"{len(required)} required outputs present")


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def nodes_check(groups: list[NodeGroupHealth], nodes: list[Mapping[str, Any]]) -> GateCheck:
    """Every node group ACTIVE, no health issues, at least ``desired`` Ready nodes carrying its label."""
    problems: list[str] = []
    seen: list[str] = []
    for g in groups:
        if g.error or g.status != "ACTIVE" or g.issues:
            why = g.error or (f"{g.status}; " + "; ".join(g.issues) if g.issues else g.status)
            problems.append(f"node group {g.name}: {why}")
            continue
        ready = sum(
            1
            for n in nodes
            if n.get("metadata", {}).get("labels", {}).get(NODEGROUP_LABEL) == g.name and _ready(n)
        )
        if ready < g.desired:
            problems.append(f"node group {g.name}: {ready} of {g.desired} nodes Ready")
        else:
            seen.append(f"{g.name} {ready}/{g.desired}")
    if problems:
        return GateCheck("nodes", False, "; ".join(problems))
    return GateCheck("nodes", True, "Ready: " + ", ".join(seen) if seen else "no node groups")


class AwsHealthGate:
    """``HealthGate`` against the deployed stack, with the credentials of ``clients``."""

    def __init__(
        self,
        health: HealthGateConfig,
        clients: Clients,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.health, self.clients, self.sleep, self.clock = health, clients, sleep, clock

    def _nodes(self, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> GateCheck:
        cluster = str(outputs["clusterName"])
        names = sorted(dict(outputs.get("nodeGroups") or {}).values())
        eks = self.clients("eks", cfg.region)
        deadline = self.clock() + self.health.nodes_ready_timeout_s
        while True:
            groups = [nodegroup_health(eks, cluster, n) for n in names]
            try:
                endpoint, ca = cluster_access(eks, cluster)
                token = eks_token(self.clients("sts", cfg.region), cluster)
                nodes = list_nodes(endpoint, token, ca, self.health.http_timeout_s)
                check = nodes_check(groups, nodes)
            except (OSError, ValueError, KeyError) as exc:
                check = GateCheck("nodes", False, f"the Kubernetes API did not answer: {exc}")
            if check.ok or self.clock() >= deadline:
                return check
            self.sleep(self.health.poll_interval_s)

    def _inference(self, outputs: Mapping[str, Any]) -> GateCheck:
        url = str(outputs[self.health.inference_url_output]).rstrip("/") + self.health.inference_health_path
        status, why = http_status(url, self.health.http_timeout_s)
        if status == 200:
            return GateCheck("inference", True, f"GET {url}: 200")
        return GateCheck("inference", False, f"GET {url}: {status if status is not None else why}")

    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        checks = [outputs_check(outputs, required_outputs(cfg, self.health))]
        if not checks[0].ok:
            return checks
        checks.append(self._nodes(cfg, outputs))
        if cfg.role is Role.infer and checks[-1].ok:
            checks.append(self._inference(outputs))
        return checks
