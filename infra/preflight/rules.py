"""Preflight rules: what the live account says before ``pulumi up`` (``aiplat preflight``).

Each rule reads ``ctx.live`` (``LiveFacts``, read with boto3 by ``infra/io/aws_live.py``) and, where it
needs instance types and zones, ``ctx.facts`` read from the same account. Questions the plan already asks
(is the type offered in the pool's zones, EFA support and interface counts) are the plan rules, registered
for the preflight phase too (``infra/pools/rules.py``). A check that passes yields an ``info`` finding that
says what it saw; a check that could not run (a call AWS refused, a fact not read) yields ``skipped`` with
the reason and, for a denied call, the permission to add: never a silent pass.
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.core.errors import CREDENTIALS_DOC, CREDENTIALS_FIX
from infra.core.facts import (
    BackendFacts,
    CallerIdentity,
    ClusterEndpointFacts,
    ReservationFacts,
    SecretsProviderFacts,
    Unreadable,
)
from infra.keys.rules import account_findings
from infra.pools.config import CapacityType
from infra.preflight.quotas import vcpu_demand
from infra.stack.registry import (
    Finding,
    Level,
    Need,
    Phase,
    RuleContext,
    at,
    error,
    info,
    rule,
    skipped,
    warning,
)

PREFLIGHT = [Phase.preflight]

REGIONS_DOC = "https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html"
QUOTAS_DOC = "https://docs.aws.amazon.com/servicequotas/latest/userguide/request-quota-increase.html"
RESERVATIONS_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-using.html"
ADDONS_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/eks-add-ons.html"
ENDPOINT_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html"
BACKEND_DOC = "https://www.pulumi.com/docs/iac/concepts/state-and-backends/"
SECRETS_DOC = "https://www.pulumi.com/docs/iac/concepts/secrets/"


def _not_checked(field: str, what: str, failure: Unreadable, permission: str) -> Finding:
    """A check that did not run because its call failed (a partial policy denies it, most often)."""
    return skipped(field, f"{what} not checked: {failure}", f"allow {permission} for these credentials")


@rule("account-matches", phases=PREFLIGHT, needs=[Need.credentials])
def account_matches(ctx: RuleContext) -> Iterator[Finding]:
    """The credentials are of the stack's account (security.account.id): pulumi up would refuse others."""
    assert ctx.live is not None
    who, want = ctx.live.identity, ctx.cfg.security.account.id
    field = at("security", "account", "id")
    if not isinstance(who, CallerIdentity):
        yield skipped(field, "the caller's account was not read (credentials-work)")
    elif want is None:
        yield skipped(field, f"not set: nothing to compare the caller's account {who.account} with")
    else:
        wrong = account_findings(ctx.cfg, who.account)
        yield from wrong or [info(field, f"account {who.account} is the stack's")]


@rule("credentials-work", phases=PREFLIGHT, needs=[Need.account])
def credentials_work(ctx: RuleContext) -> Iterator[Finding]:
    """The AWS credentials answer sts:GetCallerIdentity (which account, which principal)."""
    assert ctx.live is not None
    who = ctx.live.identity
    if isinstance(who, CallerIdentity):
        yield info("credentials", f"account {who.account} as {who.arn}")
    else:
        # the words every command uses for unusable credentials (infra/io/aws_credentials.py)
        yield error("credentials", f"AWS credentials: {who.error}", CREDENTIALS_FIX, CREDENTIALS_DOC)


