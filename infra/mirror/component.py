"""ImageCache: the ECR pull through cache rules of the stack's region, one per upstream registry, and the
nodes' grant to pull through them (``ecr:BatchImportUpstreamImage``, ``ecr:CreateRepository`` on the
cache's prefixes). https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.mirror.documents import pull_through_policy
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class CacheRule:
    """One rule: ECR repository prefix, upstream registry URL, the credentials secret's ARN (or None)."""

    prefix: str
    upstream_url: str
    credential_arn: str | None = None


@dataclass(frozen=True, kw_only=True)
class ImageCacheArgs:
    """``rules`` by name; ``node_role_names``: the roles whose nodes pull (the managed node groups',
    Karpenter's)."""

    rules: Mapping[str, CacheRule]
    partition: str
    region: str
    account_id: str
    node_role_names: Sequence[pulumi.Input[str]] = field(default_factory=list)


class ImageCache(pulumi.ComponentResource):
    """Pull through cache rules and the node roles' policy to use them."""

    prefixes: list[str]

    def __init__(self, name: str, args: ImageCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:mirror:ImageCache", name, None, opts)
        for rule_name, r in sorted(args.rules.items()):
            aws.ecr.PullThroughCacheRule(
                f"{name}-{rule_name}",
                ecr_repository_prefix=r.prefix,
                upstream_registry_url=r.upstream_url,
                credential_arn=r.credential_arn,
                opts=child_options(self, opts),
            )
        self.prefixes = sorted(r.prefix for r in args.rules.values())
        document = json.dumps(
            pull_through_policy(
                partition=args.partition,
                region=args.region,
                account_id=args.account_id,
                prefixes=self.prefixes,
            )
        )
        for i, role in enumerate(args.node_role_names):
            aws.iam.RolePolicy(
                f"{name}-pull-through-{i}", role=role, policy=document, opts=child_options(self, opts)
            )
        self.register_outputs({"prefixes": self.prefixes})
