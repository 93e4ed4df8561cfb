"""Queueing on the cluster: Kueue from its pinned chart with the cluster-wide Kueue objects (Kueue), and per
team its namespace, IAM role, service account and queues (Team) and its container repositories with the
CI role that pushes to them (TeamRegistry).

The documents come from ``infra/queueing/documents.py``; the Kubernetes provider comes in through
``opts.provider``. Upstream: the Kueue chart, pinned in config (never its templates or CRDs: the CRDs are
chart templates, installed and upgraded with the release).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pulumi_kubernetes._utilities import get_version as k8s_version

from infra.cluster.component.namespaces import (
    NamespaceSpec,
    ServiceAccountSpec,
    WorkloadNamespaces,
    WorkloadNamespacesArgs,
    WorkloadServiceAccounts,
    WorkloadServiceAccountsArgs,
    own_namespace,
)
from infra.core.charts import ChartRef
from infra.resources.aws import fixed_name, protected
from infra.resources.custom import custom_resource
from infra.resources.helm import chart_release
from infra.resources.irsa import irsa_role
from infra.resources.options import child_options


class TopLevelCustomResource(pulumi.CustomResource):
    """A custom resource whose fields sit at the top level instead of under ``spec`` (Kueue's
    WorkloadPriorityClass: ``value``, ``description``), which ``apiextensions.CustomResource`` cannot send.
    The Kubernetes provider takes any ``kubernetes:<group>/<version>:<Kind>`` token as a custom resource and
    sends its inputs as the object."""

    def __init__(self, name: str, doc: Mapping[str, Any], opts: pulumi.ResourceOptions):
        version = pulumi.ResourceOptions(version=k8s_version())
        super().__init__(
            f"kubernetes:{doc['apiVersion']}:{doc['kind']}",
            name,
            dict(doc),
            pulumi.ResourceOptions.merge(opts, version),
        )


def kueue_object(name: str, doc: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """A Kueue object from its document: ``spec`` passed through as the CRD has it (a document without
    ``spec``, the WorkloadPriorityClass, as it is)."""
    if "spec" not in doc:
        return TopLevelCustomResource(name, doc, opts)
    return custom_resource(name, doc, opts)


@dataclass(frozen=True, kw_only=True)
class KueueArgs:
    """The chart, its namespace (and labels), its values, and the cluster-scoped Kueue objects to create
    once the CRDs and webhooks are there (ResourceFlavors, Topology, Cohort, WorkloadPriorityClasses),
    keyed by a short name."""

    chart: ChartRef
    namespace: str
    namespace_labels: Mapping[str, str]
    values: Mapping[str, Any]
    objects: Mapping[str, Mapping[str, Any]]
    release_name: str = "kueue"


class Kueue(pulumi.ComponentResource):
    """Kueue (controller, webhooks, CRDs; KueueViz when switched on) and the cluster-wide Kueue objects."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:queueing:Kueue", name, None, opts)
        ns = own_namespace(
            f"{name}-namespace",
            name=args.namespace,
            labels=args.namespace_labels,
            opts=child_options(self, opts),
        )
        # Atomic and awaited: the CRDs and the webhooks are up before any Kueue object or queued job.
        self.release = chart_release(
            f"{name}-release",
            release_name=args.release_name,
            chart=args.chart,
            namespace=args.namespace,
            values=dict(args.values),
            opts=child_options(self, opts, depends_on=[ns]),
        )
        after = child_options(self, opts, depends_on=[self.release])
        self.objects = {key: kueue_object(f"{name}-{key}", doc, after) for key, doc in args.objects.items()}
        self.register_outputs({"release": self.release.name})


RBAC_TYPES = {
    "Role": k8s.rbac.v1.Role,
    "RoleBinding": k8s.rbac.v1.RoleBinding,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
}

TOP_LEVEL = {"metadata": "metadata", "rules": "rules", "roleRef": "role_ref", "subjects": "subjects"}


