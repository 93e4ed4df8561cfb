"""What a routine change must not delete in prod: keys, data buckets and image repositories."""

from __future__ import annotations

from collections.abc import Iterator

from .aws import BUCKET_TYPES, KMS_KEY_TYPES
from .core import HIGH, Ctx, Stack, Violation, stack_rule, violation
from .encryption import log_target_buckets

REPOSITORY = "aws:ecr/repository:Repository"


@stack_rule(
    "protect-stateful-in-prod",
    description="In prod stacks, KMS keys, data buckets (every bucket except server-access-log targets) and "
    "ECR repositories are protected: Pulumi refuses to delete them in an update or destroy.",
    severity=HIGH,
    doc="https://www.pulumi.com/docs/iac/concepts/options/protect/",
    unknowns="'protect' is a resource option and always known. The analyzer protocol does not carry "
    "retain_on_delete, so the rule asks for protect (set both: retain_on_delete keeps the cloud resource "
    "when "
    "the protection is lifted deliberately). A stack without an environment in its config is a violation.",
)
def protect_stateful_in_prod(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    env = ctx.stack.environment
    if env not in ("prod", "dev"):
        yield violation(
            "the stack's environment is unknown (PULUMI_CONFIG has no aiplat:platform.environment)",
            "set aiplat:platform.environment in the stack's config",
        )
        return
    if env != "prod":
        return
    logs = log_target_buckets(stack)
    precious = [r for r in stack.of_type(*KMS_KEY_TYPES, REPOSITORY)]
    precious += [b for b in stack.of_type(*BUCKET_TYPES) if b.urn not in logs]
    for r in precious:
        if not r.protect:
            yield violation(
                f"{r.label} is not protected in a prod stack",
                "set opts protect=True (and retain_on_delete=True) on it",
                r.urn,
            )
