"""Data residency: a stack creates resources only in the regions its role allows, and replicates only to
the allowed replication regions. The role (train or infer) comes from the stack's config."""

from __future__ import annotations

from collections.abc import Iterator

from infra.stack.allowlists import REGIONS_BY_ROLE, REPLICATION_REGIONS, allowed_regions, as_json

from .aws import AWS_PROVIDER, BUCKET_TYPES, bucket_name_of_arn, region_of, stack_role_problem
from .core import (
    CRITICAL,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    dig,
    resource_rule,
    stack_rule,
    violation,
)

DOC = "https://docs.aws.amazon.com/whitepapers/latest/aws-overview/global-infrastructure.html"

REGIONS_CONFIG = {
    "allowedRegions": {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
        "default": as_json(REGIONS_BY_ROLE),
        "description": "Stack role (train, infer) -> regions its resources may be created in.",
    },
    "replicationRegions": {
        "type": "array",
        "items": {"type": "string"},
        "default": list(REPLICATION_REGIONS),
        "description": "Regions artifacts and images may be replicated to (and replicas created in).",
    },
}


@resource_rule(
    "data-residency-regions",
    description="AWS resources (and AWS providers) are created only in the regions allowed for the stack's "
    "role; a train stack may also create replicas in the replication regions.",
    severity=CRITICAL,
    doc=DOC,
    types=(),
    unknowns="An unknown region is a violation (regions are literals); a stack without a role in its config "
    "is a violation.",
    config=REGIONS_CONFIG,
)
def data_residency_regions(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if not (r.type.startswith("aws:") or r.type == AWS_PROVIDER):
        return
    region = region_of(r)
    if region is None:
        if r.type.startswith("aws:") and r.provider_type is None:
            yield violation(
                "the resource has no AWS provider, so its region cannot be told", "use the stack's provider"
            )
        return
    problem = stack_role_problem(ctx.stack.role)
    if problem:
        yield violation(problem, "set aiplat:platform.role in the stack's config")
        return
    allowed = allowed_regions(ctx.stack.role, ctx.config["allowedRegions"], ctx.config["replicationRegions"])
    if region is UNKNOWN or region not in allowed:
        yield violation(
            f"created in {region}, which is not allowed for {ctx.stack.role} stacks ({allowed})",
            f"deploy {ctx.stack.role} stacks only to {allowed}, or change allowedRegions in the pack config",
        )


REPLICATION_CONFIG = {"replicationRegions": REGIONS_CONFIG["replicationRegions"]}
S3_REPLICATION = ("aws:s3/bucketReplicationConfig:BucketReplicationConfig",)
ECR_REPLICATION = "aws:ecr/replicationConfiguration:ReplicationConfiguration"


@stack_rule(
    "data-residency-replication",
    description="S3 and ECR replication go only to the allowed replication regions, into buckets this stack "
    "declares (so their region is known).",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication.html",
    unknowns="A destination bucket is found by its ARN's name; an ARN unknown at preview (a bucket of the "
    "same update) by property dependency: every bucket the rules were computed from must be in an allowed "
    "region. A destination that is not in the stack, or an unknown region, is a violation.",
    config=REPLICATION_CONFIG,
)
def data_residency_replication(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    allowed = list(ctx.config["replicationRegions"])
    buckets = stack.of_type(*BUCKET_TYPES)
    fix = f"replicate only to {allowed} (replicationRegions in the pack config)"
    for config in stack.of_type(*S3_REPLICATION):
        deps = [b for b in config.depends_on("rules") if b in buckets]
        for rule in as_list(config.get("rules")):
            arn = dig(rule, "destination", "bucket")
            name = bucket_name_of_arn(arn)
            target = [b for b in buckets if name is not None and b.get("bucket") == name]
            if not target and arn is UNKNOWN:
                # The ARN of a bucket this update creates is unknown at preview (on a new stack, every
                # replica bucket's). It can only come from a resource the rules were computed from: when
                # every such bucket is in an allowed region, so is this rule's destination.
                target = deps
            regions = [region_of(b) for b in target]
            bad = [x for x in regions if x is UNKNOWN or x not in allowed]
            if not target or bad:
                where = bad[0] if target else "a bucket outside this stack (region unknown)"
                yield violation(f"S3 replication rule {dig(rule, 'id')!r} goes to {where}", fix, config.urn)
    for config in stack.of_type(ECR_REPLICATION):
        for rule in as_list(config.get("replicationConfiguration", "rules")):
            for dest in as_list(dig(rule, "destinations")):
                region = dig(dest, "region")
                if region is UNKNOWN or region not in allowed:
                    yield violation(f"ECR replicates images to {region}", fix, config.urn)
