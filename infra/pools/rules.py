"""Rules on node pools, checked against the AWS facts of their instance types and the region's zones.

One rule per constraint; each keeps the message it had as part of the old single pool check. A pool whose
type is not offered in the region gets only the ``instance-type-offered`` finding: the others need the
type's facts.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

from infra.core import instance_types
from infra.core.config import Role
from infra.core.facts import InstanceFacts
from infra.core.labels import PUBLISHER_NODE_LABEL, PUBLISHER_TAINT
from infra.network.zones import pool_zones, vpc_zones
from infra.pools import ami_drivers
from infra.pools.config import CapacityType, NodePoolConfig, Placement, TaintEffect
from infra.stack.registry import PLAN_AND_PREFLIGHT, Finding, Need, RuleContext, at, error, rule

CAPACITY_BLOCKS_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"


def _offered_pools(ctx: RuleContext) -> Iterator[tuple[str, NodePoolConfig, InstanceFacts]]:
    """(name, config, facts) of every pool whose type the region offers."""
    assert ctx.facts is not None
    for name, pool in ctx.cfg.node_pools.items():
        itype = ctx.facts.instances.get(pool.instance_type)
        if itype is not None and ctx.facts.azs_offering(pool.instance_type):
            yield name, pool, itype


def gpu_alternatives(pool: NodePoolConfig, offered: Sequence[InstanceFacts]) -> tuple[list[str], str]:
    """The offered GPU types to suggest for a GPU pool whose type is not offered, best first, and what they
    were chosen for: only types with EFA when the pool has ``efa: true``; then the pool's GPU count
    (``gpus_per_node``, else the named type's in the instance-type table), the named type's category (p, g),
    more EFA interfaces for an EFA pool, and the closest name."""
    wanted = pool.gpus_per_node or instance_types.gpus(pool.instance_type)
    category = instance_types.instance_category(pool.instance_type)
    fitting = [f for f in offered if f.has_gpus and (f.efa_supported or not pool.efa)]

    def rank(f: InstanceFacts) -> tuple[bool, bool, int, float]:
        similar = difflib.SequenceMatcher(None, pool.instance_type, f.instance_type).ratio()
        return (
            f.gpu_count == wanted,
            instance_types.instance_category(f.instance_type) == category,
            f.efa_interface_limit if pool.efa else 0,
            similar,
        )

    best = sorted(fitting, key=lambda f: (rank(f), f.instance_type), reverse=True)
    if wanted and any(f.gpu_count == wanted for f in best):
        best = [f for f in best if f.gpu_count == wanted]
    what = "GPU type" + (" with EFA" if pool.efa else "")
    if wanted and best and best[0].gpu_count == wanted:
        what += f" and {wanted} GPUs"
    return [f.instance_type for f in best[:3]], what


@rule("instance-type-offered", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def instance_type_offered(ctx: RuleContext) -> Iterator[Finding]:
    """Every pool's instance type is offered in the stack's region; a GPU pool is offered GPU types that
    keep its ``efa`` and GPU count."""
    assert ctx.facts is not None
    for name, pool in ctx.cfg.node_pools.items():
        if ctx.facts.azs_offering(pool.instance_type):
            continue
        if pool.gpu:
            # The region's GPU types (their facts, fetched for this message) that keep what the pool needs.
            close, kind = gpu_alternatives(pool, list(ctx.facts.suggestions.values()))
            fix = (
                f"use a {kind} offered there, e.g. {', '.join(close)}"
                if close
                else f"no {kind} is offered in {ctx.cfg.region}: use another region"
                + (", or set efa: false" if pool.efa else "")
            )
        else:
            # a CPU pool: the region's types that are not known to have GPUs
            pool_of = ctx.facts.region_types - set(ctx.facts.suggestions)
            close = difflib.get_close_matches(pool.instance_type, sorted(pool_of), n=3, cutoff=0.5)
            listed = ", ".join(sorted(pool_of)[:8]) + (", ..." if len(pool_of) > 8 else "")
            some = f" ({listed})" if pool_of else ""
            fix = (
                f"use a type offered there, e.g. {', '.join(close)}"
                if close
                else f"pick a type offered in the region{some}"
            )
        yield error(
            at("node_pools", name, "instance_type"),
            f"{pool.instance_type!r} is not offered in {ctx.cfg.region}",
            fix,
            "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-discovery.html",
        )


@rule("gpu-flag-matches-type", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def gpu_flag_matches_type(ctx: RuleContext) -> Iterator[Finding]:
    """``gpu: true`` pools use GPU types and ``gpu: false`` pools do not."""
    for name, pool, itype in _offered_pools(ctx):
        if pool.gpu and not itype.has_gpus:
            yield error(
                at("node_pools", name, "gpu"),
                f"true but {pool.instance_type} has no GPUs",
                "use a GPU instance type (g5, g6, p4d, p5, ...) or set gpu: false",
            )
        if not pool.gpu and itype.has_gpus:
            yield error(
                at("node_pools", name, "gpu"),
                f"false but {pool.instance_type} has {itype.gpu_count} GPUs",
                "set gpu: true or use a CPU instance type for a system pool",
            )


@rule("gpus-per-node-matches", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def gpus_per_node_matches(ctx: RuleContext) -> Iterator[Finding]:
    """``gpus_per_node``, when set, equals the GPU count AWS reports for the type."""
    for name, pool, itype in _offered_pools(ctx):
        if pool.gpus_per_node is not None and pool.gpus_per_node != itype.gpu_count:
            yield error(
                at("node_pools", name, "gpus_per_node"),
                f"{pool.gpus_per_node} but {pool.instance_type} has {itype.gpu_count} GPUs",
                f"set gpus_per_node: {itype.gpu_count} or pick a type with {pool.gpus_per_node} GPUs",
            )


def _offering_zones_fix(region: str, offering: Sequence[str], vpc: Sequence[str]) -> str:
    """The fix naming the region's zones that offer a type, those in the VPC first; the others need adding
    to ``network.availability_zones`` too (the offering data knows every zone of the region)."""
    inside = [a for a in offering if a in vpc]
    outside = [a for a in offering if a not in vpc]
    if inside:
        fix = f"use a zone that offers it: {', '.join(inside)}"
        if outside:
            fix += f" (or {', '.join(outside)}, after adding it to network.availability_zones)"
        return fix
    if outside:
        return (
            f"use a zone that offers it: {', '.join(outside)} (none in this VPC: add it to "
            "network.availability_zones too)"
        )
    return f"no zone of {region} offers it: pick another instance type or region"


@rule("pool-zones-usable", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def pool_zones_usable(ctx: RuleContext) -> Iterator[Finding]:
    """A pool's zones are VPC zones that offer its type; without zones, some VPC zone offers it."""
    assert ctx.facts is not None
    vpc = vpc_zones(ctx.cfg, ctx.facts)
    for name, pool, _ in _offered_pools(ctx):
        t = pool.instance_type
        offering = ctx.facts.azs_offering(t)
        for az in pool.availability_zones:
            if az not in vpc:
                yield error(
                    at("node_pools", name, "availability_zones"),
                    f"{az!r} is not one of the VPC's zones {list(vpc)}",
                    "add it to network.availability_zones or pick one of those",
                )
            elif az not in offering:
                yield error(
                    at("node_pools", name, "availability_zones"),
                    f"{t} is not offered in {ctx.facts.zone_label(az)}",
                    _offering_zones_fix(ctx.facts.region, offering, vpc),
                )
        if not pool.availability_zones and not any(az in offering for az in vpc):
            yield error(
                at("node_pools", name, "instance_type"),
                f"{t} is not offered in any of the VPC's zones {list(vpc)}",
                f"add a zone that offers it ({', '.join(offering)}) to network.availability_zones",
            )


@rule("efa-supported", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def efa_supported(ctx: RuleContext) -> Iterator[Finding]:
    """EFA pools use a type with EFA, and no more EFA interfaces than it takes."""
    for name, pool, itype in _offered_pools(ctx):
        if not pool.efa:
            continue
        limit = itype.efa_interface_limit
        if limit == 0:
            yield error(
                at("node_pools", name, "efa"),
                f"true but {pool.instance_type} does not support EFA",
                "use an EFA type (p4d.24xlarge, p5.48xlarge, p5en.48xlarge, g6e.48xlarge, ...) "
                "or set efa: false",
                "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types",
            )
        elif pool.efa_interfaces is not None and pool.efa_interfaces > limit:
            yield error(
                at("node_pools", name, "efa_interfaces"),
                f"{pool.efa_interfaces} but {pool.instance_type} supports at most {limit} EFA interfaces",
                f"set efa_interfaces to at most {limit}, or leave it out to attach all {limit}",
            )


# Why EFA pools and cluster placement groups need one zone (the policy pack's training-pool rules share
# this message with the plan-time rule below).
SINGLE_ZONE_DOC = (
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster"
)


def zone_spread(reason: str, zones: Sequence[str], example: str) -> tuple[str, str]:
    """The problem and the fix when a pool that needs one zone (``reason``: EFA, a cluster placement group)
    spans ``zones``; ``example`` is named in the fix when no zone is known."""
    return (
        f"the pool uses {reason} but spans {len(zones)} zones/subnets {list(zones)}",
        f"name exactly one zone, e.g. availability_zones: [{zones[0] if zones else example}]",
    )


@rule("single-zone-pool", needs=[Need.facts])
def single_zone_pool(ctx: RuleContext) -> Iterator[Finding]:
    """EFA pools and pools in a cluster placement group name exactly one zone."""
    assert ctx.facts is not None
    for name, pool, _ in _offered_pools(ctx):
        reason = "EFA" if pool.efa else "a cluster placement group" if pool.placement_group_wanted else None
        if reason and len(pool.availability_zones) != 1:
            spread = list(pool.availability_zones) or list(pool_zones(ctx.cfg, ctx.facts, name))
            problem, fix = zone_spread(reason, spread, f"a zone offering {pool.instance_type}")
            yield error(at("node_pools", name, "availability_zones"), problem, fix, SINGLE_ZONE_DOC)


@rule("placement-strategy-supported", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def placement_strategy_supported(ctx: RuleContext) -> Iterator[Finding]:
    """A pool in a cluster placement group uses a type that supports the cluster strategy."""
    for name, pool, itype in _offered_pools(ctx):
        if pool.placement_group_wanted and "cluster" not in itype.supported_placement_strategies:
            yield error(
                at("node_pools", name, "placement"),
                f"{pool.instance_type} does not support cluster placement groups",
                "set placement: none",
            )


@rule("reservation-zone-matches", needs=[Need.facts])
def reservation_zone_matches(ctx: RuleContext) -> Iterator[Finding]:
    """A capacity reservation serves one zone: the pool's zones must be that zone."""
    for name, pool, _ in _offered_pools(ctx):
        reservation = pool.capacity_reservation
        if reservation is None or not pool.availability_zones:
            continue
        if reservation.availability_zone not in pool.availability_zones:
            what = (
                "the pool's placement group and nodes are" if pool.placement_group_wanted else "the pool runs"
            )
            yield error(
                at("node_pools", name, "capacity_reservation", "availability_zone"),
                f"reservation {reservation.id} is in {reservation.availability_zone} but {what} in "
                f"{list(pool.availability_zones)}",
                f"set availability_zones: [{reservation.availability_zone}] (a reservation serves one zone)",
            )


@rule("reservation-placement-group", needs=[Need.facts])
def reservation_placement_group(ctx: RuleContext) -> Iterator[Finding]:
    """``placement: cluster`` with a reservation names the reservation's placement group."""
    for name, pool, _ in _offered_pools(ctx):
        reservation = pool.capacity_reservation
        if (
            reservation is not None
            and pool.placement is Placement.cluster
            and not reservation.placement_group
        ):
            yield error(
                at("node_pools", name, "placement"),
                f"cluster with capacity reservation {reservation.id} "
                "but no capacity_reservation.placement_group",
                "name the cluster placement group the reservation was created in, or set placement: auto",
            )


@rule("reservation-one-zone", needs=[Need.facts])
def reservation_one_zone(ctx: RuleContext) -> Iterator[Finding]:
    """A pool on a capacity reservation or Capacity Block names exactly the reservation's zone."""
    for name, pool, _ in _offered_pools(ctx):
        reservation = pool.capacity_reservation
        if reservation is None or pool.availability_zones:
            continue  # with zones named, 'reservation-zone-matches' checks them
        yield error(
            at("node_pools", name, "availability_zones"),
            f"not set, so the pool's subnets span every VPC zone offering {pool.instance_type}, but "
            f"reservation {reservation.id} serves {reservation.availability_zone} only"
            + (
                " and EKS rejects a Capacity Block node group with subnets in other zones"
                if pool.capacity_type is CapacityType.capacity_block
                else ""
            ),
            f"set availability_zones: [{reservation.availability_zone}]",
            CAPACITY_BLOCKS_DOC
            if pool.capacity_type is CapacityType.capacity_block
            else "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html",
        )


# How a pool buys its instances -> the usage class the type must list in DescribeInstanceTypes.
_USAGE_CLASS = {CapacityType.spot: "spot", CapacityType.capacity_block: "capacity-block"}


@rule("usage-class-offered", needs=[Need.facts])
def usage_class_offered(ctx: RuleContext) -> Iterator[Finding]:
    """Spot pools use a type sold as Spot; Capacity Block pools a type sold in Capacity Blocks."""
    for name, pool, itype in _offered_pools(ctx):
        wanted = _USAGE_CLASS.get(pool.capacity_type)
        if wanted is None or not itype.usage_classes or wanted in itype.usage_classes:
            continue
        yield error(
            at("node_pools", name, "capacity_type"),
            f"{pool.capacity_type.value} but {pool.instance_type} is sold only as "
            f"{', '.join(itype.usage_classes)} (DescribeInstanceTypes SupportedUsageClasses)",
            "use on_demand or capacity_reservation, or a type that supports "
            + ("Capacity Blocks (p4d, p5, p5en, trn1, ...)" if wanted == "capacity-block" else "Spot"),
            CAPACITY_BLOCKS_DOC
            if wanted == "capacity-block"
            else "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html#managed-node-group-capacity-types",
        )


@rule("system-pool")
def system_pool(ctx: RuleContext) -> Iterator[Finding]:
    """Some pool runs system pods (CoreDNS, EBS CSI controller) from the start: gpu false, no hard taints."""
    pools = ctx.cfg.node_pools
    if any(p.runs_system_pods and p.desired_size >= 1 for p in pools.values()):
        return
    candidates = [n for n, p in pools.items() if p.runs_system_pods]
    yield error(
        at("node_pools"),
        "no pool runs system pods at creation"
        + (f" ({', '.join(candidates)} start with desired_size 0)" if candidates else "")
        + ": CoreDNS and the EBS CSI controller do not tolerate the GPU taint, so their EKS add-ons "
        "would never become active",
        "add a pool with gpu: false, no NoSchedule/NoExecute taints and desired_size >= 1 "
        "(e.g. system: {instance_type: m6i.xlarge, gpu: false, min_size: 2, desired_size: 2, max_size: 3})",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html",
    )


def is_publisher_pool(pool: NodePoolConfig) -> bool:
    """Whether ``pool`` is the release publisher's: a CPU pool with the publisher's label and its NoSchedule
    taint (``infra/core/labels.py``), the taint only the publisher's pods may tolerate."""
    key, value, effect = PUBLISHER_TAINT
    taint = pool.taints.get(key)
    label_key, label_value = PUBLISHER_NODE_LABEL
    return (
        not pool.gpu
        and taint is not None
        and taint.value == value
        and taint.effect is TaintEffect(effect)
        and pool.labels.get(label_key) == label_value
    )


@rule("publisher-pool")
def publisher_pool(ctx: RuleContext) -> Iterator[Finding]:
    """A train stack runs the release publisher (the one identity that may kms:Sign) on nodes of its own: one
    CPU pool with the publisher's label and taint and at least one node (the admission policy
    aiplat-publisher-nodes pins the publisher's pods there and keeps every other pod off)."""
    if ctx.cfg.role is not Role.train:
        return
    key, value, effect = PUBLISHER_TAINT
    label_key, label_value = PUBLISHER_NODE_LABEL
    pools = [n for n, p in ctx.cfg.node_pools.items() if is_publisher_pool(p)]
    example = (
        f"publisher: {{instance_type: m6i.xlarge, gpu: false, root_volume_gib: 200, min_size: 1, "
        f'desired_size: 1, max_size: 1, labels: {{{label_key}: "{label_value}"}}, '
        f'taints: {{{key}: {{value: "{value}", effect: {effect}}}}}}}'
    )
    if not pools:
        yield error(
            at("node_pools"),
            "no pool for the release publisher: its pods (which may kms:Sign releases) would share nodes "
            f"with other pods, and admission requires them on nodes labelled {label_key}={label_value}",
            f"add a CPU pool with that label and the taint {key}={value}:{effect}, e.g. {example}",
        )
    elif len(pools) > 1:
        yield error(
            at("node_pools"),
            f"pools {pools} all carry the publisher's label and taint",
            "keep one publisher pool",
        )
    elif ctx.cfg.node_pools[pools[0]].desired_size < 1:
        yield error(
            at("node_pools", pools[0], "desired_size"),
            "0: no cluster autoscaler grows a managed node group, so the publisher's Jobs would never "
            "schedule",
            "set min_size and desired_size to 1",
        )


# EKS service quotas (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html): "Nodes per
# managed node group: 450" and "Managed node groups per cluster: 30", both per Region and adjustable. A
# larger max_size makes CreateNodegroup/UpdateNodegroupConfig fail, so the plan refuses it at the default.
SERVICE_QUOTAS_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html"
NODES_PER_MANAGED_NODE_GROUP = 450
MANAGED_NODE_GROUPS_PER_CLUSTER = 30


@rule("node-group-size-quota")
def node_group_size_quota(ctx: RuleContext) -> Iterator[Finding]:
    """Each pool's sizes, and the number of pools, fit EKS's managed node group quotas."""
    for name, pool in ctx.cfg.node_pools.items():
        for size in ("max_size", "desired_size", "min_size"):
            value = getattr(pool, size)
            if value > NODES_PER_MANAGED_NODE_GROUP:
                yield error(
                    at("node_pools", name, size),
                    f"{value} is more than EKS's quota 'Nodes per managed node group' "
                    f"({NODES_PER_MANAGED_NODE_GROUP})",
                    f"set {size} to at most {NODES_PER_MANAGED_NODE_GROUP}, or split the pool into several",
                    SERVICE_QUOTAS_DOC,
                )
                break  # min <= desired <= max: the largest one says it
    count = len(ctx.cfg.node_pools)
    if count > MANAGED_NODE_GROUPS_PER_CLUSTER:
        yield error(
            at("node_pools"),
            f"{count} pools, more than EKS's quota 'Managed node groups per cluster' "
            f"({MANAGED_NODE_GROUPS_PER_CLUSTER})",
            f"merge pools to at most {MANAGED_NODE_GROUPS_PER_CLUSTER}",
            SERVICE_QUOTAS_DOC,
        )


def _pool_driver(ctx: RuleContext, pool: str) -> tuple[str, str, str | None, tuple[str, ...]]:
    """(what the pool is, its AMI release, its NVIDIA driver or None when not recorded, the field naming the
    AMI) for a managed GPU node group or a Karpenter NodePool."""
    k = ctx.cfg.cluster_services.karpenter
    if k is not None and pool in k.node_pools:
        release = ami_drivers.release_of(k.ami_alias)
        return (
            f"Karpenter NodePool {pool!r}",
            release,
            ami_drivers.driver_of(release),
            ("cluster_services", "karpenter", "ami_alias"),
        )
    release = ami_drivers.NEWEST_RECORDED
    return (
        f"node group {pool!r} (EKS gives it the newest AMI release when it is created)",
        release,
        ami_drivers.driver_of(release),
        ("node_pools", pool),
    )


def _images_on_pools(ctx: RuleContext) -> Iterator[tuple[str, str, str, tuple[str, ...]]]:
    """(pool, image, its CUDA, the field naming the image) for every GPU pool the stack runs an image of
    known CUDA on: the training runtime's image on its pool, vLLM on the inference pools."""
    cfg = ctx.cfg
    t = cfg.training
    if t is not None:
        build = cfg.images.builds.get(t.runtime.image)
        cuda = ami_drivers.DOCKERFILE_CUDA.get(build.dockerfile) if build and not build.prebuilt else None
        if build is not None and cuda is not None:
            yield (
                t.runtime.pool,
                f"the training image {t.runtime.image!r} ({build.dockerfile})",
                cuda,
                (
                    "training",
                    "runtime",
                    "image",
                ),
            )
    inf = cfg.inference
    if inf is not None:
        version = inf.engine.vllm_version
        cuda = ami_drivers.VLLM_CUDA.get(version)
        for pool in dict.fromkeys(p for m in inf.models.values() for p in m.node_pools):
            if cuda is not None:
                yield pool, f"vLLM {version}", cuda, ("inference", "engine", "vllm_version")


@rule("gpu-driver-runs-image-cuda")
def gpu_driver_runs_image_cuda(ctx: RuleContext) -> Iterator[Finding]:
    """The NVIDIA driver of a GPU pool's AMI is new enough for the CUDA its image is built on: a CUDA 13 image
    needs a driver >= 580.65.06 (NVIDIA's table, infra/pools/ami_drivers.py); an older one fails the first
    CUDA call after everything deployed."""
    for pool, image, cuda, image_field in _images_on_pools(ctx):
        what, release, driver, ami_field = _pool_driver(ctx, pool)
        needed = ami_drivers.CUDA_MIN_DRIVER[cuda]
        if driver is None:
            yield error(
                at(*ami_field),
                f"{what} runs AMI release {release}, whose NVIDIA driver is not recorded, so the plan cannot "
                f"tell whether it runs {image} (CUDA {cuda}, driver >= {needed})",
                f"pin a release whose driver is recorded (newest: al2023@{ami_drivers.NEWEST_RECORDED}), or "
                f"record {release}'s driver from its release notes in infra/pools/ami_drivers.py",
                ami_drivers.CHANGELOG,
            )
        elif not ami_drivers.driver_runs(driver, cuda):
            yield error(
                at(*ami_field),
                f"{what} runs AMI release {release} with NVIDIA driver {driver}, older than the "
                f"{needed} that {image} needs (CUDA {cuda}, set by {'.'.join(image_field)})",
                f"use an AMI release with a driver >= {needed} (al2023@{ami_drivers.NEWEST_RECORDED} has "
                f"{ami_drivers.driver_of(ami_drivers.NEWEST_RECORDED)})",
                ami_drivers.CHANGELOG,
            )
