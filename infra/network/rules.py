"""Rules on the VPC: its zones, checked against the region's facts (names, and zone IDs where AWS documents a
constraint by ID), and what a VPC without NAT can reach. Zone names are per account: the zone rules run in
preflight against the live account too."""

from __future__ import annotations

from collections.abc import Iterator

from infra.core.config import KubernetesAccess, Role
from infra.network.config import DnsFirewallMode, NatStrategy
from infra.network.dns import DOMAINS_PER_LIST, REGISTRY_HOSTS, domain_problem, stack_firewall_domains
from infra.network.zones import (
    EKS_MIN_CONTROL_PLANE_ZONES,
    EKS_NETWORK_DOC,
    EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS,
    control_plane_zones,
    vpc_zones,
)
from infra.stack.registry import PLAN_AND_PREFLIGHT, Finding, Need, RuleContext, at, error, rule
from infra.storage.config.storage import StorageBackend

# "Your cluster must pull images from a container registry that's in your VPC."
PRIVATE_CLUSTERS_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html"
# Where the cluster services' charts pull from at their pinned versions (none of our values re-points an
# image): cert-manager, kube-prometheus-stack and MinIO quay.io; metrics-server, kube-state-metrics and
# JobSet registry.k8s.io; the NVIDIA device plugin and DCGM exporter nvcr.io; the load balancer controller,
# Karpenter and the FSx CSI driver public.ecr.aws (ECR Public, not served by the ecr.api/ecr.dkr endpoints);
# KEDA and the Kubeflow Trainer ghcr.io; Grafana docker.io; and the EFA plugin AWS's ECR in us-west-2
# (another region's registry, which this VPC's endpoints do not serve either).
PUBLIC_REGISTRIES = tuple(REGISTRY_HOSTS)


@rule("nat-none-no-public-images")
def nat_none_no_public_images(ctx: RuleContext) -> Iterator[Finding]:
    """Without NAT, nodes pull only from ECR through the VPC endpoints: the cluster services (public images)
    need a NAT gateway, or the Kubernetes side off (``kubernetes_access: skip``)."""
    cfg = ctx.cfg
    access = cfg.cluster_services.kubernetes_access
    if cfg.network.nat is not NatStrategy.none or access is KubernetesAccess.skip:
        return
    yield error(
        at("network", "nat"),
        f"none, but cluster_services.kubernetes_access is {access.value}: the cluster services' Helm charts "
        f"pull their images from public registries ({', '.join(PUBLIC_REGISTRIES)}) that a VPC without a NAT "
        "gateway cannot reach (the ECR endpoints serve private ECR only), so every release would wait in "
        "ImagePullBackOff",
        "set network.nat: single (or one_per_az), or cluster_services.kubernetes_access: skip for an "
        "AWS-only stack (mirroring the images through ECR pull-through cache rules is not supported yet)",
        PRIVATE_CLUSTERS_DOC,
    )


