"""Values unknown at preview (review finding F4): what a rule may leave to the update, and the first preview
of every stack.

On a new stack every policy document built from resources of the same update is unknown at preview (IRSA
trust policies name the OIDC issuer of a cluster not yet created; role, key and bucket policies name ARNs
of this update). The rules that read them skip them at preview and the ADVISORY ``checked-at-update`` lists
each one; the engine runs the pack again during the update (``PULUMI_DRY_RUN=false``) with resolved inputs,
where an unknown document is refused. Everything else stays enforced at preview.
"""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from aiplat_policies.core import Ctx, StackInfo
from aiplat_policies.pack import rules

from infra.review import review_configured_plan
from tests.conftest import EXAMPLES, EXAMPLES_DIR, STACKS
from tests.policies.conftest import UNKNOWN, R, messages, review

DEFERRED = "checked-at-update"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
KEY = "aws:kms/key:Key"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"


def unknown_bucket_policy() -> list[R]:
    return [
        R(BUCKET, "data", {"bucket": "aiplat-data"}),
        R(
            BUCKET_POLICY,
            "data-policy",
            {"bucket": "aiplat-data", "policy": UNKNOWN},
            deps={"bucket": ["data"]},
        ),
    ]


# rule, the resources with one unknown document, where checked-at-update says it is, the refusal outside a
# preview
CASES = [
    (
        "iam-no-admin",
        [R(ROLE_POLICY, "p", {"policy": UNKNOWN})],
        "policy",
        "policy is unknown outside a preview",
    ),
    (
        "iam-no-admin",
        [R(ATTACHMENT, "a", {"policyArn": UNKNOWN})],
        "policyArn",
        "attaches <unknown at preview>",
    ),
    (
        "iam-no-admin",
        [R(ROLE, "r", {"assumeRolePolicy": "{}", "inlinePolicies": [{"name": "x", "policy": UNKNOWN}]})],
        "inlinePolicies[0]",
        "inlinePolicies[0] is unknown outside a preview",
    ),
    (
        "iam-no-passrole-wildcard",
        [R(ROLE_POLICY, "p", {"policy": UNKNOWN})],
        "policy",
        "policy is unknown outside a preview",
    ),
    (
        "iam-trust-scoped",
        [R(ROLE, "r", {"assumeRolePolicy": UNKNOWN})],
        "assumeRolePolicy",
        "the trust policy is unknown outside a preview",
    ),
    (
        "iam-trust-confused-deputy",
        [R(ROLE, "r", {"assumeRolePolicy": UNKNOWN})],
        "assumeRolePolicy",
        "the trust policy is unknown outside a preview",
    ),
    (
        "no-wildcard-principal",
        [R(KEY, "key", {"policy": UNKNOWN})],
        "policy",
        "the policy document is unknown outside a preview",
    ),
    (
        "kms-key-policy-change-guarded",
        [R(KEY, "key", {"policy": UNKNOWN})],
        "policy",
        "the key policy is unknown outside a preview",
    ),
    ("s3-tls-only", unknown_bucket_policy(), "policy", "the policy of bucket 'data' is unknown outside"),
    ("s3-tls-floor", unknown_bucket_policy(), "policy", "the policy of bucket 'data' is unknown outside"),
    (
        "s3-release-writers-only-publisher",
        [
            R(BUCKET, "storage-artifacts", {"bucket": "aiplat-artifacts"}),
            R(
                BUCKET_POLICY,
                "storage-artifacts-policy",
                {"bucket": "aiplat-artifacts", "policy": UNKNOWN},
                deps={"bucket": ["storage-artifacts"]},
            ),
        ],
        "policy",
        "the policy of bucket 'storage-artifacts' is unknown outside",
    ),
    (
        "k8s-load-balancer-tls13",
        [
            R(
                INGRESS,
                "ing",
                {"metadata": {"name": "ing", "annotations": UNKNOWN}, "spec": {"ingressClassName": "alb"}},
            )
        ],
        "metadata.annotations",
        "the annotations of Ingress 'ing' are unknown outside a preview",
    ),
    (
        "k8s-internet-ingress-authenticated",
        [
            R(
                INGRESS,
                "ing",
                {"metadata": {"name": "ing", "annotations": UNKNOWN}, "spec": {"ingressClassName": "alb"}},
            )
        ],
        "metadata.annotations",
        "the annotations of Ingress 'ing' are unknown outside a preview",
    ),
]
IDS = [f"{c[0]}-{c[2]}" for c in CASES]


