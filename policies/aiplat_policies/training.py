"""Training pools: one zone, a cluster placement group or a capacity reservation, every EFA interface of
the type, and the self-referencing security group EFA needs.

A node group is a training pool when it attaches EFA (its launch template has EFA interfaces, or it carries
the EFA node label), or when a train stack gives it a multi-GPU EFA-capable type (at least
``minGpus`` GPUs): such a pool without EFA is the classic silent fallback to TCP. Stack rules: they follow
node group -> launch template -> subnets, placement group, security groups through property dependencies.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.core.instance_types import TABLE
from infra.pools.documents.efa import EFA, EFA_ONLY, layout_for
from infra.pools.documents.nodes import EFA_LABEL
from infra.pools.rules import SINGLE_ZONE_DOC, zone_spread
from infra.training.documents.runtime import IMAGE_DIGEST_ENV, NODE_NAME_ENV

from .aws import LAUNCH_TEMPLATE, NODE_GROUP, SECURITY_GROUP, SUBNET, linked
from .core import (
    HIGH,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    dig,
    number,
    resource_rule,
    stack_rule,
    truthy,
    violation,
)
from .network import ALL_PROTOCOLS, INGRESS_RULE, SG_RULE
from .nodes import node_group_types

PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"

MIN_GPUS = {
    "minGpus": {
        "type": "number",
        "default": 8,
        "description": "A train stack's GPU pool with at least this many GPUs per node on an EFA-capable "
        "type "
        "is a training pool even without EFA markers.",
    }
}


@dataclass
class Pool:
    """A training pool: its node group, launch template(s), instance type and whether it attaches EFA."""

    group: Res
    templates: list[Res]
    instance_type: Any
    efa: bool

    @property
    def reason(self) -> str:
        return "EFA" if self.efa else f"multi-node training on {self.instance_type}"


def templates_of(group: Res, stack: Stack) -> list[Res]:
    templates = stack.of_type(LAUNCH_TEMPLATE)
    found = linked(group, "launchTemplate", templates)
    if found:
        return found
    name = group.get("launchTemplate", "name")
    return [t for t in templates if isinstance(name, str) and t.get("name") == name]


def _efa_interfaces(template: Res) -> list[Any]:
    return [
        n
        for n in as_list(template.get("networkInterfaces"))
        if dig(n, "interfaceType") in (EFA, EFA_ONLY, UNKNOWN)
    ]


def training_pools(stack: Stack, ctx: Ctx) -> list[Pool]:
    pools = []
    for group in stack.of_type(NODE_GROUP):
        templates = templates_of(group, stack)
        types = node_group_types(group, templates)
        itype = types[0] if types else None
        labels = group.get("labels")
        efa = any(_efa_interfaces(t) for t in templates) or (
            isinstance(labels, dict) and labels.get(EFA_LABEL) == "true"
        )
        known = TABLE.get(itype) if isinstance(itype, str) else None
        big = (
            ctx.stack.role == "train"
            and known is not None
            and known.efa_interfaces > 0
            and known.gpus >= ctx.config["minGpus"]
        )
        if efa or big:
            pools.append(Pool(group, templates, itype, efa))
    return pools


@stack_rule(
    "training-pool-single-zone",
    description="Training pools run in exactly one availability zone (EFA traffic and cluster placement "
    "groups do not cross zones).",
    severity=HIGH,
    doc=SINGLE_ZONE_DOC,
    unknowns="Subnets are found by property dependency (their ids are unknown at preview); an unknown zone "
    "counts as another zone.",
    config=MIN_GPUS,
)
def training_pool_single_zone(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    subnets = stack.of_type(SUBNET)
    for pool in training_pools(stack, ctx):
        found = linked(pool.group, "subnetIds", subnets)
        if not found:
            yield violation(
                f"node group {pool.group.name!r}: its subnets are not declared in this stack, so their zones "
                "cannot be checked",
                "declare the pool's subnet in the stack (GpuVpc) and pass its id",
                pool.group.urn,
            )
            continue
        zones = sorted({str(s.get("availabilityZone") or s.get("availabilityZoneId")) for s in found})
        if len(zones) != 1:
            problem, fix = zone_spread(pool.reason, zones, "one zone")
            yield violation(f"node group {pool.group.name!r}: {problem}", fix, pool.group.urn)


@stack_rule(
    "training-pool-placement",
    description="Training pools launch into a cluster placement group declared in the stack, or into a "
    "capacity reservation (ODCR or Capacity Block) that fixes their placement.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster",
    unknowns="The placement group is found by property dependency or by its (literal) name; an unknown "
    "strategy is a violation; an unknown reservation id counts as a reservation.",
    config=MIN_GPUS,
)
def training_pool_placement(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    groups = stack.of_type(PLACEMENT_GROUP)
    for pool in training_pools(stack, ctx):
        reserved = any(
            t.get("capacityReservationSpecification", "capacityReservationTarget", key) is not None
            for t in pool.templates
            for key in ("capacityReservationId", "capacityReservationResourceGroupArn")
        )
        if reserved:
            continue
        placed = []
        for t in pool.templates:
            name = t.get("placement", "groupName")
            placed += linked(t, "placement", groups) or [
                g for g in groups if isinstance(name, str) and g.get("name") == name
            ]
        cluster = [g for g in placed if g.get("strategy") == "cluster"]
        if not cluster:
            what = (
                f"placement groups {[g.name for g in placed]} are not 'cluster'"
                if placed
                else "no placement group"
            )
            yield violation(
                f"node group {pool.group.name!r} ({pool.instance_type}): {what} and no capacity reservation",
                "put the launch template in an aws.ec2.PlacementGroup with strategy 'cluster' "
                "(placement: auto), "
                "or target a capacity reservation",
                pool.group.urn,
            )


@stack_rule(
    "training-pool-efa-interfaces",
    description="Training pools attach every EFA interface their instance type takes (32 on p5.48xlarge): "
    "card 0 device 0 'efa', each further card device 1 ('efa-only' on P5/P6).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    unknowns="An unknown interface type, card or device index does not match the expected layout "
    "(they are literals).",
    config=MIN_GPUS,
)
def training_pool_efa_interfaces(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    for pool in training_pools(stack, ctx):
        itype = pool.instance_type
        known = TABLE.get(itype) if isinstance(itype, str) else None
        if known is None or known.efa_interfaces == 0:
            yield violation(
                f"node group {pool.group.name!r}: {itype} is not a type with EFA that this pack knows",
                "use an EFA type listed in infra/core/instance_types.py (add a row for a new one)",
                pool.group.urn,
            )
            continue
        expected = {
            (i.network_card_index, i.device_index, i.interface_type)
            for i in layout_for(itype, known.efa_interfaces)
        }
        for t in pool.templates or [None]:
            interfaces = as_list(t.get("networkInterfaces")) if t is not None else []
            actual = {
                (_index(n, "networkCardIndex"), _index(n, "deviceIndex"), dig(n, "interfaceType"))
                for n in interfaces
            }
            if actual != expected:
                have = len([a for a in actual if a[2] in (EFA, EFA_ONLY)])
                missing = sorted(c for c, _, _ in expected - actual)
                yield violation(
                    f"node group {pool.group.name!r}: launch template attaches {have} EFA interfaces but "
                    f"{itype} takes {known.efa_interfaces} (cards missing or different: {missing[:8]}"
                    f"{' ...' if len(missing) > 8 else ''})",
                    "attach the full layout of infra/pools/documents/efa.py (set efa: true and leave "
                    "efa_interfaces unset)",
                    pool.group.urn,
                )


def _index(interface: Any, key: str) -> Any:
    """A launch template interface's card or device index as an int (0 when unset; unknown stays)."""
    value = number(dig(interface, key, default=0.0))
    return int(value) if isinstance(value, float) else value


