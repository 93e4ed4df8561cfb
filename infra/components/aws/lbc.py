"""LoadBalancerControllerRole: the IAM role of the AWS Load Balancer Controller (IRSA), with the upstream
policy of the pinned release (``infra/lib/lbc_iam.py``) as a managed policy of its own, as AWS's install guide
attaches it. Auto-named: IAM names are account-global.
https://docs.aws.amazon.com/eks/latest/userguide/lbc-helm.html
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.lib import iam, lbc_iam


@dataclass(frozen=True, kw_only=True)
class LoadBalancerControllerRoleArgs:
    partition: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    namespace: str
    service_account: str
    description_prefix: str


class LoadBalancerControllerRole(pulumi.ComponentResource):
    """The controller's role; the chart's service account carries ``role_arn`` in its IRSA annotation."""

    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: LoadBalancerControllerRoleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("aiplat:lbc:LoadBalancerControllerRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda v: json.dumps(iam.irsa_trust_policy(v[0], v[1], args.namespace, args.service_account))
        )
        role = aws.iam.Role(
            f"{name}-role",
            description=f"{args.description_prefix}: AWS Load Balancer Controller "
            f"({args.namespace}/{args.service_account})",
            assume_role_policy=trust,
            opts=child,
        )
        policy = aws.iam.Policy(
            f"{name}-policy",
            description=f"{args.description_prefix}: AWS Load Balancer Controller {lbc_iam.SOURCE_TAG}",
            policy=json.dumps(lbc_iam.controller_policy(args.partition)),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(f"{name}-attachment", role=role.name, policy_arn=policy.arn, opts=child)
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
