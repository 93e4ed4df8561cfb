"""EksAddons: the managed add-ons that need running nodes (coredns, EBS CSI, node monitoring agent)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.cluster.documents import eks_iam
from infra.core import iam
from infra.resources.aws import fixed_name
from infra.resources.options import child_options

POST_COMPUTE_ADDONS = ("coredns", "aws-ebs-csi-driver", "eks-node-monitoring-agent")
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"  # the add-on's controller service account


@dataclass(frozen=True, kw_only=True)
class EksAddonsArgs:
    """Inputs of EksAddons; ``depends_on`` in the options should name the node pools."""

    ebs_csi_role_name: str
    partition: str = "aws"
    account_id: str | None = None
    region: str | None = None
    cluster_name: pulumi.Input[str]
    ebs_key_arn: pulumi.Input[str]
    addon_versions: dict[str, str] = field(default_factory=dict)


class EksAddons(pulumi.ComponentResource):
    """coredns, the EBS CSI driver (credentials via EKS Pod Identity) and the node monitoring agent.

    The node monitoring agent reports GPU (XID, NVLink), network and storage faults as node
    conditions, which is what managed node group auto repair acts on:
    https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
    """

    ebs_csi_role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: EksAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:addons:EksAddons", name, None, opts)
        # children repeat the component's depends_on (the system pools): see infra/resources/options.py
        child = child_options(self, opts)
        role = aws.iam.Role(
            f"{name}-ebs-csi-role",
            name=args.ebs_csi_role_name,
            # Only this cluster's EBS CSI controller, by the session tags Pod Identity sets.
            assume_role_policy=pulumi.Output.from_input(args.cluster_name).apply(
                lambda cluster: json.dumps(
                    iam.pod_identity_trust_policy(
                        account_id=args.account_id,
                        cluster_name=cluster,
                        namespace="kube-system",
                        service_account=EBS_CSI_SERVICE_ACCOUNT,
                    )
                )
            ),
            opts=fixed_name(child),
        )
        for policy in eks_iam.EBS_CSI_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-ebs-csi-{policy.rsplit('/', 1)[-1]}",
                role=role.name,
                policy_arn=eks_iam.managed_policy_arn(policy, args.partition),
                opts=child,
            )
        aws.iam.RolePolicy(
            f"{name}-ebs-csi-kms",
            role=role.id,
            policy=pulumi.Output.from_input(args.ebs_key_arn).apply(
                lambda arn: json.dumps(eks_iam.ebs_kms_policy(arn, args.region))
            ),
            opts=child,
        )
        self.ebs_csi_role_arn = role.arn
        self.addons: dict[str, aws.eks.Addon] = {}
        for addon in POST_COMPUTE_ADDONS:
            identities = (
                [
                    aws.eks.AddonPodIdentityAssociationArgs(
                        role_arn=role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                    )
                ]
                if addon == "aws-ebs-csi-driver"
                else None
            )
            self.addons[addon] = aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=args.cluster_name,
                addon_name=addon,
                addon_version=args.addon_versions[addon],
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                pod_identity_associations=identities,
                opts=child,
            )
        self.register_outputs({"ebs_csi_role_arn": self.ebs_csi_role_arn})