def _targets(rule: Res, prop: str, sg: Res) -> bool:
    return sg in rule.depends_on(prop)


def _all_traffic(protocol: Any) -> bool:
    return str(protocol).lower() in ALL_PROTOCOLS


def self_referencing(sg: Res, stack: Stack) -> bool:
    """Whether ``sg`` allows all traffic in from and out to itself (inline or as rule resources)."""

    def allows_itself(inline: str, rule_type: str) -> bool:
        return any(
            truthy(dig(i, "self")) is True and _all_traffic(dig(i, "protocol"))
            for i in as_list(sg.get(inline))
        ) or any(
            _targets(r, "securityGroupId", sg)
            and _targets(r, "referencedSecurityGroupId", sg)
            and _all_traffic(r.get("ipProtocol"))
            for r in stack.of_type(rule_type)
        )

    ingress = allows_itself("ingress", INGRESS_RULE)
    egress = allows_itself("egress", EGRESS_RULE)
    for r in stack.of_type(SG_RULE):
        if (
            _targets(r, "securityGroupId", sg)
            and _all_traffic(r.get("protocol"))
            and (truthy(r.get("self")) is True or _targets(r, "sourceSecurityGroupId", sg))
        ):
            ingress = ingress or r.get("type") == "ingress"
            egress = egress or r.get("type") == "egress"
    return ingress and egress


