"""EksCluster: the EKS control plane, its IAM, OIDC provider, access entries and the first add-ons."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.cluster.documents import eks_iam
from infra.cluster.documents.control_plane import CONTROL_PLANE_LOG_TYPES
from infra.core import iam
from infra.resources.aws import fixed_name
from infra.resources.irsa import irsa_role

# Add-ons that must run before nodes can become Ready: networking (vpc-cni, kube-proxy) and the pod
# identity agent the other add-ons' credentials come through. The rest wait for nodes (EksAddons).
PRE_COMPUTE_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")


@dataclass(frozen=True, kw_only=True)
class AccessEntry:
    """Cluster access for an IAM principal: an EKS access policy name (``AmazonEKSViewPolicy`` ...),
    scoped to ``namespaces`` or, when empty, to the whole cluster."""

    principal_arn: pulumi.Input[str]
    policy: str
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EksClusterArgs:
    """Inputs of EksCluster. Key ARNs come from KmsKeys; this component never creates keys.

    The physical names (cluster, IAM roles, control-plane log group) are decided by the caller.
    """

    cluster_name: str
    cluster_role_name: str
    node_role_name: str
    log_group_name: str
    region: str
    partition: str = "aws"
    kubernetes_version: str
    subnet_ids: list[pulumi.Input[str]]
    endpoint_public_access_cidrs: tuple[str, ...] = ()
    secrets_key_arn: pulumi.Input[str]
    logs_key_arn: pulumi.Input[str]
    log_retention_days: int = 90
    access_entries: dict[str, AccessEntry] = field(default_factory=dict)
    addon_versions: dict[str, str] = field(default_factory=dict)
    # Add-on name -> its configuration values (the add-on's JSON schema, e.g. vpc-cni's enableNetworkPolicy).
    addon_configuration: dict[str, dict[str, Any]] = field(default_factory=dict)
    support_type: str = "STANDARD"
    deletion_protection: bool = False
    # Whether the identity that creates the cluster becomes cluster admin (a ForceNew setting). Off: only
    # the configured access entries (the deploying role among them) and the break-glass entry.
    bootstrap_creator_admin: bool = False


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with a private API endpoint, KMS-encrypted secrets and every control-plane log.

    Authentication is through access entries only (``API`` mode); IRSA gets an IAM OIDC provider and
    EKS Pod Identity its agent add-on. ``k8s_provider`` talks to the cluster with a kubeconfig that
    calls ``aws eks get-token``, so no long-lived token is stored anywhere.
    """

    cluster_name: pulumi.Output[str]
    cluster_arn: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_name: pulumi.Output[str]
    cni_role_arn: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    k8s_provider: k8s.Provider

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:cluster:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = args.cluster_name
        managed = lambda n: eks_iam.managed_policy_arn(n, args.partition)  # noqa: E731

        # https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html
        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            name=args.cluster_role_name,
            assume_role_policy=json.dumps(iam.service_trust_policy("eks.amazonaws.com", tag_session=True)),
            opts=fixed_name(child),
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-cluster-{policy}", role=cluster_role.name, policy_arn=managed(policy), opts=child
            )
            for policy in eks_iam.CLUSTER_POLICIES
        ]
        # Created before the cluster so that retention and encryption are ours, not a default group's.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=args.log_group_name,
            retention_in_days=args.log_retention_days,
            kms_key_id=args.logs_key_arn,
            opts=fixed_name(child),
        )
        public = bool(args.endpoint_public_access_cidrs)
        self.cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=args.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=args.subnet_ids,
                endpoint_private_access=True,
                # Public only with explicit CIDRs:
                # https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
                endpoint_public_access=public,
                public_access_cidrs=list(args.endpoint_public_access_cidrs) if public else None,
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=args.secrets_key_arn),
                resources=["secrets"],
            ),
            enabled_cluster_log_types=list(CONTROL_PLANE_LOG_TYPES),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                # Access is what the access entries say, not who happened to run the first `pulumi up`.
                # https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html
                bootstrap_cluster_creator_admin_permissions=args.bootstrap_creator_admin,
            ),
            # We install vpc-cni, kube-proxy and coredns as managed add-ons with pinned versions.
            bootstrap_self_managed_addons=False,
            # Said explicitly: EKS's default is EXTENDED (billed at the extended rate past standard support).
            # https://docs.aws.amazon.com/eks/latest/userguide/disable-extended-support.html
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.support_type),
            # DeleteCluster is refused while on (also a replacement): a prod cluster is removed only after
            # `aws eks update-cluster-config --no-deletion-protection`.
            # https://docs.aws.amazon.com/eks/latest/userguide/deletion-protection.html
            deletion_protection=args.deletion_protection,
            opts=fixed_name(pulumi.ResourceOptions(parent=self, depends_on=[log_group, *attachments])),
        )
        self.cluster_name = self.cluster.name
        self.cluster_arn = self.cluster.arn
        self.endpoint = self.cluster.endpoint
        self.certificate_authority = self.cluster.certificate_authority.apply(lambda ca: ca.data)
        self.cluster_security_group_id = self.cluster.vpc_config.apply(lambda v: v.cluster_security_group_id)
        issuer_url = self.cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer)
        self.oidc_issuer = issuer_url.apply(lambda u: u.removeprefix("https://"))

        # IRSA: https://docs.aws.amazon.com/eks/latest/userguide/enable-iam-roles-for-service-accounts.html
        self.oidc_provider = aws.iam.OpenIdConnectProvider(
            f"{name}-oidc", url=issuer_url, client_id_lists=["sts.amazonaws.com"], opts=child
        )
        self.oidc_provider_arn = self.oidc_provider.arn

        # One node role for every managed node group; EKS adds its access entry itself.
        self.node_role = aws.iam.Role(
            f"{name}-node-role",
            name=args.node_role_name,
            assume_role_policy=json.dumps(iam.service_trust_policy("ec2.amazonaws.com")),
            opts=fixed_name(child),
        )
        self.node_policy_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}", role=self.node_role.name, policy_arn=managed(policy), opts=child
            )
            for policy in eks_iam.NODE_POLICIES
        ]
        self.node_role_arn = self.node_role.arn
        self.node_role_name = self.node_role.name

        # vpc-cni's own role through IRSA (see eks_iam.CNI_POLICIES): only kube-system/aws-node.
        cni_role = irsa_role(
            f"{name}-vpc-cni-role",
            oidc_provider_arn=self.oidc_provider.arn,
            oidc_issuer=self.oidc_issuer,
            namespace=eks_iam.CNI_NAMESPACE,
            service_account=eks_iam.CNI_SERVICE_ACCOUNT,
            description=f"{cluster_name}: vpc-cni (kube-system/aws-node)",
            opts=child,
        )
        cni_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-vpc-cni-{policy}", role=cni_role.name, policy_arn=managed(policy), opts=child
            )
            for policy in eks_iam.CNI_POLICIES
        ]
        self.cni_role_arn = cni_role.arn

        self.access_policies: list[aws.eks.AccessPolicyAssociation] = []
        for entry_name, entry in sorted(args.access_entries.items()):
            access = aws.eks.AccessEntry(
                f"{name}-access-{entry_name}",
                cluster_name=self.cluster.name,
                principal_arn=entry.principal_arn,
                type="STANDARD",
                opts=child,
            )
            scope = (
                aws.eks.AccessPolicyAssociationAccessScopeArgs(
                    type="namespace", namespaces=list(entry.namespaces)
                )
                if entry.namespaces
                else aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster")
            )
            self.access_policies.append(
                aws.eks.AccessPolicyAssociation(
                    f"{name}-access-{entry_name}-policy",
                    cluster_name=self.cluster.name,
                    principal_arn=access.principal_arn,
                    policy_arn=f"arn:{args.partition}:eks::aws:cluster-access-policy/{entry.policy}",
                    access_scope=scope,
                    # one association per cluster, principal and policy: a changed scope replaces it
                    opts=fixed_name(child),
                )
            )

        self.addons: dict[str, aws.eks.Addon] = {}
        for addon in PRE_COMPUTE_ADDONS:
            cni = addon == "vpc-cni"
            self.addons[addon] = aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=self.cluster.name,
                addon_name=addon,
                addon_version=args.addon_versions[addon],
                configuration_values=(
                    json.dumps(args.addon_configuration[addon], sort_keys=True)
                    if addon in args.addon_configuration
                    else None
                ),
                service_account_role_arn=cni_role.arn if cni else None,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                opts=pulumi.ResourceOptions(parent=self, depends_on=cni_attachments) if cni else child,
            )

        kubeconfig = pulumi.Output.all(self.cluster.name, self.endpoint, self.certificate_authority).apply(
            lambda a: kubeconfig_json(a[0], a[1], a[2], args.region)
        )
        # Nothing is applied through the provider before the access entries grant the deploying identity
        # its access: the cluster creator is not an admin of its own (bootstrap admin off).
        self.k8s_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.access_policies),
        )

        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "cluster_arn": self.cluster_arn,
                "endpoint": self.endpoint,
                "certificate_authority": self.certificate_authority,
                "oidc_provider_arn": self.oidc_provider_arn,
                "oidc_issuer": self.oidc_issuer,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "cni_role_arn": self.cni_role_arn,
                "cluster_security_group_id": self.cluster_security_group_id,
            }
        )


def kubeconfig_json(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig whose user runs ``aws eks get-token`` (short-lived tokens, nothing stored).

    https://docs.aws.amazon.com/eks/latest/userguide/create-kubeconfig.html
    """
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}
            ],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [
                {
                    "name": cluster_name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
                        }
                    },
                }
            ],
        },
        sort_keys=True,
    )
