"""What the typed CRD models share: the strict base (the one of ``infra/training/crds.py``: a field we did not
model fails) and object metadata as the API server takes it (names are DNS subdomains, at most 253)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infra.training.crds import Strict

__all__ = ["ClusterMetadata", "NamespacedMetadata", "ObjectName", "Strict"]

ObjectName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)]


class ClusterMetadata(Strict):
    """A cluster-scoped object's metadata (the fields we set)."""

    name: ObjectName
    labels: dict[str, str] = {}


class NamespacedMetadata(Strict):
    """A namespaced object's metadata (the fields we set)."""

    name: ObjectName
    namespace: Annotated[str, Field(min_length=1)]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
