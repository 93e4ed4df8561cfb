"""What the VPC's Route 53 Resolver DNS Firewall lets nodes and pods resolve, and what AWS accepts of it.
Pure: the rules, the wiring and the policy pack read it.

Nodes query the VPC resolver directly and pods through CoreDNS, which forwards every name outside
``cluster.local`` to it, so one allow-list serves both. A name outside it gets NXDOMAIN (mode ``block``): a
pod cannot put a token into a query for a name whose authoritative server an attacker reads.

Allowed, with why:
- ``amazonaws.com`` and its subdomains (``api.aws``, and ``amazonaws.com.cn`` in China, likewise): every
  AWS endpoint the nodes and pods call (EKS, its OIDC issuer, ECR and its S3 layer bucket, S3, STS, SSM,
  EC2, CloudWatch Logs, KMS, ELB) and the names of our load balancers. AWS answers for these zones and no
  customer reads their query logs, so they carry no data out; narrowing to the region would miss the
  region-second names (``<id>.gr7.<region>.eks.amazonaws.com``, ``<lb>.<region>.elb.amazonaws.com``) and
  the global ones (``sts.amazonaws.com``, ``s3.amazonaws.com``).
- the VPC's own names: ``<region>.compute.internal`` (``ec2.internal`` in us-east-1), the node hostnames
  and the search suffixes pods' queries are tried with.
- ``time.aws.com``: Amazon Time Sync's public name, in AL2023's chrony pool beside 169.254.169.123.
- the public registries the cluster services pull from (:data:`REGISTRY_HOSTS`, also the rules'
  PUBLIC_REGISTRIES) and the hosts their blobs come from, when the stack pulls them (NAT and the
  Kubernetes side on).
- the stack's Route 53 zone (``inference.https.dns_zone_name``), Slack's webhook host when Alertmanager
  posts there, and ``network.dns_firewall.allowed_domains``.

DNS Firewall syntax: https://docs.aws.amazon.com/Route53/latest/APIReference/API_route53resolver_UpdateFirewallDomains.html
(an optional leading ``*``, then letters, digits, hyphens and dots; 1-255 characters). A ``*.`` name matches
the subdomains only, so a zone is listed with and without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from infra.core.config import KubernetesAccess
from infra.core.naming import partition_of
from infra.network.config import NatStrategy

# What AWS refuses at create time. A domain: an optional leading '*', then letters, digits, hyphens (and the
# dots between labels), 1-255 characters (UpdateFirewallDomains, above); rule group association priority
# 100-9900, unique per VPC (AssociateFirewallRuleGroup: "The allowed values for Priority are between 100 and
# 9900"); rule priorities unique within a group (CreateFirewallRule). Quotas as Route 53 VPC Resolver's
# "Quotas on DNS Firewall" lists them (domains per domain list 100,000; rules per rule group 1,000):
# https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/DNSLimitations.html
DOMAIN_PATTERN = re.compile(r"^(\*|\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.?$")
DOMAIN_MAX = 255
DOMAINS_PER_LIST = 100_000
RULES_PER_GROUP = 1_000
ASSOCIATION_PRIORITY = (100, 9900)
# Ours: the allow rule first, then the catch-all; the association early among the VPC's rule groups (AWS
# Firewall Manager's own go first at 100 and last at 9900... leave room either side).
ALLOW_PRIORITY, CATCH_ALL_PRIORITY = 100, 200
OUR_ASSOCIATION_PRIORITY = 1000
EVERYTHING = "*"  # a domain list entry that matches every name

# Where each public registry's clients are sent for tokens and blobs (beyond the registry's own name):
# Docker Hub https://docs.docker.com/desktop/setup/allow-list/; GitHub Container Registry
# https://docs.github.com/en/packages/working-with-a-github-packages-registry/working-with-the-container-registry
# (blobs on pkg-containers.githubusercontent.com); quay.io (cdnNN.quay.io); registry.k8s.io redirects to
# its regional S3 mirrors (amazonaws.com) or Artifact Registry (*.pkg.dev)
# https://github.com/kubernetes/registry.k8s.io/blob/main/docs/debugging.md; nvcr.io (NGC, *.ngc.nvidia.com
# for tokens); public.ecr.aws serves blobs from CloudFront.
REGISTRY_HOSTS: dict[str, tuple[str, ...]] = {
    "quay.io": ("quay.io", "*.quay.io"),
    "registry.k8s.io": ("registry.k8s.io", "*.pkg.dev"),
    "nvcr.io": ("nvcr.io", "*.nvcr.io", "*.ngc.nvidia.com"),
    "public.ecr.aws": ("public.ecr.aws", "*.cloudfront.net"),
    "ghcr.io": ("ghcr.io", "pkg-containers.githubusercontent.com"),
    "docker.io": ("docker.io", "*.docker.io", "production.cloudflare.docker.com"),
}
SLACK_WEBHOOK_HOST = "hooks.slack.com"
TIME_SYNC = "time.aws.com"


def zone(name: str) -> tuple[str, str]:
    """A zone and its subdomains, as two DNS Firewall entries."""
    return name, f"*.{name}"


def vpc_domain(region: str) -> str:
    """The VPC's private DNS domain: ``ec2.internal`` in us-east-1, ``<region>.compute.internal`` elsewhere.
    https://docs.aws.amazon.com/vpc/latest/userguide/AmazonDNS-concepts.html"""
    return "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"


