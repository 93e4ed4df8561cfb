"""Chart values of metrics-server. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.pools.documents.nodes import pool_affinity


def metrics_server_values(*, replicas: int, system_pools: Sequence[str]) -> dict[str, Any]:
    """kubernetes-sigs/metrics-server chart values (the pin ``METRICS_SERVER_CHART`` of the config): HA with a
    PodDisruptionBudget, on system pools."""
    return {
        "replicas": replicas,
        "podDisruptionBudget": {"enabled": replicas > 1, "minAvailable": 1},
        "affinity": pool_affinity(system_pools),
    }