@pytest.mark.parametrize(("rule", "resources", "where", "refusal"), CASES, ids=IDS)
def test_an_unknown_document_is_deferred_at_preview(rule, resources, where, refusal) -> None:
    """At preview the rule passes over the unknown document and checked-at-update names it, the rule and
    when it is checked; nothing is mandatory."""
    result = review(resources)
    assert messages(result, rule) == []
    [listed] = [m for m in messages(result, DEFERRED) if f": {where} is unknown at preview" in m]
    assert rule in listed and "the engine checks the resolved value" in listed
    when = (
        "at the end of the update" if rule.startswith(("s3-", "k8s-")) else "before the resource is created"
    )
    assert when in listed
    assert all(d.enforcement == "advisory" for d in result.diagnostics if d.policy == DEFERRED)
    assert [d for d in result.mandatory if d.policy == rule] == []


@pytest.mark.parametrize(("rule", "resources", "where", "refusal"), CASES, ids=IDS)
def test_an_unknown_document_is_refused_outside_a_preview(rule, resources, where, refusal) -> None:
    """As the pack the update loads (PULUMI_DRY_RUN=false), nothing is left for later: the rule refuses
    the unknown document and checked-at-update says nothing."""
    result = review(resources, dry_run=False)
    assert any(refusal in m for m in messages(result, rule)), messages(result, rule)
    assert messages(result, DEFERRED) == []


def test_a_known_document_is_still_checked_at_preview() -> None:
    """Deferral is for unknowns only: a known admin policy next to an unknown one fails at preview."""
    admin = json.dumps({"Statement": [{"Sid": "All", "Effect": "Allow", "Action": "*", "Resource": "*"}]})
    result = review(
        [R(ROLE_POLICY, "known", {"policy": admin}), R(ROLE_POLICY, "later", {"policy": UNKNOWN})]
    )
    assert {(d.policy, d.resource) for d in result.mandatory if d.policy.startswith("iam-")} == {
        ("iam-no-admin", "RolePolicy known"),
        ("iam-no-passrole-wildcard", "RolePolicy known"),
    }
    assert [d.resource for d in result.diagnostics if d.policy == DEFERRED] == ["RolePolicy later"]


@pytest.mark.parametrize(
    ("env", "dry_run", "at_preview"),
    [
        ({"PULUMI_DRY_RUN": "true"}, True, True),
        ({"PULUMI_DRY_RUN": "false"}, False, False),
        ({}, None, False),
    ],
    ids=["preview", "update", "unsaid"],
)
def test_only_a_preview_defers(env, dry_run, at_preview) -> None:
    """The pack reads PULUMI_DRY_RUN as the CLI sets it for each policy pack process (analyzer_plugin.go
    constructEnv); without it nothing is deferred."""
    info = StackInfo.from_environment(env)
    assert info.dry_run is dry_run
    assert Ctx({}, info, None).at_preview is at_preview  # type: ignore[arg-type]


def test_deferring_rules_say_so_in_the_readme_table() -> None:
    deferring = {r.name for r in rules() if r.defers is not None}
    assert deferring == {c[0] for c in CASES}
    for r in rules():
        if r.name in deferring:
            assert "checked-at-update" in r.unknowns and "Outside a preview" in r.unknowns, r.name


REPLICATION = "data-residency-replication"


def replication_to(*regions: str) -> list[R]:
    """A replication config whose destination ARNs are unknown (replica buckets of this update), computed
    from one bucket per region."""
    names = [f"replica-{r}" for r in regions]
    return [
        *(R(BUCKET, n, {"bucket": n, "region": r}) for n, r in zip(names, regions, strict=True)),
        R(
            "aws:s3/bucketReplicationConfig:BucketReplicationConfig",
            "replication",
            {
                "bucket": "src",
                "rules": [{"id": f"to-{r}", "destination": {"bucket": UNKNOWN}} for r in regions],
            },
            deps={"rules": names},
        ),
    ]


@pytest.mark.parametrize(
    ("regions", "expected"),
    [
        (("ap-east-1", "ap-southeast-1"), None),
        (("ap-east-1", "eu-central-1"), "goes to eu-central-1"),
    ],
    ids=["both-allowed", "one-elsewhere"],
)
def test_replication_to_buckets_of_this_update(check, regions, expected) -> None:
    """Destination ARNs unknown at preview: every bucket the rules were computed from must be in an allowed
    region, so a replica created in the same update is not taken for a bucket outside this stack."""
    check(REPLICATION, replication_to(*regions), expected)


