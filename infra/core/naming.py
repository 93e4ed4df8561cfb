"""Physical names of the stack's AWS resources, and the limits AWS puts on them. Pure, no Pulumi.

The deployment name and the three prefixes built from it, each named for what it covers:

* ``deployment``: the config's ``name_prefix`` (``aiplat``), chosen by the user;
* ``env_prefix``: ``<deployment>-<environment>`` (``aiplat-prod``), shared by the stacks of one
  environment (the ECR namespace, replica key aliases);
* ``stack_prefix``: ``<env_prefix>-<role>`` (``aiplat-prod-train``), the names of one stack's resources
  that AWS keeps apart per account *and region* (cluster, log groups, KMS aliases, launch templates ...);
* ``global_prefix``: ``<stack_prefix>-<region code>`` (``aiplat-prod-infer-ape1``), the names AWS keeps
  once per account (IAM roles and policies, multi-region CloudTrail trails). ``prod-hk-infer`` and
  ``prod-sg-infer`` share a stack prefix; an IAM role named from it would exist once for both regions and
  the second stack's ``pulumi up`` would fail with ``EntityAlreadyExists``
  (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html: "Role names must be unique
  within the account").

S3 bucket names are unique per partition; they carry the full region name (``s3names.py``).
The wiring computes every fixed physical name here and hands it to the components, which never derive
names themselves.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from infra.core.s3names import default_bucket_name

# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html (name: 1-100 characters)
CLUSTER_NAME_MAX = 100
# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html (nodegroupName: 1-63)
NODEGROUP_NAME_MAX = 63
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html (3-128)
LAUNCH_TEMPLATE_NAME_MAX = 128
# IAM role names: 64 characters
ROLE_NAME_MAX = 64

# CloudTrail trail names: 3-128 characters.
# https://docs.aws.amazon.com/awscloudtrail/latest/APIReference/API_CreateTrail.html
TRAIL_NAME_MAX = 128
# EventBridge rule names: 1-64 characters.
# https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html
EVENT_RULE_NAME_MAX = 64
# SNS topic names: up to 256 characters. https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html
TOPIC_NAME_MAX = 256

_VALID = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# How AWS abbreviates the direction words of region names in zone IDs (``use1-az1``, ``apse1-az2``,
# ``usgw1-az1``): the same short code names the region in our account-global names.
_DIRECTIONS = {
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
    "central": "c",
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
    "gov": "g",
    "iso": "i",
    "isob": "ib",
}


def fit(name: str, limit: int) -> str:
    """``name`` unchanged if it fits, else cut and suffixed with a short hash so it stays unique."""
    if not _VALID.match(name):
        raise ValueError(f"{name!r} must be lower-case letters, digits and '-'")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


def region_code(region: str) -> str:
    """The short code AWS uses for ``region`` in zone IDs: ``us-east-1`` -> ``use1``, ``ap-east-1`` ->
    ``ape1``, ``ap-southeast-1`` -> ``apse1``, ``us-gov-west-1`` -> ``usgw1``.

    Zone IDs are documented at https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html;
    a test checks this function against every zone ID in the offline AWS snapshot.
    """
    country, *words, number = region.split("-")
    if not words or not number.isdigit():
        raise ValueError(f"{region!r} is not an AWS region name")
    try:
        return country + "".join(_DIRECTIONS[w] for w in words) + number
    except KeyError as exc:
        raise ValueError(f"{region!r}: no short code for {exc.args[0]!r}") from None


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


def waf_log_group(stack_prefix: str, purpose: str) -> str:
    """The CloudWatch Logs group of a web ACL's logs: WAF accepts only names starting ``aws-waf-logs-``.
    https://docs.aws.amazon.com/waf/latest/developerguide/logging-cw-logs.html"""
    return f"aws-waf-logs-{stack_prefix}-{purpose}"


def session_log_group(stack_prefix: str) -> str:
    """The log group of the stack's Session Manager sessions."""
    return f"/aiplat/{stack_prefix}/ssm-sessions"


def fsx_log_group(stack_prefix: str) -> str:
    """The log group of a stack's FSx for Lustre data repository events. FSx requires the ``/aws/fsx``
    prefix ("The name of the Amazon CloudWatch Logs log group must begin with the /aws/fsx prefix",
    LustreLogCreateConfiguration.Destination)."""
    return f"/aws/fsx/{stack_prefix}"


def session_document_name(stack_prefix: str) -> str:
    """The stack's SSM Session document (names are unique per account and region; 3-128 characters)."""
    return fit(f"{stack_prefix}-session", 128)


def iam_role_arn(partition: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:iam::{account_id}:role/{name}"


def log_group_arn(partition: str, region: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:logs:{region}:{account_id}:log-group:{name}"


def trail_arn(partition: str, region: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:cloudtrail:{region}:{account_id}:trail/{name}"


def cluster_arn(partition: str, region: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:eks:{region}:{account_id}:cluster/{name}"


def trail_name(global_prefix: str) -> str:
    """The stack's CloudTrail trail. A multi-region trail has a shadow copy under the same name in every
    region, so its name is effectively account-global and carries the region code.
    https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-concepts.html#cloudtrail-concepts-trails
    """
    return fit(f"{global_prefix}-trail", TRAIL_NAME_MAX)


def event_rule_name(stack_prefix: str, purpose: str) -> str:
    """An EventBridge rule on the default bus (names are unique per bus, account and region)."""
    return fit(f"{stack_prefix}-{purpose}", EVENT_RULE_NAME_MAX)


def topic_name(stack_prefix: str, purpose: str) -> str:
    """An SNS topic (names are unique per account and region)."""
    return fit(f"{stack_prefix}-{purpose}", TOPIC_NAME_MAX)


def kms_alias(prefix: str, purpose: str) -> str:
    """``alias/<prefix>-<purpose>`` (unique per account and region); ``alias/aws`` is AWS's."""
    alias = f"alias/{prefix}-{purpose}"
    if alias.startswith("alias/aws"):
        raise ValueError(f"{alias!r} is reserved for AWS managed keys; choose another name_prefix")
    return alias


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
    def region_code(self) -> str:
        return region_code(self.region)

    @property
    def global_prefix(self) -> str:
        """Prefix of account-global names: the stack prefix and the region code."""
        return f"{self.stack_prefix}-{self.region_code}"

    @property
    def cluster(self) -> str:
        return cluster_name(self.stack_prefix)

    def role_name(self, purpose: str) -> str:
        """An IAM role name: account-global, so it carries the region code."""
        return role_name(self.global_prefix, purpose)

    def bucket(self, purpose: str, region: str | None = None) -> str:
        """The derived S3 bucket name for ``purpose`` in ``region`` (default: the stack's region); a stack's
        own data buckets may be renamed in the config (``PlatformConfig.bucket_name``)."""
        return default_bucket_name(self.deployment, self.environment, region or self.region, purpose)


# https://docs.aws.amazon.com/waf/latest/APIReference/API_CreateWebACL.html (Name: 1-128 of [\w-])
WEB_ACL_NAME_MAX = 128


def web_acl_name(stack_prefix: str, purpose: str) -> str:
    """A WAFv2 web ACL's name (unique per account, region and scope)."""
    return fit(f"{stack_prefix}-{purpose}", WEB_ACL_NAME_MAX)


def partition_of(region: str) -> str:
    """The ARN partition of a region (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"
