"""What several AWS rules need: a resource's region and default tags, links between resources, KMS keys.

Links between resources use the engine's property dependencies first (which resource an input was
computed from: always known, also at preview) and fall back to comparing known names. Ids are never
compared: at preview the id of a resource being created is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .core import UNKNOWN, Res, json_doc

BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
KMS_KEY_TYPES = ("aws:kms/key:Key", "aws:kms/replicaKey:ReplicaKey", "aws:kms/externalKey:ExternalKey")
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INSTANCE = "aws:ec2/instance:Instance"
AWS_PROVIDER = "pulumi:providers:aws"


def provider_region(r: Res) -> Any:
    """The region of the resource's AWS provider, None when it has none (or it is not AWS)."""
    if r.provider_props is None or r.provider_type != AWS_PROVIDER:
        return None
    return r.provider_props.get("region")


def region_of(r: Res) -> Any:
    """Where an AWS resource is created: its own ``region`` argument (pulumi-aws v7), else its provider's."""
    if r.type == AWS_PROVIDER:
        return r.props.get("region")
    own = r.props.get("region")
    return own if own is not None else provider_region(r)


def default_tags(r: Res) -> dict[str, Any] | Any:
    """The provider's ``defaultTags.tags`` (the provider's inputs carry nested objects as JSON strings)."""
    if r.provider_props is None:
        return {}
    doc = json_doc(r.provider_props.get("defaultTags"))
    if doc is UNKNOWN:
        return UNKNOWN
    tags = doc.get("tags") if isinstance(doc, dict) else None
    return tags if isinstance(tags, dict) else {}


def linked(r: Res, prop: str, candidates: Iterable[Res], *, name_key: str | None = None) -> list[Res]:
    """The ``candidates`` that ``r``'s input ``prop`` refers to: by property dependency, else (when
    ``name_key`` is given) by equal known names: ``r.props[prop] == candidate.props[name_key]``."""
    pool = list(candidates)
    found = [c for c in r.depends_on(prop) if c in pool]
    if found or name_key is None:
        return found
    value = r.props.get(prop)
    if not isinstance(value, str):
        return []
    return [c for c in pool if c.props.get(name_key) == value]


def bucket_of(sub: Res, buckets: Iterable[Res]) -> Res | None:
    """The bucket an S3 sub-resource (versioning, encryption, policy ...) configures."""
    found = linked(sub, "bucket", buckets, name_key="bucket")
    return found[0] if found else None


def bucket_name_of_arn(arn: Any) -> str | None:
    """``name`` for ``arn:aws:s3:::name`` (or ``arn:aws:s3:::name/*``)."""
    if not isinstance(arn, str) or ":s3:::" not in arn:
        return None
    return arn.split(":s3:::", 1)[1].split("/", 1)[0]


def is_aws_managed_key(key: Any) -> bool:
    """``alias/aws/<service>`` (or its ARN): an AWS managed key, not one the team controls."""
    return isinstance(key, str) and ("alias/aws/" in key)


def key_is_customer_managed(value: Any) -> bool:
    """Whether a key input names a customer managed key (None, unset: no).

    A known value must be a key id, key ARN or alias that is not ``alias/aws/...``. An unknown value is a
    customer managed key: it is computed from a resource of this update (AWS managed keys are literal
    aliases, and data sources are answered at preview).
    """
    if value is UNKNOWN:
        return True
    return isinstance(value, str) and bool(value) and not is_aws_managed_key(value)


def stack_role_problem(role: str | None) -> str | None:
    """Why a role-dependent rule cannot decide: no ``aiplat:platform.role`` in the stack's config."""
    if role in ("train", "infer"):
        return None
    return (
        "the stack's role is unknown (PULUMI_CONFIG has no aiplat:platform.role), so the rule cannot "
        "tell which limits apply"
    )
