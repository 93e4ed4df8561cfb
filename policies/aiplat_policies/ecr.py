"""ECR: immutable tags (a tag always means the same image) and scan on push."""

from __future__ import annotations

from collections.abc import Iterator

from .core import MEDIUM, Ctx, Res, Violation, resource_rule, truthy, violation
from .encryption import ECR_TYPES

IMMUTABLE = ("IMMUTABLE", "IMMUTABLE_WITH_EXCLUSION")


@resource_rule(
    "ecr-immutable-tags",
    description="Repositories (and the creation templates of their replicas) make image tags immutable.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-tag-mutability.html",
    types=ECR_TYPES,
    unknowns="An unknown setting is a violation (it is a literal).",
)
def ecr_immutable_tags(r: Res, ctx: Ctx) -> Iterator[Violation]:
    mutability = r.get("imageTagMutability")
    if mutability not in IMMUTABLE:
        yield violation(
            f"image tags are mutable (image_tag_mutability {mutability or 'MUTABLE (default)'})",
            "set image_tag_mutability 'IMMUTABLE'",
        )


@resource_rule(
    "ecr-scan-on-push",
    description="Repositories scan every pushed image for vulnerabilities.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-scanning-basic.html",
    types=("aws:ecr/repository:Repository",),
    unknowns="An unknown setting is a violation (it is a literal).",
)
def ecr_scan_on_push(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if truthy(r.get("imageScanningConfiguration", "scanOnPush")) is not True:
        yield violation(
            "images are not scanned on push",
            "set image_scanning_configuration scan_on_push: true (or enhanced scanning for the registry)",
        )
