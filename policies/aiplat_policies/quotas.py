"""Policy documents within AWS's size quotas, measured on what the stack deploys (infra/core/policy_quotas.py,
the one source of the numbers that ``aiplat plan`` reads too)."""

from __future__ import annotations

from collections.abc import Iterator

from infra.core import policy_quotas

from .core import HIGH, Ctx, Stack, Violation, stack_rule, violation


@stack_rule(
    "policy-documents-within-quotas",
    description="Every IAM managed policy (6,144 characters without white space), each role's inline "
    "policies together (10,240), trust policy (2,048 by default) and count of managed policies (10 by "
    "default), every KMS key policy (32 KB) and S3 bucket policy (20 KB) is within AWS's quota: a larger "
    "document fails its create call half-way through an update.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html",
    unknowns="A document unknown at preview (built from resources of the same update) is not measured then; "
    "the update's stack analysis measures the resolved document.",
)
def policy_documents_within_quotas(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    registered = [
        policy_quotas.Registered(
            urn=r.urn,
            type=r.type,
            name=r.name,
            inputs=r.props,
            property_dependencies={k: [d.urn for d in v] for k, v in r.prop_deps.items()},
        )
        for r in stack.resources
    ]
    for over in policy_quotas.over_quota(registered):
        yield violation(over.problem(), over.fix, urn=over.urn)
