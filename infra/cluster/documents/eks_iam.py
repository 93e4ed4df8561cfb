"""IAM documents for the EKS control plane, nodes, VPC flow logs and the EBS CSI add-on. Pure, no Pulumi."""

from __future__ import annotations

from infra.core.iam import Policy, policy

AWS_MANAGED = "arn:{partition}:iam::aws:policy/{name}"


# https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html
CLUSTER_POLICIES = ("AmazonEKSClusterPolicy",)


# https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html. Nothing more: every process on a
# node can read the node role's credentials from IMDS (host-network pods despite hop limit 1), so the CNI
# policy (create/modify/delete network interfaces account-wide) goes to vpc-cni's own role (IRSA, below)
# and Session Manager gets its minimal actions (iam.session_manager_policy) instead of
# AmazonSSMManagedInstanceCore (ssm:GetParameter* on every parameter).
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
)


# vpc-cni's own role: "We recommend that you assign it to a separate role" (IRSA for kube-system/aws-node).
# IRSA rather than Pod Identity: the CNI must get credentials before a node is Ready, and IRSA needs no
# other DaemonSet for that (the web identity token comes from the API server, STS from the VPC endpoint
# or NAT). https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html
CNI_POLICIES = ("AmazonEKS_CNI_Policy",)


CNI_NAMESPACE = "kube-system"


CNI_SERVICE_ACCOUNT = "aws-node"


# https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html
EBS_CSI_POLICIES = ("service-role/AmazonEBSCSIDriverPolicy",)


def managed_policy_arn(name: str, partition: str = "aws") -> str:
    return AWS_MANAGED.format(partition=partition, name=name)


def ebs_kms_policy(key_arn: str, region: str | None = None) -> Policy:
    """Lets the EBS CSI driver create and attach volumes encrypted under the stack's EBS key.

    With ``region``, only through EC2 in that region (``kms:ViaService``): the driver asks EC2 for volumes,
    and EC2 uses the key on its behalf; the driver itself never needs the key directly.
    https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html (custom KMS key section)
    https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption.html#ebs-encryption-permissions
    """
    via = {"StringEquals": {"kms:ViaService": f"ec2.{region}.amazonaws.com"}} if region else {}
    return policy(
        {
            "Effect": "Allow",
            "Action": ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"],
            "Resource": [key_arn],
            "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}, **via},
        },
        {
            "Effect": "Allow",
            "Action": [
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:DescribeKey",
            ],
            "Resource": [key_arn],
            **({"Condition": via} if via else {}),
        },
    )
