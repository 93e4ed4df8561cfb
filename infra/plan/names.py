"""Physical names that two stacks must not share, read from their plans.

AWS keeps some names unique per account or partition (IAM, S3, multi-region trails) and others per account
and region (clusters, log groups, KMS aliases, ...); some settings exist once per account and region. Two
stacks declaring the same one make the second ``pulumi up`` fail with EntityAlreadyExists /
BucketAlreadyOwnedByYou / ResourceAlreadyExistsException, or fight over one setting. The names are read from
what the program registered (the plan), not derived again from the config: one source. Auto-named resources
(no name in the inputs: the engine adds a random suffix) cannot collide and are skipped.

``aiplat plan`` and ``aiplat review`` refuse a stack whose names clash with another stack of its folder
(``name_clashes``); the stacks of one folder are taken to deploy into one account, as the account-wide
names of the naming scheme assume (``infra/core/naming.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from infra.plan.runner import Plan, RecordedResource
from infra.rules import Finding
from infra.stack.registry import error

ACCOUNT, PARTITION = "account", "partition"


@dataclass(frozen=True)
class PhysicalName:
    """One name AWS keeps unique: where (``account``, ``partition`` or a region), the type, the name's
    parts, and the input field that holds it."""

    scope: str
    type: str
    parts: tuple[str, ...]
    field: str

    @property
    def key(self) -> tuple[str, ...]:
        return (self.scope, self.type, *self.parts)

    def where(self) -> str:
        if self.scope == ACCOUNT:
            return "unique in the account"
        if self.scope == PARTITION:
            return "unique across every AWS account"
        return f"unique per account in {self.scope}"


NameOf = Callable[[Plan, RecordedResource], PhysicalName | None]


def _region(plan: Plan, r: RecordedResource) -> str:
    return r.inputs.get("region") or plan.region


def _named(field: str, scope: str) -> NameOf:
    """The name of a resource whose physical name is ``inputs[field]``, unique per ``scope``."""

    def name(plan: Plan, r: RecordedResource) -> PhysicalName | None:
        value = r.inputs.get(field)
        if not value:
            return None  # auto-named
        where = scope if scope in (ACCOUNT, PARTITION) else _region(plan, r)
        return PhysicalName(where, r.type, (str(value),), field)

    return name


def _trail(plan: Plan, r: RecordedResource) -> PhysicalName:
    # A multi-region trail has a shadow copy of the same name in every region: account-wide.
    where = ACCOUNT if r.inputs.get("isMultiRegionTrail") else _region(plan, r)
    return PhysicalName(where, r.type, (str(r.inputs["name"]),), "name")


def _singleton(plan: Plan, r: RecordedResource) -> PhysicalName:
    """One per account and region: a second owner would fight over (or destroy) the first one's setting."""
    return PhysicalName(_region(plan, r), r.type, (), "(a setting of the account's region)")


def _nodegroup(plan: Plan, r: RecordedResource) -> PhysicalName | None:
    if not r.inputs.get("nodeGroupName"):
        return None
    parts = (str(r.inputs["clusterName"]), str(r.inputs["nodeGroupName"]))
    return PhysicalName(_region(plan, r), r.type, parts, "nodeGroupName")


def _event_rule(plan: Plan, r: RecordedResource) -> PhysicalName | None:
    if not r.inputs.get("name"):
        return None
    parts = (str(r.inputs.get("eventBusName") or "default"), str(r.inputs["name"]))
    return PhysicalName(_region(plan, r), r.type, parts, "name")


def _dns_record(plan: Plan, r: RecordedResource) -> PhysicalName:
    # A record set is unique per hosted zone (global, not per region), name, type and, for routing
    # policies (latency, weighted...), set identifier: the latency records of one global name are one per
    # region. Names compare as DNS does, without the trailing dot and case.
    name = str(r.inputs.get("name")).rstrip(".").lower()
    parts = (
        str(r.inputs.get("zoneId")),
        name,
        str(r.inputs.get("type")),
        str(r.inputs.get("setIdentifier") or ""),
    )
    return PhysicalName(ACCOUNT, r.type, parts, "name")


