"""EKS control plane: private endpoint, control-plane logs, a version in standard support, upgrade policy."""

from __future__ import annotations

from collections.abc import Iterator

from infra.cluster.calendar import (
    CALENDAR,
    CALENDAR_REFRESH,
    SUPPORT_EXTENDED,
    SUPPORT_STANDARD,
    in_standard_support,
)
from infra.cluster.documents.control_plane import CONTROL_PLANE_LOG_TYPES
from infra.network import cidrs

from .core import HIGH, MEDIUM, UNKNOWN, Ctx, Res, Violation, as_list, resource_rule, truthy, violation

CLUSTER = "aws:eks/cluster:Cluster"


@resource_rule(
    "eks-private-endpoint",
    description="The Kubernetes API endpoint is private; a public endpoint, if any, admits only a few "
    "listed public ranges (never 0.0.0.0/0, which is EKS's default).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html",
    types=(CLUSTER,),
    unknowns="Unknown access flags or CIDRs are violations (they are literals).",
    config={
        "maxPublicAddresses": {
            "type": "number",
            "default": cidrs.MAX_PUBLIC_ENDPOINT_ADDRESSES,
            "description": "Most public addresses the public endpoint CIDRs may cover together (the "
            "schema's limit, infra.network.cidrs).",
        }
    },
)
def eks_private_endpoint(r: Res, ctx: Ctx) -> Iterator[Violation]:
    vpc = r.get("vpcConfig") or {}
    private = truthy(vpc.get("endpointPrivateAccess")) if isinstance(vpc, dict) else UNKNOWN
    public = truthy(vpc.get("endpointPublicAccess")) if isinstance(vpc, dict) else UNKNOWN
    if private is not True:
        yield violation(
            f"the private endpoint is off (endpointPrivateAccess={private})",
            "set vpc_config.endpoint_private_access: true so nodes reach the API inside the VPC",
        )
    if public is False:
        return
    if public is None:
        public = True  # EKS default
    if public is UNKNOWN:
        yield violation("endpointPublicAccess is unknown at preview", "set it as a literal")
        return
    ranges = vpc.get("publicAccessCidrs") if isinstance(vpc, dict) else None
    ranges = as_list(ranges) if ranges is not UNKNOWN else [UNKNOWN]
    if not ranges:
        yield violation(
            "the public endpoint admits 0.0.0.0/0 (no public_access_cidrs: EKS's default)",
            "set endpoint_public_access: false, or list your VPN/office CIDRs in public_access_cidrs",
        )
        return
    world = [str(c) for c in ranges if c is UNKNOWN or cidrs.is_world(str(c))]
    if world:
        yield violation(f"the public endpoint admits {world}", "list only your VPN/office CIDRs")
    elif problem := cidrs.endpoint_span_problem(
        [str(c) for c in ranges], int(ctx.config["maxPublicAddresses"])
    ):
        fix = "narrow public_access_cidrs to your VPN/office egress ranges, or make the endpoint private"
        yield violation(problem, fix)


@resource_rule(
    "eks-control-plane-logs",
    description="Every EKS control-plane log type (api, audit, authenticator, controllerManager, scheduler) "
    "goes to CloudWatch.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html",
    types=(CLUSTER,),
    unknowns="An unknown list is a violation (it is a literal).",
)
def eks_control_plane_logs(r: Res, ctx: Ctx) -> Iterator[Violation]:
    enabled = r.get("enabledClusterLogTypes")
    have = set() if enabled is UNKNOWN else set(as_list(enabled))
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in have]
    if missing:
        yield violation(
            f"control-plane log types {missing} are not enabled",
            f"set enabled_cluster_log_types to {list(CONTROL_PLANE_LOG_TYPES)}",
        )


@resource_rule(
    "eks-supported-version",
    description="Clusters run a Kubernetes version pinned in the stack and still in EKS standard support "
    "(extended support costs extra per cluster-hour).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html",
    types=(CLUSTER,),
    unknowns="An unknown version is a violation (it is a literal).",
    config={
        "asOf": {
            "type": "string",
            "default": "",
            "description": "Judge support dates as of this day (YYYY-MM-DD); empty: today.",
        }
    },
)
def eks_supported_version(r: Res, ctx: Ctx) -> Iterator[Violation]:
    version = r.get("version")
    newest = max(CALENDAR, key=lambda v: tuple(int(p) for p in v.split(".")))
    if version is None or version is UNKNOWN:
        yield violation(f"the Kubernetes version is not pinned ({version})", f"set version, e.g. '{newest}'")
    elif version not in CALENDAR:
        yield violation(
            f"Kubernetes {version} is not in the EKS version calendar this pack knows ({sorted(CALENDAR)})",
            f"use a listed version, or record {version} with `{CALENDAR_REFRESH.format(minor=version)}`",
        )
    elif not in_standard_support(version, ctx.today):
        end = CALENDAR[version].standard_until
        yield violation(
            f"Kubernetes {version} left EKS standard support on {end} (judged as of {ctx.today})",
            f"upgrade to a version in standard support, e.g. {newest}",
        )


@resource_rule(
    "eks-upgrade-policy",
    description="Clusters set their upgrade policy explicitly: STANDARD (auto-upgrade at the end of standard "
    "support) unless extended support is allowed; without one EKS enrols the cluster in paid extended "
    "support.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html",
    types=(CLUSTER,),
    unknowns="An unknown support type is a violation (it is a literal).",
    config={
        "allowExtendedSupport": {
            "type": "boolean",
            "default": False,
            "description": "Accept upgrade_policy.support_type EXTENDED.",
        }
    },
)
def eks_upgrade_policy(r: Res, ctx: Ctx) -> Iterator[Violation]:
    support = r.get("upgradePolicy", "supportType")
    allowed = [SUPPORT_STANDARD] + ([SUPPORT_EXTENDED] if ctx.config["allowExtendedSupport"] else [])
    if support not in allowed:
        shown = "unset (EKS default: EXTENDED)" if support is None else support
        yield violation(
            f"upgrade policy support type is {shown}",
            f"set upgrade_policy.support_type to {' or '.join(allowed)}",
        )
