"""Kubernetes pieces the charts' values share: the IRSA annotation, and the toleration of every taint.
Pure."""

from __future__ import annotations

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


# Device plugins tolerate every taint: their node affinity already confines them to GPU/EFA pools.
TOLERATE_ALL = [{"operator": "Exists"}]
