"""Physical names of the stack's AWS resources, and the limits AWS puts on them. Pure, no Pulumi."""

from __future__ import annotations

import hashlib
import re

# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html (name: 1-100 characters)
CLUSTER_NAME_MAX = 100
# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html (nodegroupName: 1-63)
NODEGROUP_NAME_MAX = 63
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html (3-128)
LAUNCH_TEMPLATE_NAME_MAX = 128
# IAM role names: 64 characters
ROLE_NAME_MAX = 64

_VALID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def stack_prefix(name_prefix: str, environment: str, role: str) -> str:
    """``aiplat-prod-train``: the prefix every physical name of a stack starts with."""
    return f"{name_prefix}-{environment}-{role}"


def fit(name: str, limit: int) -> str:
    """``name`` unchanged if it fits, else cut and suffixed with a short hash so it stays unique."""
    if not _VALID.match(name):
        raise ValueError(f"{name!r} must be lower-case letters, digits and '-'")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


def cluster_name(prefix: str) -> str:
    return fit(prefix, CLUSTER_NAME_MAX)


def nodegroup_name(prefix: str, pool: str) -> str:
    return fit(f"{prefix}-{pool}", NODEGROUP_NAME_MAX)


def launch_template_name(prefix: str, pool: str) -> str:
    return fit(f"{prefix}-{pool}", LAUNCH_TEMPLATE_NAME_MAX)


def role_name(prefix: str, purpose: str) -> str:
    return fit(f"{prefix}-{purpose}", ROLE_NAME_MAX)


def control_plane_log_group(cluster: str) -> str:
    """The log group EKS writes control-plane logs to; created up front to own retention and KMS.

    https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
    """
    return f"/aws/eks/{cluster}/cluster"
