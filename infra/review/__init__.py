"""The policy review: the project's CrossGuard pack (``policies/``) run against an offline plan through the
analyzer code path the Pulumi engine drives (``aiplat review``; ``make plan`` runs it after planning)."""

from infra.review.engine import (
    Diagnostic,
    PolicyFindings,
    StackReview,
    engine_environment,
    reconcile_config,
    review_configured_plan,
    review_plan,
)

__all__ = [
    "Diagnostic",
    "PolicyFindings",
    "StackReview",
    "engine_environment",
    "reconcile_config",
    "review_configured_plan",
    "review_plan",
]