def aws_domains(region: str, partition: str = "aws") -> list[str]:
    """AWS's own names and the VPC's, for ``region``."""
    aws = ["amazonaws.com.cn"] if partition == "aws-cn" else ["amazonaws.com", "api.aws"]
    return [*(d for name in aws for d in zone(name)), *zone(vpc_domain(region)), TIME_SYNC]


def firewall_domains(
    *,
    region: str,
    partition: str = "aws",
    registries: Iterable[str] = (),
    zones: Iterable[str] = (),
    slack: bool = False,
    extra: Iterable[str] = (),
) -> list[str]:
    """The allow-list, sorted, each once: AWS's and the VPC's names, ``registries`` (keys of
    :data:`REGISTRY_HOSTS`), ``zones`` (the stack's Route 53 zones, with their subdomains), Slack's webhook
    host with ``slack``, and ``extra`` as given."""
    unknown = sorted(set(registries) - set(REGISTRY_HOSTS))
    if unknown:
        raise ValueError(f"no DNS names recorded for registries {unknown}; add them to REGISTRY_HOSTS")
    names = [
        *aws_domains(region, partition),
        *(h for r in registries for h in REGISTRY_HOSTS[r]),
        *(d for z in zones for d in zone(z.rstrip(".").lower())),
        *([SLACK_WEBHOOK_HOST] if slack else []),
        *extra,
    ]
    return sorted(set(names))


def domain_problem(name: str) -> str | None:
    """Why DNS Firewall would refuse ``name`` as a domain list entry, or None."""
    if not 1 <= len(name) <= DOMAIN_MAX:
        return f"is {len(name)} characters; DNS Firewall takes 1-{DOMAIN_MAX}"
    if name != EVERYTHING and not DOMAIN_PATTERN.match(name):
        return "is not a domain (letters, digits, hyphens between dots; '*.' only in front)"
    return None


def stack_firewall_domains(cfg: Any) -> list[str]:
    """The allow-list of a stack's config (``PlatformConfig``): the registries only when the stack pulls
    public images (NAT on and the Kubernetes side applied; ``nat-none-no-public-images``)."""
    pulls = (
        cfg.network.nat is not NatStrategy.none
        and cfg.cluster_services.kubernetes_access is not KubernetesAccess.skip
    )
    https = getattr(cfg.inference, "https", None)
    receivers = cfg.monitoring.alertmanager.receivers.values()
    return firewall_domains(
        region=cfg.region,
        partition=partition_of(cfg.region),
        registries=list(REGISTRY_HOSTS) if pulls else [],
        zones=[https.dns_zone_name] if https is not None and https.dns_zone_name else [],
        slack=any(r.kind.value == "slack" for r in receivers),
        extra=cfg.network.dns_firewall.allowed_domains,
    )
