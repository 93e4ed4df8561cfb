"""Is an image in the registry? ``ecr:DescribeImages`` of one digest, before ``aiplat train submit`` queues
a job that would otherwise wait for GPUs only to fail pulling it (ErrImagePull after admission)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from infra.core.errors import ConfigError
from infra.io.aws_credentials import credentials_error

# https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_DescribeImages.html (Errors)
_MISSING = {"ImageNotFoundException", "RepositoryNotFoundException"}


def image_problem(ecr: Any, *, repository: str, digest: str, push_to: str) -> ConfigError | None:
    """Why ``repository@digest`` cannot be pulled (None: it is there). Raises ``AwsCredentialsError`` for
    missing or expired credentials; other refusals (no ecr:DescribeImages) propagate as ClientError."""
    try:
        ecr.describe_images(repositoryName=repository, imageIds=[{"imageDigest": digest}])
    except (ClientError, BotoCoreError) as exc:
        if (creds := credentials_error(exc)) is not None:
            raise creds from exc
        code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
        if code == "RepositoryNotFoundException":
            return ConfigError(
                "image",
                f"the repository {repository} does not exist in the stack's registry",
                "declare it under teams.<team>.registry.repositories and run pulumi up, then push",
            )
        if code in _MISSING:
            return ConfigError(
                "image",
                f"{repository} has no image {digest} (ecr:DescribeImages)",
                f"push it to {push_to} and copy the digest docker push printed",
            )
        raise
    return None
