"""Shared pieces of the config schema: the strict base model, names, environment and role."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
# The shape of an AWS region name ('us-east-1', 'ap-southeast-1', 'us-gov-west-1').
REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
# An image named by digest: <registry>/<repository>@sha256:<64 hex>.
IMAGE_BY_DIGEST = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$")


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors and values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class Environment(StrEnum):
    dev = "dev"
    prod = "prod"


class Role(StrEnum):
    """What the stack's region is for: ``train`` runs the DDP trainer, ``infer`` serves models."""

    train = "train"
    infer = "infer"


# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


def check_log_retention(days: int) -> int:
    """CloudWatch Logs accepts only the periods in LOG_RETENTION_DAYS; suggest the nearest one."""
    if days not in LOG_RETENTION_DAYS:
        close = min(LOG_RETENTION_DAYS, key=lambda d: abs(d - days))
        raise ValueError(f"{days} is not a CloudWatch Logs retention period; use e.g. {close}")
    return days


def check_image_by_digest(ref: str | None) -> str | None:
    """A prebuilt image must be named by digest (a tag can move, a digest cannot); None passes."""
    if ref is not None and not IMAGE_BY_DIGEST.fullmatch(ref):
        raise ValueError(
            f"{ref!r} is not an image named by digest; use '<registry>/<repository>@sha256:<64 hex>' "
            "(a tag can move, a digest cannot)"
        )
    return ref


# A Kubernetes CPU quantity as the config takes it: whole or decimal cores, or millicores.
# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
CPU_QUANTITY = r"^([1-9][0-9]*|[0-9]+\.[0-9]+|[1-9][0-9]*m)$"


# Shared by the storage sections and the capabilities below storage (the keys decide grants by them).
class StorageBackend(StrEnum):
    """Where datasets, checkpoints and artifacts live.

    ``s3``: S3 buckets (SSE-KMS, versioned, TLS only) plus IRSA roles for the pods.
    ``minio``: the MinIO Helm chart in the cluster, for deployments that do not want S3. Trainer and
    inference reach either through the same S3 settings (endpoint, region, credentials from the environment).
    """

    s3 = "s3"
    minio = "minio"


class TrailMode(StrEnum):
    """Where the stack's audit trail is.

    ``create``: a multi-region CloudTrail trail of this stack (log file validation, SSE-KMS under the logs
    key, into an S3 Object Lock bucket, S3 data events on the stack's data buckets). ``existing``: another
    trail already records this account in every region (an organization trail, or the train stack's
    multi-region trail for the infer stacks of its environment): nothing is created and
    ``existing_trail`` names it for the stack's outputs; S3 data events must be selected there.
    """

    create = "create"
    existing = "existing"


class KubernetesAccess(StrEnum):
    """How ``pulumi up`` reaches the cluster's Kubernetes API to apply the cluster services.

    ``in_vpc``: from inside the VPC (VPN, peering, a bastion or SSM session); the endpoint is private.
    ``public_cidrs``: through the public endpoint, from one of ``cluster.endpoint_public_access_cidrs``.
    ``skip``: declare no Kubernetes resources (AWS side only); run ``pulumi up`` again from inside the VPC
    with ``in_vpc`` to add them. ``pulumi up`` checks that the endpoint answers before it applies any
    Kubernetes object and stops with this explanation otherwise (instead of a provider timeout).
    """

    in_vpc = "in_vpc"
    public_cidrs = "public_cidrs"
    skip = "skip"
