"""Config of the stack's security controls: deletion protection, node access, TLS, audit trail, alerts."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.core import s3names
from infra.core.config import Strict, TrailMode, check_log_retention


class TlsVersion(StrEnum):
    """Lowest TLS version the bucket policies accept (``s3:TlsVersion``)."""

    tls12 = "1.2"
    tls13 = "1.3"


class ObjectLockMode(StrEnum):
    """S3 Object Lock default retention mode of the trail bucket.

    ``GOVERNANCE``: users with ``s3:BypassGovernanceRetention`` can delete early (break-glass);
    ``COMPLIANCE``: nobody, not even the root user, until the retention ends.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html#object-lock-retention-modes
    """

    GOVERNANCE = "GOVERNANCE"
    COMPLIANCE = "COMPLIANCE"


# A trail's name (3-128 characters: letters, digits, '.', '_', '-') or ARN.
# https://docs.aws.amazon.com/awscloudtrail/latest/APIReference/API_CreateTrail.html#awscloudtrail-CreateTrail-request-Name
_TRAIL = re.compile(
    r"^(arn:aws[a-z-]*:cloudtrail:[a-z0-9-]+:\d{12}:trail/)?[A-Za-z0-9][A-Za-z0-9._-]{1,126}[A-Za-z0-9]$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# An IAM role ARN (with an optional path) and a role name.
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$")
ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
ACCOUNT_ID = re.compile(r"^\d{12}$")


def _role_arn(v: str) -> str:
    if not ROLE_ARN.match(v):
        raise ValueError(f"{v!r} is not an IAM role ARN; use arn:aws:iam::<account id>:role/<name>")
    return v


def _bucket(v: str) -> str:
    problems = s3names.s3_problems(v)
    if problems:
        raise ValueError(f"bucket name {v!r} {' and '.join(problems)}")
    return v


class AuditConfig(Strict):
    """CloudTrail, the trail bucket and GuardDuty."""

    trail: TrailMode = Field(
        TrailMode.create,
        description="create (a multi-region trail of this stack) or existing (another multi-region trail "
        "records the account; name it in existing_trail).",
    )
    existing_trail: str | None = Field(
        None,
        description="Name or ARN of the trail that records this account, with trail: existing (e.g. the "
        "organization trail, or the environment's train stack trail '<name_prefix>-<env>-train-<region "
        "code>-trail').",
    )
    retention_days: Annotated[int, Field(ge=1, le=36500)] = Field(
        365,
        description="Days trail logs (and the access logs' noncurrent versions) are kept: the Object Lock "
        "default retention and the expiry of the trail bucket.",
    )
    object_lock_mode: ObjectLockMode | None = Field(
        None,
        description="GOVERNANCE or COMPLIANCE (see ObjectLockMode). Unset: COMPLIANCE in prod (nobody, the "
        "root user included, deletes a trail log before its retention ends), GOVERNANCE in dev.",
    )
    s3_data_events: bool = Field(
        True,
        description="Log S3 object reads and writes on the datasets, checkpoints and artifacts buckets "
        "(and their replicas) in the trail.",
    )
    guardduty: bool = Field(
        False,
        description="Create a GuardDuty detector with EKS audit log monitoring and EKS runtime monitoring "
        "(managed agent). Refused by AWS when the account already has a detector in the region "
        "(e.g. enabled by the organization): leave off then.",
    )

    @field_validator("existing_trail")
    @classmethod
    def _trail(cls, v: str | None) -> str | None:
        if v is not None and not _TRAIL.match(v):
            raise ValueError(f"{v!r} is not a CloudTrail trail name or ARN")
        return v

    @model_validator(mode="after")
    def _mode(self) -> AuditConfig:
        if self.trail is TrailMode.existing and not self.existing_trail:
            raise ValueError(
                "trail is 'existing' but existing_trail is not set; name the trail that records the account"
            )
        if self.trail is TrailMode.create and self.existing_trail:
            raise ValueError("existing_trail is set but trail is 'create'; set trail: existing or drop it")
        return self


class AccountConfig(Strict):
    """The AWS account the stack deploys into and the role that deploys it.

    Prod and dev belong in separate accounts: an account is the boundary IAM cannot cross by mistake, and
    the upstream controllers' policies are scoped by tags that a dev credential could otherwise meet on a
    prod resource. https://docs.aws.amazon.com/whitepapers/latest/organizing-your-aws-environment/
    organizing-your-aws-environment.html
    """

    id: str | None = Field(
        None,
        description="The 12-digit AWS account ID of this stack. Set: pulumi up refuses credentials of "
        "another account, and the plan refuses a prod and a dev stack of the project in one account "
        "(unless allow_shared_account). Unset: the account of the credentials, not compared.",
    )
    deployer_role: str | None = Field(
        None,
        description="Name of the IAM role in this account that runs pulumi up: the only principal besides "
        "break-glass the key policies of a protected stack let change a key policy. Required when the "
        "stack is protected.",
    )
    example: bool = Field(
        False,
        description="This stack file is an example (the stacks this repository ships): its AWS example "
        "account 123456789012 in security and the teams' role ARNs is a warning, not an error, on a prod "
        "stack, and aiplat bootstrap creates nothing for it. Remove it when you put in your account ID (a "
        "real ID with this mark is warned): the placeholders left are then refused on prod.",
    )
    allow_shared_account: bool = Field(
        False,
        description="Let this stack share its account with a stack of the other environment (prod with "
        "dev); refused otherwise when both name the same account id.",
    )

    @field_validator("id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not ACCOUNT_ID.match(v):
            raise ValueError(f'{v!r} is not a 12-digit AWS account ID; quote it in YAML ("012345678901")')
        return v

    @field_validator("deployer_role")
    @classmethod
    def _role(cls, v: str | None) -> str | None:
        if v is not None and not ROLE_NAME.match(v):
            raise ValueError(f"{v!r} is not an IAM role name (1-64 of letters, digits and +=,.@_-)")
        return v


class SecurityConfig(Strict):
    """Deletion protection, node access, TLS floor, alerts and audit."""

    protect: bool | None = Field(
        None,
        description="Pulumi protect + retain_on_delete on KMS keys, data/replica/log buckets and ECR "
        "repositories, and a key policy deny on ScheduleKeyDeletion/DisableKey except for the break-glass "
        "role; unset = on for prod, off for dev.",
    )
    session_manager: bool = Field(
        True,
        description="Nodes register with SSM Session Manager (the minimal agent permissions, sessions "
        "logged to a log group under the logs key through the stack's Session document). false: no SSM "
        "permissions on the node role.",
    )
    session_log_retention_days: int = Field(
        365, description="Retention of the Session Manager log group (days)."
    )
    min_tls_version: TlsVersion = Field(
        TlsVersion.tls12, description="Lowest TLS version the bucket policies accept: 1.2 or 1.3."
    )
    ebs_encryption_by_default: bool = Field(
        True,
        description="Turn on EBS encryption by default in the stack's region (an account-wide setting of "
        "the region: exactly one stack per account and region may own it).",
    )
    s3_endpoint_extra_buckets: list[Annotated[str, AfterValidator(_bucket)]] = Field(
        default_factory=list,
        description="Buckets (besides the stack's own and those the nodes need from AWS) that pods may "
        "reach through the VPC's S3 gateway endpoint.",
    )
    alert_emails: list[str] = Field(
        default_factory=list,
        description="E-mail addresses subscribed to the key alerts topic (ScheduleKeyDeletion, DisableKey, "
        "PutKeyPolicy, every assumption of the break-glass role); "
        "each must confirm the subscription.",
    )
    audit: AuditConfig = Field(default_factory=AuditConfig)
    account: AccountConfig = Field(default_factory=AccountConfig)
    key_admin_principals: list[Annotated[str, AfterValidator(_role_arn)]] = Field(
        default_factory=list,
        description="IAM role ARNs that may assume the key administrator role, with MFA "
        "(aws:MultiFactorAuthPresent). Required when the stack is protected; unset on an unprotected "
        "stack: the account root, with MFA.",
    )
    break_glass_principals: list[Annotated[str, AfterValidator(_role_arn)]] = Field(
        default_factory=list,
        description="IAM role ARNs that may assume the break-glass role, with MFA; every assumption "
        "alerts the key alerts topic. Required when the stack is protected; unset on an unprotected "
        "stack: the account root, with MFA.",
    )

    @field_validator("session_log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, v: list[str]) -> list[str]:
        for address in v:
            if not _EMAIL.match(address):
                raise ValueError(f"{address!r} is not an e-mail address")
        return v
