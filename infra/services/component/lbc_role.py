"""LoadBalancerControllerRole: the IAM role of the AWS Load Balancer Controller (IRSA), with the upstream
policy of the pinned release (``infra/services/data/lbc_iam_policy.json``), scoped to this cluster, as managed
policies of its own (two: one is over IAM's size quota), as AWS's install guide attaches it.
Auto-named: IAM names are account-global.
https://docs.aws.amazon.com/eks/latest/userguide/lbc-helm.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from infra.resources.irsa import attached_policy, irsa_role
from infra.services.documents import lbc_iam


@dataclass(frozen=True, kw_only=True)
class LoadBalancerControllerRoleArgs:
    partition: str
    cluster_name: str
    region: str
    account_id: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    namespace: str
    service_account: str
    description_prefix: str
    # the WAFv2 web ACLs the controller may put in front of an ALB (lbc_iam.scoped_policy); None: any of the
    # account and region
    web_acls: Sequence[str] | None = None


class LoadBalancerControllerRole(pulumi.ComponentResource):
    """The controller's role; the chart's service account carries ``role_arn`` in its IRSA annotation."""

    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: LoadBalancerControllerRoleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("aiplat:lbc:LoadBalancerControllerRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = irsa_role(
            f"{name}-role",
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer,
            namespace=args.namespace,
            service_account=args.service_account,
            description=f"{args.description_prefix}: AWS Load Balancer Controller "
            f"({args.namespace}/{args.service_account})",
            opts=child,
        )
        # Two managed policies: the scoped upstream document is over IAM's size quota for one
        # (lbc_iam.PARTS). The first keeps the name it always had, so its URN does not change.
        documents = lbc_iam.scoped_policies(
            cluster_name=args.cluster_name,
            region=args.region,
            account_id=args.account_id,
            partition=args.partition,
            web_acls=args.web_acls,
        )
        for part, document in documents.items():
            suffix = "" if part == lbc_iam.PART_EC2 else f"-{part}"
            attached_policy(
                f"{name}-policy{suffix}",
                role=role,
                description=f"{args.description_prefix}: AWS Load Balancer Controller {lbc_iam.SOURCE_TAG} "
                f"({part})",
                policy=json.dumps(document),
                attachment_name=f"{name}-attachment{suffix}",
                opts=child,
            )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