def member_rbac(
    name: str, docs: Mapping[str, Mapping[str, Any]], opts: pulumi.ResourceOptions
) -> list[pulumi.CustomResource]:
    """The typed RBAC objects of ``docs`` (role -> document), named ``<name>-<role>``."""
    out: list[pulumi.CustomResource] = []
    for role, doc in sorted(docs.items()):
        # the top-level fields as the typed resource's arguments; nested ones pass as the API has them
        body = {TOP_LEVEL[k]: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        out.append(RBAC_TYPES[doc["kind"]](f"{name}-{role}", opts=opts, **body))
    return out


@dataclass(frozen=True, kw_only=True)
class TeamArgs:
    """One team: its namespace (labels, NetworkPolicies), its IAM role (name, the policy JSON) trusted by
    its service account only through the cluster's OIDC provider, and its ClusterQueue and LocalQueue."""

    team: str
    namespace: NamespaceSpec
    service_account: str
    role_name: str
    role_description: str
    policy: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    cluster_queue: Mapping[str, Any]
    local_queue: Mapping[str, Any]
    depends_on_kueue: Sequence[pulumi.Resource] = ()
    # The team's members: an EKS access entry per principal ARN (keyed by a short name) in the Kubernetes
    # group ``member_group``, no EKS access policy; ``member_rbac``: the Role, ClusterRole and their
    # bindings to that group (infra/queueing/rbac.py), by role.
    cluster_name: pulumi.Input[str] | None = None
    members: Mapping[str, str] = field(default_factory=dict)
    member_group: str = ""
    member_rbac: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # ResourceQuotas of the namespace (documents), e.g. no pods of a critical PriorityClass
    quotas: Sequence[Mapping[str, Any]] = ()


class Team(pulumi.ComponentResource):
    """A team: namespace, IAM role and its service account (IRSA), ClusterQueue and LocalQueue.

    The AWS and Kubernetes providers come in through ``opts.providers``; the role does not wait for the
    component's ``depends_on`` (the cluster's Kubernetes side), the Kubernetes objects do.
    """

    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: TeamArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:queueing:Team", name, None, opts)
        aws_opts = pulumi.ResourceOptions(parent=self)
        # the role's name is ours (stack and team): a replacement must free it first
        role_opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        role = irsa_role(
            f"{name}-role",
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer,
            namespace=args.namespace.name,
            service_account=args.service_account,
            description=f"{args.role_description}: pods of {args.namespace.name}/{args.service_account}",
            name=args.role_name,
            max_session_duration=3600,
            opts=role_opts,
        )
        aws.iam.RolePolicy(f"{name}-role-policy", role=role.id, policy=args.policy, opts=aws_opts)
        self.role_arn = role.arn
        namespace = WorkloadNamespaces(
            f"{name}-namespace",
            WorkloadNamespacesArgs(namespaces=[args.namespace]),
            opts=child_options(self, opts),
        )
        WorkloadServiceAccounts(
            f"{name}-identity",
            WorkloadServiceAccountsArgs(
                service_accounts=[
                    ServiceAccountSpec(
                        namespace=args.namespace.name, name=args.service_account, role_arn=role.arn
                    )
                ]
            ),
            opts=child_options(self, opts, depends_on=[namespace]),
        )
        rbac = member_rbac(
            f"{name}-members", args.member_rbac, child_options(self, opts, depends_on=[namespace])
        )
        for doc in args.quotas:
            k8s.core.v1.ResourceQuota(
                f"{name}-quota-{doc['metadata']['name']}",
                metadata=doc["metadata"],
                spec=doc["spec"],
                opts=child_options(self, opts, depends_on=[namespace]),
            )
        for key, arn in sorted(args.members.items()):
            if args.cluster_name is None or not args.member_group:
                raise ValueError(f"team {args.team}: members need the cluster name and the member group")
            aws.eks.AccessEntry(
                f"{name}-member-{key}",
                cluster_name=args.cluster_name,
                principal_arn=arn,
                kubernetes_groups=[args.member_group],
                type="STANDARD",
                # created after the RBAC objects: a member's first request finds its Role bound
                opts=pulumi.ResourceOptions(parent=self, depends_on=rbac),
            )
        kueue = list(args.depends_on_kueue)
        cq = kueue_object(
            f"{name}-cluster-queue", args.cluster_queue, child_options(self, opts, depends_on=kueue)
        )
        kueue_object(
            f"{name}-local-queue",
            args.local_queue,
            child_options(self, opts, depends_on=[*kueue, namespace, cq]),
        )
        self.register_outputs({"role_arn": self.role_arn})


@dataclass(frozen=True, kw_only=True)
class TeamRegistryArgs:
    """A team's ECR repositories (full names), the JSON of their repository and lifecycle policies, the KMS
    key they are encrypted with; the team's CI role (name, trust and permissions JSON; no role when
    ``ci_role_name`` is None); and per inference region (``replica_keys``: region -> replica KMS key) a
    repository creation template for the replicas of ``prefix``, with ``replica_policy`` and the registry's
    template role (``template_role_arn``)."""

    team: str
    prefix: str
    repositories: Sequence[str]
    repository_policy: str
    lifecycle_policy: str
    kms_key_arn: pulumi.Input[str]
    ci_role_name: str | None = None
    ci_role_description: str = ""
    ci_trust_policy: str | None = None
    ci_policy: str | None = None
    replica_keys: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    replica_policy: str | None = None
    template_role_arn: pulumi.Input[str] | None = None
    protect: bool = False


class TeamRegistry(pulumi.ComponentResource):
    """A team's container repositories: tags immutable, scanned on push, KMS-encrypted, expired by the
    lifecycle policy, pushed to only by the team's pushers (the repository policy); the CI role; and the
    creation templates ECR applies to their replicas in the inference regions. The allow behind
    break-glass's exemption in their policies is the registry's, for every team at once (its name prefix).

    Replication itself is the registry's (``infra/storage/component/registry.py``): its filter, the ECR
    namespace, covers ``<namespace>/teams/...``. A template's prefix matches every repository under
    ``<prefix>/`` (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepositoryCreationTemplate.html),
    so the registry's template for the namespace matches these replicas as well. Which of two matching
    templates ECR applies is not stated there: both give the same immutability, key and lifecycle; the
    replica policy (nobody pushes to a replica) holds when ECR picks this, the more specific one.
    """

    repository_urls: dict[str, pulumi.Output[str]]
    ci_role_arn: pulumi.Output[str] | None

    def __init__(self, name: str, args: TeamRegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:queueing:TeamRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.ci_role_arn = None
        waits: list[pulumi.Resource] = []
        if args.ci_role_name is not None:
            if args.ci_trust_policy is None or args.ci_policy is None:
                raise ValueError("a team CI role needs its trust policy and its permissions")
            role = aws.iam.Role(
                f"{name}-ci-role",
                name=args.ci_role_name,
                description=args.ci_role_description,
                assume_role_policy=args.ci_trust_policy,
                max_session_duration=3600,
                opts=fixed_name(child),
            )
            policy = aws.iam.RolePolicy(
                f"{name}-ci-role-policy", role=role.id, policy=args.ci_policy, opts=child
            )
            self.ci_role_arn = role.arn
            # the repository policy names the role: ECR refuses a policy whose principal does not exist
            waits = [role, policy]
        self.repository_urls = {}
        for full in args.repositories:
            short = full.rsplit("/", 1)[-1]
            repo = aws.ecr.Repository(
                f"{name}-{short}",
                name=full,
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
                f"{name}-{short}-lifecycle", repository=repo.name, policy=args.lifecycle_policy, opts=child
            )
            aws.ecr.RepositoryPolicy(
                f"{name}-{short}-policy",
                repository=repo.name,
                policy=args.repository_policy,
                opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
            )
            self.repository_urls[short] = repo.repository_url
        if args.replica_keys:
            if args.replica_policy is None or args.template_role_arn is None:
                raise ValueError("replica templates need the replica policy and the registry's template role")
            for region in sorted(args.replica_keys):
                aws.ecr.RepositoryCreationTemplate(
                    f"{name}-template-{region}",
                    region=region,  # pulumi-aws v7 per-resource region: same provider, other region
                    prefix=args.prefix,
                    applied_fors=["REPLICATION"],
                    description=f"replicas of team {args.team}'s repositories ({args.prefix}/*)",
                    image_tag_mutability="IMMUTABLE",
                    encryption_configurations=[
                        aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                            encryption_type="KMS", kms_key=args.replica_keys[region]
                        )
                    ],
                    lifecycle_policy=args.lifecycle_policy,
                    repository_policy=args.replica_policy,
                    custom_role_arn=args.template_role_arn,
                    opts=fixed_name(child),
                )
        self.register_outputs({"repository_urls": self.repository_urls, "ci_role_arn": self.ci_role_arn})