@rule("region-enabled", phases=PREFLIGHT, needs=[Need.credentials])
def region_enabled(ctx: RuleContext) -> Iterator[Finding]:
    """The stack's region is enabled for the account (opt-in regions such as ap-east-1 are not by default)."""
    assert ctx.live is not None
    status, region = ctx.live.region_opt_status, ctx.cfg.region
    if status is None:
        yield skipped(at("region"), f"the opt-in status of {region} was not read")
        return
    if isinstance(status, Unreadable):
        yield _not_checked(at("region"), f"opt-in status of {region}", status, "account:GetRegionOptStatus")
    elif status in ("ENABLED", "ENABLED_BY_DEFAULT"):
        yield info(at("region"), f"{region} is {status}")
    elif status == "ENABLING":
        yield error(
            at("region"),
            f"{region} is still being enabled (ENABLING)",
            f"wait until `aws account get-region-opt-status --region-name {region}` says ENABLED",
            REGIONS_DOC,
        )
    else:
        yield error(
            at("region"),
            f"{region} is {status} for this account (an opt-in region)",
            f"aws account enable-region --region-name {region}, then wait until it is ENABLED",
            REGIONS_DOC,
        )


@rule("regional-sts-works", phases=PREFLIGHT, needs=[Need.credentials])
def regional_sts_works(ctx: RuleContext) -> Iterator[Finding]:
    """The credentials work against the STS endpoint of the stack's region."""
    assert ctx.live is not None
    who, region = ctx.live.regional_identity, ctx.cfg.region
    if who is None:
        yield skipped(
            at("region"), f"sts.{region} not asked: {region} is not enabled for this account (region-enabled)"
        )
        return
    if isinstance(who, CallerIdentity):
        yield info(at("region"), f"sts.{region} answers for account {who.account}")
    else:
        yield error(
            at("region"),
            f"the STS endpoint of {region} refused the credentials ({who})",
            "for an opt-in region: enable it and wait until it is ENABLED; session tokens from the global "
            "STS endpoint work there only if IAM account settings issue tokens valid in all Regions; "
            "otherwise check that no SCP or policy denies the region",
            REGIONS_DOC,
        )


def _common_prefix(paths: list[list[str]]) -> list[str]:
    """The parts every path starts with (``node_pools`` for two managed pools)."""
    prefix: list[str] = []
    for parts in zip(*paths, strict=False):
        if len(set(parts)) != 1:
            break
        prefix.append(parts[0])
    return prefix


@rule("vcpu-quotas", phases=PREFLIGHT, needs=[Need.live_region, Need.facts])
def vcpu_quotas(ctx: RuleContext) -> Iterator[Finding]:
    """The On-Demand and Spot vCPU quotas of each family group cover every pool at max_size and every
    Karpenter GPU pool at its gpu_limit."""
    assert ctx.live is not None and ctx.facts is not None
    demands, unmapped = vcpu_demand(ctx.cfg, ctx.facts)
    region = ctx.cfg.region
    for d in demands:
        field = at(*_common_prefix([f.split(".") for f in d.fields]))
        limits = " / ".join(dict.fromkeys(f.rsplit(".", 1)[1] for f in d.fields))
        have = ctx.live.quotas.get(d.quota.code)
        what = f"{d.quota.name} ({d.quota.code})"
        if have is None:
            continue
        if isinstance(have, Unreadable):
            yield _not_checked(field, f"quota {what}", have, "servicequotas:GetServiceQuota")
        elif have < d.vcpus:
            fix = (
                f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
                f"{d.quota.code} --desired-value {d.vcpus} --region {region}, or lower {limits}"
            )
            problem = f"{what} is {have:g} vCPUs but the pools need {d.vcpus}: {'; '.join(d.sources)}"
            if d.capacity_block_only:
                yield warning(
                    field, problem + " (if Capacity Block instances count against it)", fix, QUOTAS_DOC
                )
            else:
                yield error(field, problem, fix, QUOTAS_DOC)
        else:
            yield info(field, f"{what}: {d.vcpus} of {have:g} vCPUs at {limits}")
    for u in unmapped:
        yield warning(
            at(u.field),
            f"no vCPU quota of {u.instance_type}'s family is known to preflight",
            "check its quota in the Service Quotas console (service ec2)",
            QUOTAS_DOC,
        )


