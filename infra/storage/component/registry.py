"""Registry: ECR repositories for the trainer and inference images, replicated to the inference regions.

Tags are immutable (a deployed tag always means the same image), images are scanned on push, encrypted
with the team's data key and expired by a lifecycle policy. Replication copies every repository under the
stack's namespace to the inference regions; a repository creation template there applies the same
settings (immutable, KMS with the region's replica key, lifecycle) to the repositories ECR creates.
https://docs.aws.amazon.com/AmazonECR/latest/userguide/replication.html
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.core import iam
from infra.resources.aws import fixed_name, protected
from infra.storage import documents as storage_documents


@dataclass(frozen=True, kw_only=True)
class RegistryArgs:
    """Inputs of Registry.

    ``namespace``: repository name prefix (``<namespace>/<repository>``). ``replica_keys``: inference region
    -> ARN of the KMS key replicated repositories there are encrypted with (empty: no replication).
    """

    namespace: str
    repositories: Sequence[str]
    kms_key_arn: pulumi.Input[str]
    untagged_expire_days: int
    keep_images: int
    account_id: str
    partition: str
    replica_keys: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # Pulumi protect + retain_on_delete on the repositories (images survive a destroy or a rename)
    protect: bool = False
    # JSON: the repositories' policy (storage_documents.platform_repository_policy) and their replicas'
    # (through the creation templates); None: none (a stack without a deployer role, which would lock
    # ``pulumi up`` out of its own pushes)
    repository_policy: str | None = None
    replica_policy: str | None = None
    # the break-glass role (a name or an output of it) and the allow behind its exemption in those policies
    break_glass_role_name: pulumi.Input[str] | None = None
    break_glass_policy: pulumi.Input[str] | None = None


class Registry(pulumi.ComponentResource):
    """ECR repositories plus registry replication to the inference regions."""

    repository_urls: dict[str, pulumi.Output[str]]
    repository_arns: dict[str, pulumi.Output[str]]
    replica_registries: dict[str, str]
    # What must exist before the first push for the image to reach the replicas (empty without
    # replication): the replication configuration and the creation-template role's policy.
    replication_ready: list[pulumi.Resource]
    # the role ECR assumes to create replicas from a creation template (None without replication); the
    # teams' templates (infra/queueing/component.py TeamRegistry) use it too
    template_role_arn: pulumi.Output[str] | None

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:registry:Registry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        lifecycle = json.dumps(
            storage_documents.ecr_lifecycle_policy(
                untagged_days=args.untagged_expire_days, keep_tagged=args.keep_images
            )
        )
        self.repositories: dict[str, aws.ecr.Repository] = {}
        for repo in args.repositories:
            repository = aws.ecr.Repository(
                f"{name}-{repo}",
                name=f"{args.namespace}/{repo}",
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True
                ),
                encryption_configurations=[
                    aws.ecr.RepositoryEncryptionConfigurationArgs(
                        encryption_type="KMS", kms_key=args.kms_key_arn
                    )
                ],
                opts=protected(fixed_name(child), args.protect),
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{repo}-lifecycle", repository=repository.name, policy=lifecycle, opts=child
            )
            if args.repository_policy is not None:
                aws.ecr.RepositoryPolicy(
                    f"{name}-{repo}-policy",
                    repository=repository.name,
                    policy=args.repository_policy,
                    opts=child,
                )
            self.repositories[repo] = repository
        if args.break_glass_role_name is not None and args.break_glass_policy is not None:
            aws.iam.RolePolicy(
                f"{name}-break-glass",
                role=args.break_glass_role_name,
                policy=args.break_glass_policy,
                opts=child,
            )

        self.replica_registries = {
            region: f"{args.account_id}.dkr.ecr.{region}.amazonaws.com" for region in args.replica_keys
        }
        self.replication_ready = []
        self.template_role_arn = None
        if args.replica_keys:
            self.replication_ready = self._replicate(name, args, lifecycle, child)

        self.repository_urls = {r: repo.repository_url for r, repo in self.repositories.items()}
        self.repository_arns = {r: repo.arn for r, repo in self.repositories.items()}
        self.register_outputs(
            {
                "repository_urls": self.repository_urls,
                "repository_arns": self.repository_arns,
                "replica_registries": self.replica_registries,
            }
        )

    def _replicate(
        self, name: str, args: RegistryArgs, lifecycle: str, child: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """Creation templates, their role and the replication configuration; returns what a push must
        wait for (``replication_ready``)."""
        regions = sorted(args.replica_keys)
        # The creation template needs a role when it encrypts with a customer-managed key.
        role = aws.iam.Role(
            f"{name}-template-role",
            # AWS documents this trust without conditions; which confused-deputy keys ECR sends when it
            # assumes a template role is not documented, so only aws:SourceAccount (as before) is used.
            # https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-create-iam.html
            assume_role_policy=json.dumps(iam.service_trust_policy("ecr.amazonaws.com", args.account_id)),
            description="ECR creates replicated repositories with the replica KMS keys",
            opts=child,
        )
        self.template_role_arn = role.arn
        repo_arns = [
            f"arn:{args.partition}:ecr:{region}:{args.account_id}:repository/{args.namespace}/*"
            for region in regions
        ]
        role_policy = aws.iam.RolePolicy(
            f"{name}-template-role-policy",
            role=role.id,
            policy=pulumi.Output.all(*[args.replica_keys[r] for r in regions]).apply(
                lambda keys: json.dumps(
                    iam.ecr_template_role_policy(repository_arns=repo_arns, kms_key_arns=keys, replicate=True)
                )
            ),
            opts=child,
        )
        templates = [
            aws.ecr.RepositoryCreationTemplate(
                f"{name}-template-{region}",
                region=region,  # pulumi-aws v7 per-resource region: same provider, other region
                prefix=args.namespace,
                applied_fors=["REPLICATION"],
                description=f"replicas of {args.namespace}/* from the training region",
                image_tag_mutability="IMMUTABLE",
                encryption_configurations=[
                    aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                        encryption_type="KMS", kms_key=args.replica_keys[region]
                    )
                ],
                lifecycle_policy=lifecycle,
                repository_policy=args.replica_policy,
                custom_role_arn=role.arn,
                opts=fixed_name(child),
            )
            for region in regions
        ]
        # One replication configuration per registry (account and region): it belongs to the train stack.
        replication = aws.ecr.ReplicationConfiguration(
            f"{name}-replication",
            replication_configuration=aws.ecr.ReplicationConfigurationReplicationConfigurationArgs(
                rules=[
                    aws.ecr.ReplicationConfigurationReplicationConfigurationRuleArgs(
                        destinations=[
                            aws.ecr.ReplicationConfigurationReplicationConfigurationRuleDestinationArgs(
                                region=region, registry_id=args.account_id
                            )
                            for region in regions
                        ],
                        repository_filters=[
                            aws.ecr.ReplicationConfigurationReplicationConfigurationRuleRepositoryFilterArgs(
                                filter=f"{args.namespace}/", filter_type="PREFIX_MATCH"
                            )
                        ],
                    )
                ]
            ),
            # Templates (and their role's policy, which ECR needs to create a repository with the replica
            # key) first, or the first replicated images land in repositories without them, or fail.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*templates, role_policy]),
        )
        # By default ECR replicates only images pushed after the replication configuration is applied
        # (older ones need a manual replication backfill); our tags are immutable content hashes, so an
        # image pushed before it is never pushed again and never reaches the replicas on its own.
        # https://docs.aws.amazon.com/AmazonECR/latest/userguide/replication-backfill.html
        return [replication, role_policy]
