"""Chart values of cert-manager. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.pools.documents.nodes import pool_affinity


def cert_manager_values(*, system_pools: Sequence[str]) -> dict[str, Any]:
    """cert-manager chart v1.21.1 (``deploy/charts/cert-manager/values.yaml``): CRDs installed and upgraded
    with the release (``crds.enabled``) and kept on uninstall (``crds.keep``, so Certificates survive);
    every component on the system pools."""
    affinity = pool_affinity(system_pools)
    return {
        "crds": {"enabled": True, "keep": True},
        "affinity": affinity,
        "webhook": {"affinity": affinity},
        "cainjector": {"affinity": affinity},
        "startupapicheck": {"affinity": affinity},
    }