def _reservation_problems(ctx: RuleContext, pool_name: str, r: ReservationFacts) -> Iterator[Finding]:
    assert ctx.facts is not None
    pool = ctx.cfg.node_pools[pool_name]
    cr = pool.capacity_reservation
    assert cr is not None
    where = at("node_pools", pool_name, "capacity_reservation")
    want_type = "capacity-block" if pool.capacity_type is CapacityType.capacity_block else "default"
    kind = {"capacity-block": "a Capacity Block", "default": "an On-Demand Capacity Reservation"}
    if r.reservation_type != want_type:
        yield error(
            at("node_pools", pool_name, "capacity_type"),
            f"{pool.capacity_type.value} but {r.id} is {kind.get(r.reservation_type, r.reservation_type)}",
            "set capacity_type to capacity_block for a Capacity Block, capacity_reservation for an ODCR",
            RESERVATIONS_DOC,
        )
    if r.state == "active":
        pass
    elif r.state == "scheduled":
        yield warning(
            where,
            f"{r.id} is scheduled (starts {r.start_date or 'later'}); nodes cannot launch before then",
            "keep min_size and desired_size at 0 until the reservation is active",
            RESERVATIONS_DOC,
        )
    elif r.state in ("pending", "assessing", "delayed", "payment-pending"):
        yield warning(where, f"{r.id} is {r.state}", "wait until it is active", RESERVATIONS_DOC)
    else:
        yield error(
            where,
            f"{r.id} is {r.state}; nothing can launch into it",
            "buy or create a new reservation and put its id here",
            RESERVATIONS_DOC,
        )
    if r.instance_type != pool.instance_type:
        yield error(
            at("node_pools", pool_name, "instance_type"),
            f"{pool.instance_type} but reservation {r.id} is for {r.instance_type}",
            f"set instance_type: {r.instance_type}, or use a reservation for {pool.instance_type}",
        )
    by_id = {z.zone_id: z.name for z in ctx.facts.zones}
    here = by_id.get(r.availability_zone_id, r.availability_zone)
    pool_ids = {ctx.facts.zone_id(az) for az in (pool.availability_zones or [cr.availability_zone])}
    if r.availability_zone_id not in pool_ids or cr.availability_zone != here:
        yield error(
            at("node_pools", pool_name, "capacity_reservation", "availability_zone"),
            f"{r.id} is in {here} ({r.availability_zone_id}) in this account, but the pool is configured for "
            f"{cr.availability_zone} / zones {list(pool.availability_zones)}",
            f"set capacity_reservation.availability_zone and availability_zones to [{here}]",
            RESERVATIONS_DOC,
        )
    if not r.platform.startswith("Linux/UNIX"):
        yield error(
            where, f"{r.id} is for {r.platform}; EKS nodes are Linux/UNIX", "use a Linux/UNIX reservation"
        )
    if cr.placement_group and not (r.placement_group_arn or "").endswith(f"/{cr.placement_group}"):
        yield error(
            at("node_pools", pool_name, "capacity_reservation", "placement_group"),
            f"{cr.placement_group!r} but {r.id} is in {r.placement_group_arn or 'no placement group'}",
            "name the placement group the reservation was created in, or remove placement_group",
            RESERVATIONS_DOC,
        )
    if r.total_instances < pool.max_size:
        yield warning(
            at("node_pools", pool_name, "max_size"),
            f"{pool.max_size} but {r.id} holds {r.total_instances} instances; "
            "nodes beyond it cannot launch into the reservation",
            f"set max_size to at most {r.total_instances}",
        )


