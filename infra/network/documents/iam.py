"""Policies of the VPC endpoints: the S3 gateway endpoint (the stack's buckets and the buckets behind ECR
and the node images) and the interface endpoints (our account's principals and resources). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.core.iam import Policy, policy


def flow_logs_delivery_policy(log_group_arn: str) -> Policy:
    """What the VPC flow logs service needs to write into one log group.

    https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html
    """
    return policy(
        {
            "Sid": "WriteFlowLogGroup",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {
            # DescribeLogGroups has no resource-level permission: on a log group ARN it is never granted.
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html
            "Sid": "DescribeLogGroups",
            "Effect": "Allow",
            "Action": ["logs:DescribeLogGroups"],
            "Resource": "*",
        },
    )


# Buckets of other accounts that nodes read through the S3 gateway endpoint (s3:ResourceAccount cannot name
# them): ECR image layers, the Amazon Linux 2023 package repositories, and registry.k8s.io's mirror in the
# region (registry.k8s.io redirects clients on AWS to it: prod-registry-k8s-io-<region>, where one exists).
# https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html#ecr-setting-up-s3-gateway
# https://docs.aws.amazon.com/linux/al2023/ug/managing-repos-os-updates.html (al2023-repos-<region>-de612dc2)
# https://github.com/kubernetes/registry.k8s.io (the S3 mirrors)
#
# Public registries whose blob storage is one S3 bucket, by the bucket's region (review finding F3). A
# gateway endpoint only carries requests to S3 in its own region (the route uses that region's S3 prefix
# list; https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html), so the policy filters
# these pulls only in that region; from any other region they leave outside the endpoint (NAT gateway)
# and its policy never sees them, so other regions' endpoint policies are not widened.
# * quay.io (kube-prometheus-stack's Prometheus/Alertmanager/operator/config-reloader/node-exporter,
#   Grafana's k8s-sidecar, cert-manager's jetstack images): blobs live in ``quayio-production-s3``
#   (us-east-1); quay.io answers blob GETs from us-east-1 with a 302 straight to that bucket
#   (``s3.us-east-1.amazonaws.com/quayio-production-s3/...`` or ``quayio-production-s3.s3.amazonaws.com``)
#   instead of ``cdnNN.quay.io``. Sources: konflux-ci/caching ADR/0001-caching-container-image-layers.md
#   ("Direct S3 URLs: Used in us-east-1 region for direct blob storage access"), and Red Hat's OpenShift
#   firewall configuration: "quayio-production-s3.s3.amazonaws.com - Required to access Quay image content
#   in AWS" https://docs.redhat.com/en/documentation/openshift_container_platform/4.19/html/
#   installation_configuration/configuring-firewall
# * Docker Hub (Grafana's ``docker.io/grafana/grafana``): the same konflux-ci ADR lists a "Docker Hub S3
#   backend", ``docker-images-prod.s3*.amazonaws.com/registry-v2/docker/registry/v2/blobs/...``, beside its
#   Cloudflare hosts. Docker's own allowlist names only Cloudflare/CloudFront hosts for pulls
#   (production.cloudflare.docker.com, production.cloudfront.docker.com, an R2 bucket named
#   docker-images-prod; https://docs.docker.com/desktop/setup/allow-list/), which never pass through the
#   endpoint. The S3 bucket's region is not documented: it is listed under us-east-1 (the ADR's S3 redirects
#   are us-east-1's); if it lives elsewhere the entry is inert, since no other region's traffic reaches a
#   us-east-1 endpoint. Not verified by a pull from a private subnet.
REGISTRY_BACKEND_BUCKETS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("quayio-production-s3", "docker-images-prod"),
}


def aws_node_buckets(region: str, partition: str = "aws") -> list[str]:
    """ARNs of the objects of other accounts that nodes fetch through S3 in ``region``: AWS's (ECR
    layers, AL2023 repositories, registry.k8s.io's mirror) and, in the region that holds them, the S3
    backends of public registries (:data:`REGISTRY_BACKEND_BUCKETS`)."""
    backends = REGISTRY_BACKEND_BUCKETS.get(region, ()) if partition == "aws" else ()
    return [
        f"arn:{partition}:s3:::prod-{region}-starport-layer-bucket/*",
        f"arn:{partition}:s3:::al2023-repos-{region}-de612dc2/*",
        f"arn:{partition}:s3:::prod-registry-k8s-io-{region}/*",
        *(f"arn:{partition}:s3:::{bucket}/*" for bucket in backends),
    ]


def s3_endpoint_policy(*, bucket_names: Sequence[str], region: str, partition: str = "aws") -> Policy:
    """Policy of the VPC's S3 gateway endpoint: our buckets (any action, the bucket policies and IAM
    decide the rest) and reads of the AWS-owned buckets nodes need; nothing else leaves through it.

    https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html#edit-vpc-endpoint-policy-s3
    """
    ours = [f"arn:{partition}:s3:::{b}" for b in sorted(set(bucket_names))]
    statements: list[dict[str, Any]] = []
    if ours:
        statements.append(
            {
                "Sid": "OurBuckets",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [a for arn in ours for a in (arn, f"{arn}/*")],
            }
        )
    statements.append(
        {
            "Sid": "AwsBucketsNodesRead",
            "Effect": "Allow",
            "Principal": "*",
            "Action": ["s3:GetObject"],
            "Resource": aws_node_buckets(region, partition),
        }
    )
    return policy(*statements)


# The account that holds the EKS add-on images (vpc-cni, kube-proxy, CoreDNS, the Pod Identity agent...) in
# each region, where it is not 602401143452: https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html
# (checked 2026-12-06). Nodes pull them through the ecr.api/ecr.dkr endpoints, from an account not ours.
EKS_IMAGE_ACCOUNT = "602401143452"
EKS_IMAGE_ACCOUNTS: dict[str, str] = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-east-2": "533267051163",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
}
# AWS-owned resources our principals use through an endpoint, by service (aws-samples/
# data-perimeter-policy-examples vpc_endpoint_policies/{ec2,ssm}_endpoint_policy.json, "AllowRequestsByOrgs
# IdentitiesToAWSResources"; service_owned_resources.md): EC2 launches from AWS's AMIs (Karpenter's
# CreateFleet, the node groups' RunInstances) and reads AWS-managed prefix lists; SSM serves the public
# parameters (the EKS AMI IDs Karpenter resolves) and AWS's documents (Session Manager).
AWS_OWNED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ec2": (
        (
            "ec2:RunInstances",
            "ec2:CreateFleet",
            "ec2:CreateTags",
            "ec2:DeleteTags",
            "ec2:GetManagedPrefixListEntries",
        ),
        ("arn:{p}:ec2:*::image/*", "arn:{p}:ec2:*:aws:prefix-list/*"),
    ),
    "ssm": (
        ("ssm:Describe*", "ssm:List*", "ssm:Get*", "ssm:SendCommand", "ssm:StartSession"),
        ("arn:{p}:ssm:{r}::parameter/aws/*", "arn:{p}:ssm:{r}::document/*"),
    ),
}
ECR_SERVICES = ("ecr.api", "ecr.dkr")
# Every Allow of an interface endpoint's policy names the caller's or the resource's account (or an AWS
# service principal): the policy pack's ``interface-endpoint-account-policy`` reads these.
ENDPOINT_ACCOUNT_KEYS = ("aws:PrincipalAccount", "aws:ResourceAccount", "aws:PrincipalIsAWSService")


def eks_image_account(region: str) -> str:
    """The account of the EKS add-on images in ``region``."""
    return EKS_IMAGE_ACCOUNTS.get(region, EKS_IMAGE_ACCOUNT)


def interface_endpoint_policy(
    *, service: str, account_id: str, region: str, partition: str = "aws"
) -> Policy:
    """Policy of the interface endpoint of ``service``: our account's principals on our account's resources,
    plus the exceptions AWS documents for the service. Keys of another account (an attacker's, in a pod)
    get nothing through it, and our principals reach no other account's resources.

    - ``OurPrincipalsOurResources``: ``aws:PrincipalAccount`` and ``aws:ResourceAccount`` both ours
      (aws-samples/data-perimeter-policy-examples default_endpoint_policy.json, with the account keys).
    - ``OurPrincipalsNoResourceAccount``: our principals on the actions whose request carries no
      ``aws:ResourceAccount`` (the IAM reference lists such actions under the key's "Availability", e.g.
      ec2:CreateVolume, ec2:CopySnapshot; https://docs.aws.amazon.com/IAM/latest/UserGuide/
      reference_policies_condition-keys.html#condition-keys-resourceaccount): a missing key fails
      StringEquals, so without this they would be refused.
    - ``AwsServicePrincipals``: AWS services calling on our behalf (``aws:PrincipalIsAWSService``).
    - sts: ``AssumeRoleWithWebIdentity`` (IRSA) is made before any principal exists, so it has no
      ``aws:PrincipalAccount``: allowed to our roles only (``aws:ResourceAccount``; data-perimeter
      resource_control_policies/README.md on web identity federation).
    - ecr.api/ecr.dkr: our principals pull the EKS add-on images from AWS's account in the region
      (:func:`eks_image_account`; data-perimeter ecr.api_endpoint_policy.json).
    - ec2, ssm: our principals on AWS-owned AMIs, prefix lists, public parameters and documents
      (:data:`AWS_OWNED`).

    https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html
    """
    ours = {"aws:PrincipalAccount": account_id}
    statements: list[dict[str, Any]] = [
        {
            "Sid": "OurPrincipalsOurResources",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": {**ours, "aws:ResourceAccount": account_id}},
        },
        {
            "Sid": "OurPrincipalsNoResourceAccount",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": ours, "Null": {"aws:ResourceAccount": "true"}},
        },
        {
            "Sid": "AwsServicePrincipals",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "*",
            "Resource": "*",
            "Condition": {"Bool": {"aws:PrincipalIsAWSService": "true"}},
        },
    ]
    if service == "sts":
        statements.append(
            {
                "Sid": "WebIdentityToOurRoles",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceAccount": account_id}},
            }
        )
    if service in ECR_SERVICES:
        statements.append(
            {
                "Sid": "OurPrincipalsEksImages",
                "Effect": "Allow",
                "Principal": "*",
                "Action": [
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                "Resource": "*",
                "Condition": {"StringEquals": {**ours, "aws:ResourceAccount": eks_image_account(region)}},
            }
        )
    if service in AWS_OWNED:
        actions, resources = AWS_OWNED[service]
        statements.append(
            {
                "Sid": "OurPrincipalsAwsOwnedResources",
                "Effect": "Allow",
                "Principal": "*",
                "Action": list(actions),
                "Resource": [r.format(p=partition, r=region) for r in resources],
                "Condition": {"StringEquals": ours},
            }
        )
    return policy(*statements)
