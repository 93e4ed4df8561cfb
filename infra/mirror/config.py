"""The ``image_cache`` section: ECR pull through cache rules of the stack's region, one per upstream
registry, keyed by name (the rule's repository prefix is ``<prefix>/<name>``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infra.core.config import Strict

# AWS: ecrRepositoryPrefix, 2-30 characters (CreatePullThroughCacheRule, CLI reference)
PREFIX_PATTERN = r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$"


class UpstreamRegistry(Strict):
    """One upstream registry cached in ECR. ``credential_arn``: the Secrets Manager secret AWS signs in
    to the upstream with (created by you, named ``ecr-pullthroughcache/...``; docs/how-to/image-cache.md)."""

    url: str = Field(description="Upstream registry URL, e.g. 'quay.io', 'registry-1.docker.io'.")
    credential_arn: str | None = Field(
        None,
        description="ARN of the Secrets Manager secret with the upstream's credentials (Docker Hub, "
        "GitHub Container Registry, GitLab, Azure need one); same account and region as the stack.",
    )


def _default_upstreams() -> dict[str, UpstreamRegistry]:
    # The upstreams that need no credentials (AWS: Amazon ECR Public, Kubernetes, Quay).
    return {
        "k8s": UpstreamRegistry(url="registry.k8s.io"),
        "quay": UpstreamRegistry(url="quay.io"),
        "ecr-public": UpstreamRegistry(url="public.ecr.aws"),
    }


class ImageCacheConfig(Strict):
    """Upstream images of the charts pulled through ECR in the stack's region (``<account>.dkr.ecr.
    <region>.amazonaws.com/<prefix>/<upstream>/...``), pinned by digest in infra/mirror/digests.py."""

    prefix: Annotated[str, Field(pattern=PREFIX_PATTERN, min_length=2, max_length=28)] | None = Field(
        None,
        description="First part of every cached repository's name ('<prefix>/<upstream>/...'); default: "
        "the stack's prefix (e.g. 'aiplat-prod-train'). A rule's prefix is unique per account and region, "
        "so two stacks of one account and region need two prefixes.",
    )
    upstreams: dict[str, UpstreamRegistry] = Field(
        default_factory=_default_upstreams,
        description="Upstream registries by name (the rule's prefix is '<prefix>/<name>'). Docker Hub "
        "('registry-1.docker.io') and ghcr.io need credential_arn.",
    )