# Type -> how its physical name is scoped, from the APIs' own words: IAM names are unique in the account
# (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html), bucket names in the partition
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), the rest per account and
# region (e.g. https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html).
NAMES: dict[str, NameOf] = {
    "aws:iam/role:Role": _named("name", ACCOUNT),
    "aws:iam/policy:Policy": _named("name", ACCOUNT),
    "aws:iam/instanceProfile:InstanceProfile": _named("name", ACCOUNT),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": _named("url", ACCOUNT),
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": _named("awsServiceName", ACCOUNT),
    "aws:s3/bucket:Bucket": _named("bucket", PARTITION),
    "aws:cloudtrail/trail:Trail": _trail,
    "aws:kms/alias:Alias": _named("name", "region"),
    "aws:cloudwatch/logGroup:LogGroup": _named("name", "region"),
    "aws:ecr/repository:Repository": _named("name", "region"),
    "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": _named("prefix", "region"),
    # a pull through cache rule's repository prefix is unique per account and region
    # (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreatePullThroughCacheRule.html)
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": _named("ecrRepositoryPrefix", "region"),
    "aws:ec2/placementGroup:PlacementGroup": _named("name", "region"),
    "aws:ec2/launchTemplate:LaunchTemplate": _named("name", "region"),
    "aws:eks/cluster:Cluster": _named("name", "region"),
    "aws:eks/nodeGroup:NodeGroup": _nodegroup,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:sns/topic:Topic": _named("name", "region"),
    "aws:sqs/queue:Queue": _named("name", "region"),
    "aws:ssm/document:Document": _named("name", "region"),
    # regional web ACLs: unique per account, region and scope (API_CreateWebACL)
    "aws:wafv2/webAcl:WebAcl": _named("name", "region"),
    "aws:route53/record:Record": _dns_record,
    "aws:ecr/replicationConfiguration:ReplicationConfiguration": _singleton,
    "aws:ebs/encryptionByDefault:EncryptionByDefault": _singleton,
    "aws:ebs/defaultKmsKey:DefaultKmsKey": _singleton,
    "aws:guardduty/detector:Detector": _singleton,
}
# Types with a 'name' input that is not a physical name unique in an account or region.
NOT_NAMES = frozenset(
    {
        "aws:eks/accessEntry:AccessEntry",  # keyed by principal, per cluster
        # DNS Firewall names are labels: the API keys lists, groups, rules and associations by id (rules by
        # group and domain list), never by name (CreateFirewallDomainList, CreateFirewallRuleGroup ...)
        "aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList",
        "aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup",
        "aws:route53/resolverFirewallRule:ResolverFirewallRule",
        "aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation",
    }
)


def physical_names(plan: Plan) -> list[tuple[PhysicalName, RecordedResource]]:
    """Every name in ``plan`` that AWS keeps unique, with the resource that declares it."""
    out = []
    for r in plan.resources:
        name_of = NAMES.get(r.type)
        name = name_of(plan, r) if name_of else None
        if name is not None:
            out.append((name, r))
    return out


def unclassified_types(plans: Iterable[Plan]) -> set[str]:
    """AWS types that have a name input but are neither in ``NAMES`` nor ``NOT_NAMES``."""
    return {
        r.type
        for plan in plans
        for r in plan.resources
        if r.type.startswith("aws:")
        and ("name" in r.inputs or "nodeGroupName" in r.inputs)
        and r.type not in NAMES
        and r.type not in NOT_NAMES
    }


def _fix(type_: str) -> str:
    if type_ in ("aws:ebs/encryptionByDefault:EncryptionByDefault", "aws:ebs/defaultKmsKey:DefaultKmsKey"):
        return (
            "let one stack per account and region own it: security.ebs_encryption_by_default: false on the "
            "other"
        )
    if type_ == "aws:guardduty/detector:Detector":
        return "let one stack per account and region own it: security.audit.guardduty: false on the other"
    if type_ == "aws:ecr/pullThroughCacheRule:PullThroughCacheRule":
        return "set another image_cache.prefix on one of the two stacks (docs/how-to/image-cache.md)"
    if type_ == "aws:route53/record:Record":
        # the records of a stack's own name (its regional CNAME, its certificate's validation record)
        return "give each infer stack its own inference.https.domain (the global name is shared by design)"
    if type_.startswith("aws:ecr/replicationConfiguration"):
        return "let one train stack per account and region replicate images (storage.replicate_to)"
    fix = (
        "give one of the two stacks another name_prefix, environment or role (the names derive from them, "
        "infra/core/naming.py)"
    )
    if type_ == "aws:s3/bucket:Bucket":
        fix += ", or set storage.bucket_names for its buckets"
    return fix


EXAMPLES = 3  # names quoted per clash line; the count says how many there are


def name_clashes(stack: str, plans: Mapping[str, Plan]) -> list[Finding]:
    """The names of ``stack``'s plan that another plan in ``plans`` also declares: one error per other
    stack and resource field, with the count and a few of the names."""
    owners: dict[tuple[str, ...], list[str]] = {}
    for other, plan in sorted(plans.items()):
        if other != stack:
            for name, _ in physical_names(plan):
                owners.setdefault(name.key, []).append(other)
    # (other stack, type, field) -> the clashing names and the resources of this stack that declare them
    groups: dict[tuple[str, str, str], list[tuple[PhysicalName, RecordedResource]]] = {}
    for name, r in physical_names(plans[stack]):
        for other in owners.get(name.key, []):
            groups.setdefault((other, name.type, name.field), []).append((name, r))
    findings = []
    for (other, type_, field), clashes in groups.items():
        first, resource = clashes[0]
        if not first.parts:  # a setting, not a name: one owner per account and region
            problem = (
                f"one per account in {first.scope}, and stack {other} declares it too: this stack's "
                f"resource {resource.name} would take it over"
            )
        else:
            shown = ", ".join(f"{' / '.join(n.parts)!r} (resource {r.name})" for n, r in clashes[:EXAMPLES])
            more = f" and {len(clashes) - EXAMPLES} more" if len(clashes) > EXAMPLES else ""
            count = f"{len(clashes)} names" if len(clashes) > 1 else "a name"
            problem = (
                f"{count} ({first.where()}) also declared by stack {other}: {shown}{more}; the second "
                "pulumi up would fail with 'already exists'"
            )
        findings.append(error(f"{type_} {field}", problem, _fix(type_)))
    return [replace(f, rule="unique-physical-names") for f in findings]