@rule("capacity-reservations", phases=PREFLIGHT, needs=[Need.live_region, Need.facts])
def capacity_reservations(ctx: RuleContext) -> Iterator[Finding]:
    """Configured reservations exist, are active, match the pool's type, zone (by zone ID) and size."""
    assert ctx.live is not None
    if not any(pool.capacity_reservation for pool in ctx.cfg.node_pools.values()):
        yield skipped(at("node_pools"), "no pool names a capacity reservation (capacity_reservation)")
    for name, pool in sorted(ctx.cfg.node_pools.items()):
        cr = pool.capacity_reservation
        if cr is None:
            continue
        where = at("node_pools", name, "capacity_reservation", "id")
        found = ctx.live.reservations.get(cr.id)
        if isinstance(found, Unreadable):
            yield _not_checked(where, f"reservation {cr.id}", found, "ec2:DescribeCapacityReservations")
        elif found is None:
            yield error(
                where,
                f"{cr.id} does not exist in {ctx.cfg.region} for this account",
                "copy the id from `aws ec2 describe-capacity-reservations` in the stack's region",
                RESERVATIONS_DOC,
            )
        else:
            problems = list(_reservation_problems(ctx, name, found))
            yield from problems
            if not any(p.level is Level.error for p in problems):
                yield info(
                    where,
                    f"{cr.id}: {found.state} {found.reservation_type} for {found.total_instances} x "
                    f"{found.instance_type} in {found.availability_zone} ({found.availability_zone_id})",
                )


@rule("addon-versions-listed", phases=PREFLIGHT, needs=[Need.live_region])
def addon_versions_listed(ctx: RuleContext) -> Iterator[Finding]:
    """Every pinned add-on version is one EKS lists for the cluster's Kubernetes version."""
    assert ctx.live is not None
    k8s = ctx.cfg.cluster.kubernetes_version
    # the stack file's builds, else the defaults recorded for the minor (infra/cluster/data/addon_builds.json)
    pinned_versions = {a: v for a, v in ctx.cfg.cluster.addon_versions().items() if v}
    answers = [ctx.live.addon_versions.get(a) for a in pinned_versions]
    if answers and all(isinstance(a, Unreadable) for a in answers):
        first = answers[0]
        assert isinstance(first, Unreadable)
        yield _not_checked(at("cluster", "addons"), "add-on versions", first, "eks:DescribeAddonVersions")
        return
    for addon, pinned in sorted(pinned_versions.items()):
        field = at("cluster", "addons", addon.replace("-", "_"))
        listed = ctx.live.addon_versions.get(addon)
        if listed is None:
            continue
        if isinstance(listed, Unreadable):
            yield _not_checked(field, f"{addon} versions", listed, "eks:DescribeAddonVersions")
            continue
        versions = [v.version for v in listed]
        default = next((v.version for v in listed if v.default), None)
        if not versions:
            yield error(
                field,
                f"EKS lists no {addon} version for Kubernetes {k8s} in {ctx.cfg.region}",
                "check the add-on name and cluster.kubernetes_version",
                ADDONS_DOC,
            )
        elif pinned not in versions:
            suggestion = default or versions[0]
            yield error(
                field,
                f"{pinned} is not a {addon} version EKS lists for Kubernetes {k8s} "
                f"(listed: {', '.join(versions[:4])}{' ...' if len(versions) > 4 else ''})",
                f"set {field.rsplit('.', 1)[1]}: {suggestion}"
                + (" (EKS's default)" if suggestion == default else ""),
                ADDONS_DOC,
            )
        else:
            note = (
                " (EKS's default)"
                if pinned == default
                else f" (EKS's default is {default})"
                if default
                else ""
            )
            yield info(field, f"{addon} {pinned} is listed for Kubernetes {k8s}{note}")


