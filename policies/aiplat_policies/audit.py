"""Audit: a CloudTrail trail records every API call of the account, in every region."""

from __future__ import annotations

from collections.abc import Iterator

from .core import HIGH, Ctx, Stack, Violation, stack_rule, truthy, violation

TRAIL = "aws:cloudtrail/trail:Trail"


@stack_rule(
    "cloudtrail-present",
    description="The stack declares a multi-region CloudTrail trail with log file validation and KMS "
    "encryption, unless the config names where this stack's trail lives (an organization trail or another "
    "stack): the pack config's trailElsewhere, or the stack's security.audit.trail: existing.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-create-and-update-a-trail.html",
    unknowns="Unknown flags are violations (they are literals); an unknown KMS key counts as set.",
    config={
        "trailElsewhere": {
            "type": "string",
            "default": "",
            "description": "Where the stack's trail lives, e.g. 'organization trail o-abc123' or "
            "'prod-us-train' (empty: the stack declares its own).",
        }
    },
)
def cloudtrail_present(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    # named in the pack config, or in the stack's own config (security.audit.trail: existing)
    if ctx.config["trailElsewhere"] or ctx.stack.trail_elsewhere:
        return
    trails = stack.of_type(TRAIL)
    good = [
        t
        for t in trails
        if truthy(t.get("isMultiRegionTrail")) is True
        and truthy(t.get("enableLogFileValidation")) is True
        and t.get("kmsKeyId") is not None
        and truthy(t.get("enableLogging")) is not False
    ]
    if good:
        return
    if trails:
        for t in trails:
            yield violation(
                f"trail {t.name!r} is not multi-region with log file validation and a KMS key",
                "set is_multi_region_trail, enable_log_file_validation and kms_key_id",
                t.urn,
            )
    else:
        yield violation(
            f"stack {ctx.stack.name!r} declares no CloudTrail trail",
            "add a multi-region aws.cloudtrail.Trail (log file validation, the logs key, an Object Lock "
            "bucket), or name the trail that covers this stack in trailElsewhere",
        )