@rule("vpc-zones-exist", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def vpc_zones_exist(ctx: RuleContext) -> Iterator[Finding]:
    """network.availability_zones names zones of the stack's region."""
    assert ctx.facts is not None
    names = ctx.facts.zone_names
    unknown = [az for az in ctx.cfg.network.availability_zones if az not in names]
    if unknown:
        yield error(
            at("network", "availability_zones"),
            f"{unknown} are not zones of {ctx.cfg.region}",
            f"use zones from {list(names)}",
        )


@rule("vpc-zone-count", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def vpc_zone_count(ctx: RuleContext) -> Iterator[Finding]:
    """network.az_count is at most the number of zones the region has."""
    assert ctx.facts is not None
    have = len(ctx.facts.zones)
    if ctx.cfg.network.az_count > have:
        yield error(
            at("network", "az_count"),
            f"{ctx.cfg.network.az_count} zones asked for but {ctx.cfg.region} has {have}",
            f"set az_count to at most {have}",
        )


@rule("control-plane-zones", needs=[Need.facts])
def control_plane_zones_supported(ctx: RuleContext) -> Iterator[Finding]:
    """The EKS control plane gets subnets in at least two zones that EKS supports (by zone ID)."""
    assert ctx.facts is not None
    vpc = vpc_zones(ctx.cfg, ctx.facts)
    usable = control_plane_zones(ctx.cfg, ctx.facts)
    if len(usable) >= EKS_MIN_CONTROL_PLANE_ZONES:
        return
    refused = [f"{az} ({ctx.facts.zone_id(az)})" for az in vpc if az not in usable]
    why = f"; EKS refuses control-plane subnets in {', '.join(refused)}" if refused else ""
    spare = [
        z.name
        for z in ctx.facts.zones
        if z.name not in vpc and z.zone_id not in EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS
    ]
    field = "availability_zones" if ctx.cfg.network.availability_zones else "az_count"
    yield error(
        at("network", field),
        f"the VPC's zones {list(vpc)} leave {len(usable)} zone(s) for the EKS control plane, "
        f"CreateCluster needs subnets in at least {EKS_MIN_CONTROL_PLANE_ZONES}{why}",
        f"use at least {EKS_MIN_CONTROL_PLANE_ZONES} zones EKS supports"
        + (f", e.g. add {spare[0]}" if spare else ""),
        EKS_NETWORK_DOC,
    )


@rule("publisher-reaches-kms")
def publisher_reaches_kms(ctx: RuleContext) -> Iterator[Finding]:
    """A train stack with the S3 backend has a KMS interface endpoint: its release publisher signs every
    manifest with the release signing key (trainer/release/signing.py), and the workload pods send HTTPS only
    to the interface endpoints' subnets, S3's prefix list and network.workload_egress_cidrs
    (infra/core/namespaces.py)."""
    cfg = ctx.cfg
    signs = cfg.role is Role.train and cfg.storage.backend is StorageBackend.s3
    if signs and "kms" not in cfg.network.interface_endpoints:
        yield error(
            at("network", "interface_endpoints"),
            "has no 'kms': the release publisher signs manifests with KMS, and its pods reach no public "
            "AWS address (HTTPS egress: the interface endpoints, S3 and network.workload_egress_cidrs only)",
            "add 'kms' to network.interface_endpoints",
            "docs/platform/security.md",
        )


DNS_FIREWALL_DOC = "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/resolver-dns-firewall.html"


@rule("dns-firewall-domains")
def dns_firewall_domains(ctx: RuleContext) -> Iterator[Finding]:
    """network.dns_firewall.allowed_domains are names DNS Firewall accepts, and the whole allow-list (the
    platform's names and these) fits one domain list: AWS would refuse either at create time."""
    fw = ctx.cfg.network.dns_firewall
    if fw.mode is DnsFirewallMode.off:
        return
    for name in fw.allowed_domains:
        problem = domain_problem(name)
        if problem:
            yield error(
                at("network", "dns_firewall", "allowed_domains"),
                f"{name!r} {problem}",
                "write a host name ('pypi.example.com') or a zone's subdomains ('*.example.com')",
                DNS_FIREWALL_DOC,
            )
    total = len(stack_firewall_domains(ctx.cfg))
    if total > DOMAINS_PER_LIST:
        yield error(
            at("network", "dns_firewall", "allowed_domains"),
            f"the allow-list has {total} names; a DNS Firewall domain list holds {DOMAINS_PER_LIST}",
            "allow zones ('*.example.com') instead of their hosts",
            DNS_FIREWALL_DOC,
        )


@rule("dns-firewall-webhook-host")
def dns_firewall_webhook_host(ctx: RuleContext) -> Iterator[Finding]:
    """With the DNS firewall blocking, a webhook receiver's host (a Pulumi secret the program never reads
    as a name) must be in network.dns_firewall.allowed_domains, or Alertmanager cannot resolve it."""
    cfg = ctx.cfg
    if cfg.network.dns_firewall.mode is not DnsFirewallMode.block or cfg.network.dns_firewall.allowed_domains:
        return
    hooks = sorted(n for n, r in cfg.monitoring.alertmanager.receivers.items() if r.kind.value == "webhook")
    if hooks and cfg.monitoring.enabled:
        yield error(
            at("network", "dns_firewall", "allowed_domains"),
            f"is empty but Alertmanager posts to webhook receivers {hooks}, whose hosts the VPC could not "
            "resolve",
            "add each webhook's host to network.dns_firewall.allowed_domains (or set mode: alert)",
            DNS_FIREWALL_DOC,
        )