@stack_rule(
    "training-pool-efa-security-group",
    description="Training pools' EFA interfaces are in a security group that allows all traffic in from and "
    "out to itself (EFA's OS-bypass traffic is dropped otherwise).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security",
    unknowns="Security groups and their rules are matched by property dependency (their ids are unknown at "
    "preview); a group given only as a literal id cannot be checked and is a violation.",
    config=MIN_GPUS,
)
def training_pool_efa_security_group(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    groups = stack.of_type(SECURITY_GROUP)
    for pool in training_pools(stack, ctx):
        attached = [g for t in pool.templates for g in linked(t, "networkInterfaces", groups)]
        if not any(self_referencing(g, stack) for g in attached):
            yield violation(
                f"node group {pool.group.name!r}: no security group on its EFA interfaces allows all traffic "
                f"from and to itself (groups {[g.name for g in attached]})",
                "add a security group with ingress and egress rules for all traffic referencing itself, "
                "and put "
                "it on every EFA interface",
                pool.group.urn,
            )


TRAINING_RUNTIME_TYPES = (
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime",
)


def _env_ok(env: Any) -> tuple[bool, bool]:
    """(image digest set, node name from the downward API) in a container's env list."""
    entries = {e.get("name"): e for e in as_list(env) if isinstance(e, dict)}
    digest = entries.get(IMAGE_DIGEST_ENV, {}).get("value")
    node = dig(entries.get(NODE_NAME_ENV, {}), "valueFrom", "fieldRef", "fieldPath")
    digest_ok = digest is UNKNOWN or (isinstance(digest, str) and digest.startswith("sha256:"))
    return digest_ok, node == "spec.nodeName"


@resource_rule(
    "training-runtime-records-image-and-node",
    description="Every container of a training runtime carries the image digest it runs "
    "(AIPLAT_IMAGE_DIGEST) and its node's name from the downward API (NODE_NAME = spec.nodeName): the run "
    "record promises both.",
    severity=MEDIUM,
    doc="https://kubernetes.io/docs/concepts/workloads/pods/downward-api/",
    types=TRAINING_RUNTIME_TYPES,
    unknowns="The digest is computed from the image build of the same update: unknown at preview counts "
    "as set.",
)
def training_runtime_records_image_and_node(r: Res, ctx: Ctx) -> Iterator[Violation]:
    jobs = r.get("spec", "template", "spec", "replicatedJobs")
    if jobs is UNKNOWN or not isinstance(jobs, list):
        yield violation("the runtime's replicated jobs are unknown", "write the runtime document as literals")
        return
    for job in jobs:
        pod = dig(job, "template", "spec", "template", "spec") if isinstance(job, dict) else None
        if not isinstance(pod, dict):
            yield violation("a replicated job's pod template is unknown", "write it as a literal")
            continue
        for c in as_list(pod.get("containers")):
            if not isinstance(c, dict):
                yield violation("a container of the runtime is unknown", "write it as a literal")
                continue
            digest_ok, node_ok = _env_ok(c.get("env"))
            missing = [n for n, ok in ((IMAGE_DIGEST_ENV, digest_ok), (NODE_NAME_ENV, node_ok)) if not ok]
            if missing:
                yield violation(
                    f"container {c.get('name')!r} of replicated job {job.get('name')!r} lacks {missing}",
                    f"set {IMAGE_DIGEST_ENV} to the image's sha256 digest and {NODE_NAME_ENV} from fieldRef "
                    "spec.nodeName (infra/training/documents/runtime.py)",
                )
