"""Rules on the EKS cluster: Kubernetes version and add-on builds recorded for it (config only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.cluster import addon_versions
from infra.core.config import Environment
from infra.stack.registry import Finding, RuleContext, at, error, rule, warning

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

CREATE_ADDON_DOC = "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html"
VERSIONS_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html"


@rule("addon-versions-known")
def addon_versions_known(ctx: RuleContext) -> Iterator[Finding]:
    """Every add-on build is one recorded for the cluster's Kubernetes minor; unverified ones are flagged."""
    cluster = ctx.cfg.cluster
    minor = cluster.kubernetes_version
    recorded = addon_versions.recorded()
    if minor not in recorded:
        known = ", ".join(sorted(recorded, key=lambda m: tuple(int(p) for p in m.split("."))))
        yield error(
            at("cluster", "kubernetes_version"),
            f"{minor!r} has no EKS add-on builds recorded (recorded: {known}), and EKS refuses add-on "
            "builds it does not list for the cluster's minor",
            f"record them from EKS with `{addon_versions.REFRESH.format(minor=minor)}` (your AWS "
            f"credentials; review the diff), or use {known.split(', ')[-1]}",
            VERSIONS_DOC,
        )
        return
    pinned = cluster.addons.pinned()
    for addon, version in cluster.addon_versions().items():
        field = at("cluster", "addons", addon.replace("-", "_"))
        listed = addon_versions.builds(minor, addon)
        record = addon_versions.find(minor, addon, version) if version else None
        if record is None:
            choices = ", ".join(b.version for b in listed) or "none"
            yield error(
                field,
                f"{version or 'no build'} is not a build recorded for Kubernetes {minor} "
                f"(recorded: {choices}); EKS refuses a version it does not list for the cluster",
                f"use one of those (or leave it unset for {listed[0].version if listed else 'the default'}), "
                f"or record what EKS lists with `{addon_versions.REFRESH.format(minor=minor)}`",
                CREATE_ADDON_DOC,
            )
        elif not record.aws_published:
            how = "pinned in the stack file" if addon in pinned else "the default"
            yield warning(
                field,
                f"{version} ({how}) for Kubernetes {minor} is listed on no AWS page, only in a third-party "
                f"source ({record.source})",
                f"record the builds from EKS with `{addon_versions.REFRESH.format(minor=minor)}` before "
                "pulumi up",
                CREATE_ADDON_DOC,
            )


@rule("cluster-admin-entry")
def cluster_admin_entry(ctx: RuleContext) -> Iterator[Finding]:
    """Some access entry is a cluster-wide cluster admin: the identity that creates the cluster is not one."""
    entries = ctx.cfg.cluster.access_entries
    if any(e.policy.name == "cluster_admin" and not e.namespaces for e in entries.values()):
        return
    yield error(
        at("cluster", "access_entries"),
        "no entry has policy AmazonEKSClusterAdminPolicy for the whole cluster, and the identity that runs "
        "pulumi up gets no access of its own: the stack's Kubernetes resources could not be applied",
        "add the deploying role, e.g. access_entries: {deployer: {role_name: <role that runs pulumi up>, "
        "policy: AmazonEKSClusterAdminPolicy}}",
        "https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html",
    )


# The EKS audit log (a control-plane log type) is kept a year in prod: long enough to answer who did what to
# a production cluster after the fact (issue 24). Dev keeps CloudWatch's cost down.
PROD_MIN_LOG_RETENTION_DAYS = 365
DEV_LOG_RETENTION_DAYS = 90


def control_plane_log_retention(cfg: PlatformConfig) -> int:
    """``cluster.log_retention_days``, or 365 days in prod and 90 in dev when unset."""
    if cfg.cluster.log_retention_days is not None:
        return cfg.cluster.log_retention_days
    return PROD_MIN_LOG_RETENTION_DAYS if cfg.environment is Environment.prod else DEV_LOG_RETENTION_DAYS


@rule("eks-audit-logs-kept-a-year-in-prod")
def eks_audit_logs_kept_a_year_in_prod(ctx: RuleContext) -> Iterator[Finding]:
    """A prod cluster keeps its control-plane logs (the EKS audit log) at least 365 days."""
    cfg = ctx.cfg
    days = control_plane_log_retention(cfg)
    if cfg.environment is Environment.prod and days < PROD_MIN_LOG_RETENTION_DAYS:
        yield error(
            at("cluster", "log_retention_days"),
            f"{days} days is less than the {PROD_MIN_LOG_RETENTION_DAYS} days a prod cluster keeps its "
            "audit log",
            f"set it to {PROD_MIN_LOG_RETENTION_DAYS} or more (a CloudWatch Logs retention value), or leave "
            "it unset",
        )