@rule("autoscaling-service-linked-role", phases=PREFLIGHT, needs=[Need.credentials])
def autoscaling_service_linked_role(ctx: RuleContext) -> Iterator[Finding]:
    """AWSServiceRoleForAutoScaling exists before the EBS key policy names it."""
    assert ctx.live is not None
    exists = ctx.live.autoscaling_role
    field = "iam:AWSServiceRoleForAutoScaling"
    if exists is None:
        yield skipped(field, "the role was not read")
        return
    if isinstance(exists, Unreadable):
        yield _not_checked(field, "the Auto Scaling service-linked role", exists, "iam:GetRole")
    elif exists:
        yield info(field, "exists")
    else:
        # Not a failure: the EBS key grants the role through an aws:PrincipalArn condition, not as a
        # principal (infra/keys/documents/kms_policy.py), so KMS accepts the key policy before the role
        # exists; EKS
        # creates the role with the first node group (the deploying identity needs
        # iam:CreateServiceLinkedRole).
        # https://docs.aws.amazon.com/autoscaling/ec2/userguide/autoscaling-service-linked-role.html
        yield info(
            field,
            "does not exist in this account yet; EKS creates it with the first node group (the deploying "
            "identity needs iam:CreateServiceLinkedRole)",
        )


def _endpoint_fix(c: ClusterEndpointFacts) -> str:
    if not c.public_access:
        return (
            "the endpoint is private: run from inside the VPC (VPN, peering, or an SSM session on a "
            "node), or list your CIDR in cluster.endpoint_public_access_cidrs"
        )
    return (
        f"add this machine's public IP (as a /32) to cluster.endpoint_public_access_cidrs "
        f"(now {list(c.public_access_cidrs)}), or run from inside the VPC"
    )


@rule("cluster-endpoint-reachable", phases=PREFLIGHT, needs=[Need.live_region])
def cluster_endpoint_reachable(ctx: RuleContext) -> Iterator[Finding]:
    """Once the cluster exists, its API endpoint answers from here (pulumi up and the rollout need it)."""
    assert ctx.live is not None
    c = ctx.live.cluster
    field = at("cluster", "endpoint_public_access_cidrs")
    if c is None:
        yield skipped(
            field,
            f"cluster {ctx.cfg.names.cluster} does not exist yet: nothing to reach before the first up "
            "(aiplat rollout's health gate checks it after)",
        )
    elif isinstance(c, Unreadable):
        yield _not_checked(field, "the cluster endpoint", c, "eks:DescribeCluster")
    elif c.reachable:
        yield info(field, f"{c.endpoint} answers ({'public' if c.public_access else 'private'} endpoint)")
    else:
        yield error(
            field,
            f"cluster {c.name} ({c.status}): {c.endpoint} does not answer from here ({c.reach_error})",
            _endpoint_fix(c),
            ENDPOINT_DOC,
        )


# Project-wide checks: one state backend and one secrets provider for every stack (rollout.yaml). They are
# not per-stack rules, so they are plain functions the preflight runs once.


def backend_findings(b: BackendFacts) -> list[Finding]:
    """The state backend answers (one backend for all stacks: stack references cannot cross backends)."""
    field = "rollout.yaml: backend_url"
    if not b.checked:
        return [
            warning(field, f"{b.url}: {b.detail}", "check it with `pulumi login <url>` and `pulumi whoami`")
        ]
    if b.reachable:
        return [info(field, f"{b.url}: {b.detail or 'reachable'}")]
    return [
        error(
            field,
            f"{b.url} is not usable ({b.detail})",
            "create it (a versioned, encrypted S3 bucket) or point backend_url at the team's backend",
            BACKEND_DOC,
        )
    ]


def secrets_findings(s: SecretsProviderFacts) -> list[Finding]:
    """The secrets provider's key answers (KMS key enabled) or its passphrase is set."""
    field = "rollout.yaml: secrets_provider"
    if not s.checked:
        return [
            warning(
                field, f"{s.provider}: {s.detail}", "check it with `pulumi stack change-secrets-provider`"
            )
        ]
    if s.usable:
        return [info(field, f"{s.provider}: {s.detail or 'usable'}")]
    return [
        error(
            field,
            f"{s.provider} is not usable ({s.detail})",
            "create/enable the KMS key and alias it names, or set the passphrase variable",
            SECRETS_DOC,
        )
    ]
