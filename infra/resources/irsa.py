"""IAM pieces several components build the same way: a role for a Kubernetes service account (IRSA) and a
managed policy attached to a role. Names are Pulumi's auto-names: IAM names are account-global.
https://docs.aws.amazon.com/eks/latest/userguide/iam-roles-for-service-accounts.html
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.core import iam


def irsa_role(
    resource_name: str,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    namespace: str,
    service_account: str,
    description: str,
    opts: pulumi.ResourceOptions,
    **role_args: Any,
) -> aws.iam.Role:
    """A role only ``system:serviceaccount:<namespace>:<service_account>`` assumes, through the cluster's OIDC
    provider (``oidc_issuer``: its URL without ``https://``); ``role_args``: more ``aws.iam.Role`` inputs."""
    trust = pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda v: json.dumps(iam.irsa_trust_policy(v[0], v[1], namespace, service_account))
    )
    return aws.iam.Role(
        resource_name, assume_role_policy=trust, description=description, opts=opts, **role_args
    )


def attached_policy(
    resource_name: str,
    *,
    role: aws.iam.Role,
    description: str,
    policy: pulumi.Input[str],
    attachment_name: str,
    opts: pulumi.ResourceOptions,
) -> aws.iam.Policy:
    """A customer managed policy (``policy``: its JSON) attached to ``role`` as ``attachment_name``."""
    managed = aws.iam.Policy(resource_name, description=description, policy=policy, opts=opts)
    aws.iam.RolePolicyAttachment(attachment_name, role=role.name, policy_arn=managed.arn, opts=opts)
    return managed
