"""The pack: its name and description, and every rule module in a fixed order."""

from __future__ import annotations

from pulumi_policy import Policy

from . import (  # noqa: F401  (each import registers its rules)
    audit,
    capacity,
    cost,
    deferred,
    ecr,
    eks,
    encryption,
    iam,
    kms,
    kubernetes,
    loadbalancers,
    network,
    nodes,
    protection,
    quotas,
    releases,
    residency,
    s3,
    tags,
    training,
)
from .core import Rule, registered

PACK_NAME = "aiplat-policies"
DESCRIPTION = (
    "aiplat: security, cost and placement rules for a GPU training and inference platform on AWS (EKS, EFA, "
    "S3, ECR, Kubernetes workloads)"
)


def rules() -> list[Rule]:
    """Every rule of the pack, sorted by name."""
    return sorted(registered(), key=lambda r: r.name)


def policies() -> list[Policy]:
    """The CrossGuard policy objects, one per rule."""
    return [r.policy() for r in rules()]
