"""Karpenter's AWS documents (controller IAM, interruption queue, EventBridge patterns) and its custom
resources (EC2NodeClass, NodePool) as data. Pure, no Pulumi.

IAM, queue and rules follow the release's getting-started CloudFormation template: aws/karpenter-provider-aws
``website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml`` (last changed
in 692ccdd, "Release v1.14.0", 2026-07-11). The custom resources follow the v1.14.1 CRDs
(``pkg/apis/crds/karpenter.sh_nodepools.yaml``, ``karpenter.k8s.aws_ec2nodeclasses.yaml`` at tag v1.14.1);
``tests/k8s/crds/karpenter.py`` checks what we build against a typed model of those schemas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core import allocatable
from infra.core.iam import VERSION, Policy, policy
from infra.core.kube import IRSA_ANNOTATION
from infra.pools.documents.nodes import GPU_RESOURCE, IMDS_HOP_LIMIT, pool_affinity

NODEPOOL_API = "karpenter.sh/v1"
# The well-known labels a NodePool's requirements select instance types by (karpenter.sh/v1.14 scheduling).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_FAMILY_LABEL = "karpenter.k8s.aws/instance-family"
NODECLASS_API = "karpenter.k8s.aws/v1"
SERVICE_ACCOUNT = "karpenter"  # the chart's fullname for release "karpenter" (serviceAccount.name unset)
ROOT_DEVICE = "/dev/xvda"  # AL2023's root device

# EventBridge rules whose events go to the interruption queue (detail-types from the template above).
INTERRUPTION_EVENTS: dict[str, dict[str, list[str]]] = {
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
# The template keeps interruption messages for 5 minutes: older ones describe nodes already gone.
QUEUE_RETENTION_SECONDS = 300


def _ec2(partition: str, region: str, resource: str, account: str = "*") -> str:
    return f"arn:{partition}:ec2:{region}:{account}:{resource}"


# The template's six controller policies, by name: the keys of ``controller_policies`` (the component
# declares one managed policy per name before the documents, which wait for ARNs, are known).
CONTROLLER_POLICY_NAMES = (
    "NodeLifecycle",
    "IAMIntegration",
    "EKSIntegration",
    "Interruption",
    "ZonalShift",
    "ResourceDiscovery",
)


def controller_policies(
    *,
    partition: str,
    region: str,
    account_id: str,
    cluster_name: str,
    node_role_arn: str,
    queue_arn: str,
) -> dict[str, Policy]:
    """The controller's six policies of the template, by the template's policy name (without the cluster).

    Each stays a managed policy of its own, as in the template (together they exceed the 6,144 characters
    of one managed policy), so a template update maps one to one.
    """
    owned = f"kubernetes.io/cluster/{cluster_name}"
    launched = [
        _ec2(partition, region, f"{r}/*")
        for r in (
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    ]
    profile_arn = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    cluster_arn = f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
    return {
        "NodeLifecycle": policy(
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Resource": [
                    _ec2(partition, region, "image/*", ""),
                    _ec2(partition, region, "snapshot/*", ""),
                    *(
                        _ec2(partition, region, f"{r}/*")
                        for r in ("security-group", "subnet", "capacity-reservation", "placement-group")
                    ),
                ],
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Resource": _ec2(partition, region, "launch-template/*"),
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Condition": {
                    "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Resource": launched,
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Resource": launched,
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Resource": _ec2(partition, region, "instance/*"),
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                    "ForAllValues:StringEquals": {
                        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                    },
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Resource": [
                    _ec2(partition, region, "instance/*"),
                    _ec2(partition, region, "launch-template/*"),
                ],
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Condition": {
                    "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
            },
        ),
        "IAMIntegration": policy(
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Resource": node_role_arn,
                "Action": "iam:PassRole",
                "Condition": {
                    "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Resource": profile_arn,
                "Action": ["iam:CreateInstanceProfile"],
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Resource": profile_arn,
                "Action": ["iam:TagInstanceProfile"],
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{owned}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Resource": profile_arn,
                "Action": [
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ],
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{owned}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
        ),
        "EKSIntegration": policy(
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Resource": cluster_arn,
                "Action": "eks:DescribeCluster",
            }
        ),
        "Interruption": policy(
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Resource": queue_arn,
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            }
        ),
        "ZonalShift": policy(
            {
                "Sid": "AllowZonalShiftStatusReadOnly",
                "Effect": "Allow",
                "Resource": "*",
                "Action": ["arc-zonal-shift:GetManagedResource"],
                "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
            }
        ),
        "ResourceDiscovery": policy(
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": [
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
                "Action": "ssm:GetParameter",
            },
            {
                "Sid": "AllowPricingReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": "pricing:GetProducts",
            },
            {
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Resource": "*",
                "Action": "iam:ListInstanceProfiles",
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Resource": profile_arn,
                "Action": "iam:GetInstanceProfile",
            },
        ),
    }


def interruption_queue_policy(queue_arn: str, *, rule_arns: Sequence[str], account_id: str) -> Policy:
    """Only our EventBridge rules (``rule_arns``, of ``account_id``) may send to the queue; nothing may use
    it without TLS. Upstream's template also trusts ``sqs.amazonaws.com`` and no source: nothing of SQS
    sends here, and a service principal without ``aws:SourceArn``/``aws:SourceAccount`` is a confused
    deputy (any account's rule could target the queue).
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html"""
    if not rule_arns:
        raise ValueError("the interruption queue needs the ARNs of the rules that feed it")
    return {
        "Version": VERSION,
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Sid": "OurInterruptionRules",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {
                    "ArnEquals": {"aws:SourceArn": sorted(rule_arns)},
                    "StringEquals": {"aws:SourceAccount": account_id},
                },
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                "Principal": "*",
            },
        ],
    }


@dataclass(frozen=True, kw_only=True)
class NodeClassSpec:
    """What the EC2NodeClass says: AMI, node role, where nodes go, their disks and metadata options.

    The role name, security group ids and key ARN are placed in the spec as they are: strings, or values
    known only at deploy time that the wiring passes without an apply, so the literal fields (IMDS,
    encryption, tags) stay known to the policy pack at preview."""

    ami_alias: str
    node_role_name: Any
    subnet_tags: Mapping[str, str]
    security_group_ids: Sequence[Any]
    root_volume_gib: int
    ebs_key_arn: Any
    tags: Mapping[str, str]
    # MIME user data Karpenter merges with its own NodeConfig (nodes.gpu_user_data: GPU isolation)
    user_data: str | None = None


def ec2_node_class_spec(s: NodeClassSpec) -> dict[str, Any]:
    """``EC2NodeClass.spec`` (karpenter.k8s.aws/v1).

    IMDSv2 only with hop limit 1 (pods off the host network cannot reach the node's credentials), an
    encrypted gp3 root volume under the stack's EBS key, NVMe instance store striped (RAID0) for the
    data cache, subnets by tag and the cluster security group by ID.
    https://karpenter.sh/docs/concepts/nodeclasses/
    """
    return {
        "amiSelectorTerms": [{"alias": s.ami_alias}],
        "role": s.node_role_name,
        "subnetSelectorTerms": [{"tags": dict(s.subnet_tags)}],
        "securityGroupSelectorTerms": [{"id": sg} for sg in s.security_group_ids],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{s.root_volume_gib}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    "kmsKeyID": s.ebs_key_arn,
                    "deleteOnTermination": True,
                },
            }
        ],
        "instanceStorePolicy": "RAID0",
        "tags": dict(s.tags),
        **({"userData": s.user_data} if s.user_data else {}),
    }


@dataclass(frozen=True, kw_only=True)
class NodePoolSpec:
    """What a GPU NodePool says: the types AWS offers in our zones, capacity, limits and disruption."""

    node_class: str
    pool_label: tuple[str, str]
    instance_types: Sequence[str]
    families: Sequence[str]
    zones: Sequence[str]
    architectures: Sequence[str]
    capacity_types: Sequence[str]
    gpu_taint: tuple[str, str]
    gpu_limit: int
    consolidation_policy: str
    consolidate_after: str
    budget_nodes: str
    expire_after: str


def node_pool_spec(s: NodePoolSpec) -> dict[str, Any]:
    """``NodePool.spec`` (karpenter.sh/v1): GPU nodes of the offered types, tainted like the managed GPU
    pools so that only pods tolerating ``nvidia.com/gpu`` land there.

    https://karpenter.sh/docs/concepts/nodepools/
    """
    key, value = s.pool_label
    taint_key, taint_value = s.gpu_taint
    return {
        "template": {
            "metadata": {"labels": {key: value}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": s.node_class},
                "requirements": [
                    {
                        "key": INSTANCE_FAMILY_LABEL,
                        "operator": "In",
                        "values": list(s.families),
                    },
                    {
                        "key": INSTANCE_TYPE_LABEL,
                        "operator": "In",
                        "values": list(s.instance_types),
                    },
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(s.zones)},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": list(s.architectures)},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(s.capacity_types)},
                ],
                "taints": [{"key": taint_key, "value": taint_value, "effect": "NoSchedule"}],
                "expireAfter": s.expire_after,
            },
        },
        "limits": {GPU_RESOURCE: str(s.gpu_limit)},
        "disruption": {
            "consolidationPolicy": s.consolidation_policy,
            "consolidateAfter": s.consolidate_after,
            "budgets": [{"nodes": s.budget_nodes}],
        },
    }


def karpenter_values(
    *,
    cluster_name: str,
    cluster_endpoint: Any,
    interruption_queue: Any,
    role_arn: Any,
    region: str,
    replicas: int,
    system_pools: Sequence[str],
) -> dict[str, Any]:
    """aws/karpenter-provider-aws ``charts/karpenter`` 1.14.1 values.

    The endpoint, queue and role ARN are placed as they are (strings, or deploy-time values passed without
    an apply, so every other value stays known at preview).

    The chart's default affinity (``karpenter.sh/nodepool DoesNotExist``: never on a node it manages, one
    replica per host) is kept and pinned to the system pools. ``AWS_REGION`` is set because the
    controller cannot read it from instance metadata. Resources follow the getting-started guide (1 CPU,
    1 GiB, requests = limits).
    """
    return {
        "replicas": replicas,
        "serviceAccount": {
            "create": True,
            "name": SERVICE_ACCOUNT,
            "annotations": {IRSA_ANNOTATION: role_arn},
        },
        "settings": {
            "clusterName": cluster_name,
            "clusterEndpoint": cluster_endpoint,
            "interruptionQueue": interruption_queue,
        },
        "affinity": {
            **pool_affinity(system_pools, {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}),
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            },
        },
        "controller": {
            "env": [{"name": "AWS_REGION", "value": region}],
            # counted by the rule minio-fits-system-pools, which reads the same constant
            "resources": {
                "requests": dict(allocatable.KARPENTER_CONTROLLER_RESOURCES),
                "limits": dict(allocatable.KARPENTER_CONTROLLER_RESOURCES),
            },
        },
    }