# -- the first preview of the real stacks ---------------------------------------------------------------


def _deferred_rules(result) -> Counter:
    """How many deferred documents name each rule (checked-at-update's messages)."""
    deferring = sorted((r.name for r in rules() if r.defers is not None), key=len, reverse=True)
    out: Counter = Counter()
    for d in result.diagnostics:
        if d.policy == DEFERRED:
            tail = d.message.split("the engine checks the resolved value: ", 1)[1]
            out.update(name for name in deferring if name in tail)
    return out


def test_first_preview_of_prod_us_train(plan_first_preview) -> None:
    """The reviewer's scenario on the real program: the first preview of prod-us-train, where the IRSA trust
    policies and the documents naming keys, queues and buckets of this update are unknown. No mandatory
    violation; checked-at-update lists them; the update's own run checks exactly those."""
    plan = plan_first_preview("prod-us-train").as_json()
    preview = review_configured_plan(plan)
    assert preview.mandatory == []
    assert not [d for d in preview.diagnostics if "can't run policy" in d.message]
    listed = {d.resource for d in preview.diagnostics if d.policy == DEFERRED}
    # the four OIDC trust policies of the review and documents that embed key / bucket ARNs
    assert {
        "Role cluster-vpc-cni-role",
        "Role lbc-iam-role",
        "Role pod-roles-trainer",
        "Role pod-roles-publisher",
        "RolePolicy pod-roles-trainer-policy",
        "RolePolicy replication-role-policy",
        "BucketPolicy storage-artifacts-policy",
    } <= listed
    # the same plan as the update's run sees it (were the values still unknown): every deferred document is
    # refused by exactly the rules checked-at-update named
    update = review_configured_plan(plan, dry_run=False)
    refused = Counter(d.policy for d in update.diagnostics)
    reported = Counter(d.policy for d in preview.diagnostics if d.policy != DEFERRED)
    assert refused == reported + _deferred_rules(preview)
    assert DEFERRED not in refused


def _with(plan: dict, type_: str, name: str, inputs: dict) -> dict:
    """``plan`` plus a copy of its first ``type_`` resource renamed ``name`` with ``inputs``."""
    plan = copy.deepcopy(plan)
    template = next(r for r in plan["resources"] if r["type"] == type_)
    added = copy.deepcopy(template)
    added["urn"] = template["urn"].rsplit("::", 1)[0] + f"::{name}"
    added["name"], added["inputs"] = name, inputs
    added["propertyDependencies"], added["dependencies"] = {}, []
    plan["resources"].append(added)
    return plan


@pytest.mark.parametrize(
    ("type_", "inputs", "rule"),
    [
        (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            {
                "securityGroupId": UNKNOWN,
                "ipProtocol": "tcp",
                "fromPort": 22,
                "toPort": 22,
                "cidrIpv4": "0.0.0.0/0",
            },
            "no-world-open-ingress",
        ),
        (
            ROLE_POLICY,
            {
                "role": UNKNOWN,
                "policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
            },
            "iam-no-admin",
        ),
    ],
    ids=["world-open-ingress", "known-admin-policy"],
)
def test_first_preview_still_enforces_what_is_known(plan_first_preview, type_, inputs, rule) -> None:
    """A known violation added to the first-preview plan fails the preview as before."""
    plan = _with(plan_first_preview("prod-us-train").as_json(), type_, "added", inputs)
    result = review_configured_plan(plan)
    assert {(d.policy, d.resource.split(" ")[-1]) for d in result.mandatory} >= {(rule, "added")}


@pytest.mark.parametrize("stack", [*STACKS, *EXAMPLES])
def test_first_preview_of_every_stack_passes(plan_first_preview, stack) -> None:
    """No shipped stack or example is blocked by its first preview (`aiplat rollout` and `pulumi up
    --policy-pack policies` preview first), and no rule degrades to the SDK's "can't run policy"."""
    stacks_dir = None if stack in STACKS else EXAMPLES_DIR  # an example's pack config file is beside it
    result = review_configured_plan(plan_first_preview(stack).as_json(), stacks_dir=stacks_dir)
    assert result.mandatory == [], [(d.policy, d.resource, d.message) for d in result.mandatory]
    assert {d.policy for d in result.advisory} <= {DEFERRED, "iam-trust-confused-deputy"}
    assert not [d for d in result.diagnostics if "can't run policy" in d.message]
