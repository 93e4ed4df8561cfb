"""KarpenterAws: what Karpenter needs on the AWS side.

- The controller's IAM role (IRSA for ``kube-system/karpenter``) with the release's six policies
  (``infra/karpenter/documents.py``) plus use of the EBS key (nodes' root volumes are encrypted under it, and
  EC2
  launches them with the caller's KMS permissions).
- A node role for the nodes Karpenter launches, with its EKS access entry (type ``EC2_LINUX``: EKS adds
  entries itself only for managed node groups' roles).
- The interruption queue (SQS, SSE, TLS only) and the EventBridge rules feeding it: Spot interruption,
  rebalance recommendation, instance state change, capacity reservation interruption and AWS Health, so
  Karpenter drains a node before EC2 takes it away.
  https://karpenter.sh/docs/concepts/disruption/#interruption

IAM roles and policies are auto-named (account-global names never collide between stacks); the queue name
goes to the chart through ``queue_name``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.cluster.documents import eks_iam
from infra.core import iam
from infra.karpenter import documents as docs
from infra.resources.irsa import attached_policy, irsa_role


@dataclass(frozen=True, kw_only=True)
class KarpenterAwsArgs:
    """``node_policy_arns``: managed policies of the node role (the managed node groups' set)."""

    cluster_name: pulumi.Input[str]
    partition: str
    region: str
    account_id: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    namespace: str
    service_account: str
    node_policy_arns: Sequence[str]
    ebs_key_arn: pulumi.Input[str]
    description_prefix: str


class KarpenterAws(pulumi.ComponentResource):
    """Controller role, node role with access entry, interruption queue and its EventBridge rules."""

    controller_role_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_name: pulumi.Output[str]
    queue_name: pulumi.Output[str]
    queue_arn: pulumi.Output[str]

    def __init__(self, name: str, args: KarpenterAwsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:karpenter:KarpenterAws", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        # -- interruption queue -----------------------------------------------------------------------
        queue = aws.sqs.Queue(
            f"{name}-queue",
            message_retention_seconds=docs.QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            opts=child,
        )
        rules = []
        for rule_name, pattern in docs.INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{rule_name}",
                description=f"{args.description_prefix}: {pattern['detail-type'][0]} to Karpenter",
                event_pattern=json.dumps(pattern),
                opts=child,
            )
            rules.append(rule)
            aws.cloudwatch.EventTarget(
                f"{name}-{rule_name}-target",
                rule=rule.name,
                arn=queue.arn,
                target_id="KarpenterInterruptionQueueTarget",
                opts=child,
            )
        aws.sqs.QueuePolicy(
            f"{name}-queue-policy",
            queue_url=queue.url,
            policy=pulumi.Output.all(queue.arn, *[r.arn for r in rules]).apply(
                lambda v: json.dumps(
                    docs.interruption_queue_policy(v[0], rule_arns=v[1:], account_id=args.account_id)
                )
            ),
            opts=child,
        )

        # -- node role ----------------------------------------------------------------------------------
        node_role = aws.iam.Role(
            f"{name}-node-role",
            description=f"{args.description_prefix}: nodes launched by Karpenter",
            assume_role_policy=json.dumps(iam.service_trust_policy("ec2.amazonaws.com")),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{arn.rsplit('/', 1)[-1]}", role=node_role.name, policy_arn=arn, opts=child
            )
            for arn in args.node_policy_arns
        ]
        # https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html (EC2_LINUX: no policy)
        aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=args.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )

        # -- controller role ------------------------------------------------------------------------------
        controller = irsa_role(
            f"{name}-controller-role",
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer,
            namespace=args.namespace,
            service_account=args.service_account,
            description=f"{args.description_prefix}: Karpenter controller "
            f"({args.namespace}/{args.service_account})",
            opts=child,
        )
        documents = pulumi.Output.all(args.cluster_name, node_role.arn, queue.arn).apply(
            lambda v: docs.controller_policies(
                partition=args.partition,
                region=args.region,
                account_id=args.account_id,
                cluster_name=v[0],
                node_role_arn=v[1],
                queue_arn=v[2],
            )
        )
        for policy_name in docs.CONTROLLER_POLICY_NAMES:
            attached_policy(
                f"{name}-{policy_name}",
                role=controller,
                description=f"{args.description_prefix}: Karpenter controller {policy_name} (v1.14 template)",
                policy=documents.apply(lambda d, n=policy_name: json.dumps(d[n])),
                attachment_name=f"{name}-{policy_name}-attachment",
                opts=child,
            )
        aws.iam.RolePolicy(
            f"{name}-ebs-key",
            role=controller.id,
            policy=pulumi.Output.from_input(args.ebs_key_arn).apply(
                lambda arn: json.dumps(eks_iam.ebs_kms_policy(arn))
            ),
            opts=child,
        )

        self.controller_role_arn = controller.arn
        self.node_role_arn = node_role.arn
        self.node_role_name = node_role.name
        self.queue_name = queue.name
        self.queue_arn = queue.arn
        self.register_outputs(
            {
                "controller_role_arn": self.controller_role_arn,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "queue_name": self.queue_name,
                "queue_arn": self.queue_arn,
            }
        )
