"""ImageCache: the ECR pull through cache rules of the stack's region, one per upstream registry, the
nodes' grant to pull through them (``ecr:BatchImportUpstreamImage``, ``ecr:CreateRepository`` on the
cache's prefixes), and the copy area's repository creation template.
https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html

The copy area (``<prefix>/copy/...``) holds the images of registries no rule takes, copied by digest with
``aiplat images copy``. ECR creates a repository when an image is pushed to a name that has none, from a
creation template that applies to ``CREATE_ON_PUSH`` (since 2025-12-19:
https://aws.amazon.com/about-aws/whats-new/2025/12/amazon-ecr-creating-repositories-on-push/;
https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-create.html); the
pusher needs ``ecr:CreateRepository`` besides the push actions. Its repositories keep immutable tags (a
copied tag always means the upstream's digest) and scan nothing beyond the registry's own setting; they
are encrypted with the stack's data key, through the template's role (ECR needs one to use a customer
managed key: repository-creation-templates-create-iam.html). No lifecycle policy: a pinned digest must not
expire.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.core.iam import ecr_template_role_policy, service_trust_policy
from infra.mirror.documents import pull_through_policy
from infra.resources.aws import fixed_name
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
    copy_prefix: str  # the copy area's repositories: '<copy_prefix>/<upstream image>'
    kms_key_arn: pulumi.Input[str]  # the stack's data key: the copy area's repositories are under it
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
        copy_repositories = (
            f"arn:{args.partition}:ecr:{args.region}:{args.account_id}:repository/{args.copy_prefix}/*"
        )
        role = aws.iam.Role(
            f"{name}-copy-template-role",
            # AWS documents this trust without conditions; aws:SourceAccount as for the replicas' template
            # https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-create-iam.html
            assume_role_policy=json.dumps(service_trust_policy("ecr.amazonaws.com", args.account_id)),
            description="ECR creates the image copy area's repositories under the stack's data key",
            opts=child_options(self, opts),
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-copy-template-role-policy",
            role=role.id,
            # create the repository a push names, under the copy area only, and encrypt it with the data key
            policy=pulumi.Output.from_input(args.kms_key_arn).apply(
                lambda key: json.dumps(
                    ecr_template_role_policy(repository_arns=[copy_repositories], kms_key_arns=[key])
                )
            ),
            opts=child_options(self, opts),
        )
        aws.ecr.RepositoryCreationTemplate(
            f"{name}-copy-template",
            prefix=args.copy_prefix,
            applied_fors=["CREATE_ON_PUSH"],
            description="images of registries no pull through cache rule takes, copied by digest "
            "(aiplat images copy)",
            image_tag_mutability="IMMUTABLE",
            encryption_configurations=[
                aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                    encryption_type="KMS", kms_key=args.kms_key_arn
                )
            ],
            custom_role_arn=role.arn,
            # the role's policy first, or the first push creates a repository ECR cannot encrypt
            opts=fixed_name(child_options(self, opts, depends_on=[role_policy])),
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
