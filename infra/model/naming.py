"""Physical names of the stack's AWS resources, and the limits AWS puts on them. Pure, no Pulumi.

Three prefixes, each with its own name (``name_prefix`` used to mean all three):

* ``deployment``: the config's ``name_prefix`` (``aiplat``), chosen by the user;
* ``env_prefix``: ``<deployment>-<environment>`` (``aiplat-prod``), shared by the stacks of one
  environment (the ECR namespace, replica key aliases);
* ``stack_prefix``: ``<env_prefix>-<role>`` (``aiplat-prod-train``), the names of one stack's resources.

The wiring computes every fixed physical name here and hands it to the components, which never derive
names themselves.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html (name: 1-100 characters)
CLUSTER_NAME_MAX = 100
# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html (nodegroupName: 1-63)
NODEGROUP_NAME_MAX = 63
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html (3-128)
LAUNCH_TEMPLATE_NAME_MAX = 128
# IAM role names: 64 characters
ROLE_NAME_MAX = 64

_VALID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


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


def flow_log_group(stack_prefix: str) -> str:
    """The VPC flow-log group of a stack."""
    return f"/aiplat/{stack_prefix}/vpc-flow-logs"


def placement_group_name(stack_prefix: str, pool: str) -> str:
    """The cluster placement group of a pool (names are unique per account and region)."""
    return f"{nodegroup_name(stack_prefix, pool)}-cluster"


@dataclass(frozen=True)
class StackNames:
    """The prefixes of one stack (see the module docstring)."""

    deployment: str
    environment: str
    role: str
    region: str

    @property
    def env_prefix(self) -> str:
        return f"{self.deployment}-{self.environment}"

    @property
    def stack_prefix(self) -> str:
        return f"{self.env_prefix}-{self.role}"

    @property
    def cluster(self) -> str:
        return cluster_name(self.stack_prefix)

    def role_name(self, purpose: str) -> str:
        return role_name(self.stack_prefix, purpose)


# https://docs.aws.amazon.com/waf/latest/APIReference/API_CreateWebACL.html (Name: 1-128 of [\w-])
WEB_ACL_NAME_MAX = 128


def web_acl_name(stack_prefix: str, purpose: str) -> str:
    """A WAFv2 web ACL's name (unique per account, region and scope)."""
    return fit(f"{stack_prefix}-{purpose}", WEB_ACL_NAME_MAX)
