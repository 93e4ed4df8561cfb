"""Who can read, write, sign and delete what: every principal the platform creates or names, evaluated on the
documents the plans deploy (identity policies + bucket policies + key policies + explicit denies,
tests/support/iam_eval.py), against the matrix docs/platform/security.md promises. A Deny that exempts a
principal the platform creates is only half a grant: that principal must also be allowed what the Deny
reserves for it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS
from tests.support import iam_eval
from tests.support.iam_eval import PlanIam, Principal, Target, decide

TRAIN, INFER = "prod-us-train", "prod-sg-infer"
MFA = {"aws:MultiFactorAuthPresent": "true"}
WAF_ANNOTATION = "alb.ingress.kubernetes.io/wafv2-acl-arn"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    return {**{s: plan_stack(s) for s in STACKS}, **{e: plan_example(e) for e in EXAMPLES}}


def _principals(iam: PlanIam, plan: Plan) -> dict[str, Principal]:
    """The matrix's principals in a train or infer stack's plan: the platform's roles by their resource
    names, the deployer and an administrator of the account by ARN (their identity policies are not ours:
    taken to allow everything, the worst case for a guard)."""
    deployer = plan.config["security"]["account"]["deployer_role"]
    out = {
        "deployer": iam_eval.named("deployer", f"arn:aws:iam::{ACCOUNT_ID}:role/{deployer}", **MFA),
        "account-admin": iam_eval.named(
            "account-admin", f"arn:aws:iam::{ACCOUNT_ID}:role/AWSReservedSSO_AdministratorAccess_0123", **MFA
        ),
    }
    for who, suffix, context in [
        ("break-glass", "keyguard-break-glass", MFA),
        ("key-admin", "keyguard-key-admin", MFA),
        ("fluent-bit", "logs-collector-role", {}),
        ("grafana", "logs-grafana-role", {}),
        ("lbc", "lbc-iam-role", {}),
    ]:
        role = iam.role(suffix)
        out[who] = Principal(who, role.arn, role.statements, context=context)
    optional = [
        ("publisher", "pod-roles-publisher"),
        ("trainer", "pod-roles-trainer"),
        ("fetch", "pod-roles-inference"),
        ("karpenter", "karpenter-aws-controller-role"),
    ]
    for who, suffix in optional:
        if any(n.endswith(suffix) for n in iam.roles):
            role = iam.role(suffix)
            out[who] = Principal(who, role.arn, role.statements)
    for team in plan.config.get("teams", {}):
        # the team's pods (IRSA) and, when it has repositories and CI, the role its CI pushes with
        for who, name in (
            (f"team-{team}", f"team-{team}-role"),
            (f"team-{team}-ci", f"team-{team}-registry-ci-role"),
        ):
            if name in iam.roles:
                role = iam.roles[name]
                out[who] = Principal(name, role.arn, role.statements)
    return out


def _object(bucket: Target, key: str) -> Target:
    return Target(f"{bucket.arn}/{key}", "s3", bucket.policy, bucket.tags)


def _s3(region: str, **extra: Any) -> dict[str, Any]:
    return {
        "aws:RequestedRegion": region,
        "s3:ResourceAccount": ACCOUNT_ID,
        "aws:ResourceAccount": ACCOUNT_ID,
        "s3:TlsVersion": "1.3",
        **extra,
    }


def _gateway_endpoint(plan: Plan) -> str | None:
    """The S3 gateway endpoint the stack's data buckets take objects through (as their policies name it):
    the pods' S3 requests in the stack's region carry it as ``aws:SourceVpce``."""
    for r in plan.by_type("aws:s3/bucketPolicy:BucketPolicy"):
        for st in json.loads(r.inputs["policy"])["Statement"]:
            vpce = ((st.get("Condition") or {}).get("StringNotEquals") or {}).get("aws:SourceVpce")
            if vpce:
                return vpce
    return None


def _through_endpoint(plan: Plan, region: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """``context`` of an S3 request made in ``region`` from inside the stack's VPC."""
    vpce = _gateway_endpoint(plan)
    return {**context, "aws:SourceVpce": vpce} if vpce and region == plan.region else dict(context)


# A create-only upload as the publisher makes it (If-None-Match: *; the bucket's default key, no SSE header).
CREATE = {"s3:if-none-match": "*", "s3:ObjectCreationOperation": "true"}


def _requests(train: PlanIam) -> dict[str, tuple[str, Target, Mapping[str, Any]]]:
    """request name -> (action, target, context) on the train stack's own buckets and keys."""
    region = train.plan.region
    artifacts = train.bucket(f"-{region}-artifacts")
    releases = _object(artifacts, "release/llama/20261202-0001/model.safetensors")
    replica = [t for n, t in train.buckets.items() if n.endswith("-artifacts") and region not in n]
    checkpoints, datasets = train.bucket(f"-{region}-checkpoints"), train.bucket(f"-{region}-datasets")
    data, signing = train.key("kms-data"), train.key("release-signing-key")
    via_s3 = {
        "kms:ViaService": f"s3.{region}.amazonaws.com",
        "kms:CallerAccount": ACCOUNT_ID,
        "kms:EncryptionContext:aws:s3:arn": artifacts.arn,
    }
    out = {
        "read release": ("s3:GetObject", releases, _s3(region)),
        "write release": ("s3:PutObject", releases, _s3(region, **CREATE)),
        "delete release": ("s3:DeleteObject", releases, _s3(region)),
        "delete an object version": ("s3:DeleteObjectVersion", releases, _s3(region)),
        "change the artifacts bucket policy": ("s3:PutBucketPolicy", artifacts, _s3(region)),
        "sign a manifest": ("kms:Sign", signing, {"aws:RequestedRegion": region}),
        "change the data key policy": ("kms:PutKeyPolicy", data, {"aws:RequestedRegion": region}),
        "change the signing key policy": ("kms:PutKeyPolicy", signing, {"aws:RequestedRegion": region}),
        "schedule the data key's deletion": (
            "kms:ScheduleKeyDeletion",
            data,
            {"aws:RequestedRegion": region},
        ),
        "encrypt an artifact (data key through S3)": ("kms:GenerateDataKey", data, via_s3),
        "write a trainer checkpoint": (
            "s3:PutObject",
            _object(checkpoints, "trainer/run-1/step_000000100/model.distcp"),
            _s3(region),
        ),
        "write a research checkpoint": (
            "s3:PutObject",
            _object(checkpoints, "research/run-1/step_000000100/model.distcp"),
            _s3(region),
        ),
        "read a research dataset": (
            "s3:GetObject",
            _object(datasets, "research/shard-00000.bin"),
            _s3(region),
        ),
        # what the publisher reads (issue 31): Hugging Face folders under outputs/, never a checkpoint
        "read a trainer checkpoint": (
            "s3:GetObject",
            _object(checkpoints, "trainer/runs/run-1/step_000000100/.metadata"),
            _s3(region),
        ),
        "write the trainer's exported folder": (
            "s3:PutObject",
            _object(checkpoints, "trainer/outputs/run-1/model/model.safetensors"),
            _s3(region),
        ),
        "read the trainer's exported folder": (
            "s3:GetObject",
            _object(checkpoints, "trainer/outputs/run-1/model/model.safetensors"),
            _s3(region),
        ),
        "write a research job's output": (
            "s3:PutObject",
            _object(checkpoints, "research/outputs/byo-llama-ft/model/model.safetensors"),
            _s3(region),
        ),
        "read a research job's output": (
            "s3:GetObject",
            _object(checkpoints, "research/outputs/byo-llama-ft/model/model.safetensors"),
            _s3(region),
        ),
        "list a research job's output": (
            "s3:ListBucket",
            checkpoints,
            _s3(region, **{"s3:prefix": "research/outputs/byo-llama-ft/model/"}),
        ),
        "read a production job's output": (
            "s3:GetObject",
            _object(checkpoints, "production/outputs/prod-1/model/model.safetensors"),
            _s3(region),
        ),
    }
    out |= {
        "change the checkpoints bucket policy": ("s3:PutBucketPolicy", checkpoints, _s3(region)),
        "expire the datasets by lifecycle": ("s3:PutLifecycleConfiguration", datasets, _s3(region)),
        "delete a checkpoint version for good": (
            "s3:DeleteObjectVersion",
            _object(checkpoints, "trainer/runs/run-1/step_000000100/.metadata"),
            _s3(region),
        ),
    }
    trainer_repo = train.repositories["aiplat-prod/trainer"]
    out |= {
        "push the trainer image": ("ecr:PutImage", trainer_repo, {"aws:RequestedRegion": region}),
        "delete a trainer image": ("ecr:BatchDeleteImage", trainer_repo, {"aws:RequestedRegion": region}),
        "change the trainer repository's policy": (
            "ecr:SetRepositoryPolicy",
            trainer_repo,
            {"aws:RequestedRegion": region},
        ),
    }
    team_repo = train.repositories["aiplat-prod/teams/research/byo-llama"]
    out |= {
        "push to research's repository": ("ecr:PutImage", team_repo, {"aws:RequestedRegion": region}),
        "upload a layer to research's repository": (
            "ecr:UploadLayerPart",
            team_repo,
            {"aws:RequestedRegion": region},
        ),
        "delete an image of research's repository": (
            "ecr:BatchDeleteImage",
            team_repo,
            {"aws:RequestedRegion": region},
        ),
        "pull from research's repository": ("ecr:BatchGetImage", team_repo, {"aws:RequestedRegion": region}),
        "change research's repository policy": (
            "ecr:SetRepositoryPolicy",
            team_repo,
            {"aws:RequestedRegion": region},
        ),
        "make research's tags mutable": (
            "ecr:PutImageTagMutability",
            team_repo,
            {"aws:RequestedRegion": region},
        ),
    }
    for t in replica:
        there = t.arn.split(":::")[1].removeprefix("aiplat-prod-").removesuffix("-artifacts")
        out[f"write a release in the {there} replica"] = (
            "s3:PutObject",
            _object(t, "release/llama/20261202-0001/model.safetensors"),
            _s3(there, **CREATE),
        )
    # the pods (every principal of the matrix but the admins) call S3 through the VPC's gateway endpoint
    return {
        name: (
            action,
            target,
            _through_endpoint(train.plan, region, ctx) if action.startswith("s3:") else ctx,
        )
        for name, (action, target, ctx) in out.items()
    }


ADMINS = {"deployer", "account-admin"}  # identity policies not ours (worst case: every action)
# request -> (who may, guarded): a guarded request is denied explicitly to everyone else (a Deny in the bucket
# or key policy that binds every principal of the account), the others are at most not allowed.
TRAIN_MATRIX: dict[str, tuple[Any, ...]] = {
    "read release": (ADMINS | {"break-glass", "publisher"}, False),
    "write release": ({"publisher", "break-glass"}, True),
    # the publisher is exempt from the bucket's Deny (it writes there) but its IAM policy grants no delete
    "delete release": ({"break-glass"}, True, {"publisher"}),
    "delete an object version": ({"deployer", "break-glass"}, True),
    "change the artifacts bucket policy": ({"deployer", "break-glass"}, True),
    "sign a manifest": ({"publisher"}, True),
    "change the data key policy": ({"deployer", "break-glass"}, True),
    "change the signing key policy": ({"deployer", "break-glass"}, True),
    "schedule the data key's deletion": ({"break-glass"}, True),
    "encrypt an artifact (data key through S3)": (ADMINS | {"break-glass", "publisher", "trainer"}, False),
    "write a trainer checkpoint": (ADMINS | {"trainer"}, False),
    "write a research checkpoint": (ADMINS | {"team-research"}, False),
    # the platform trainer reads its own prefix only (issue 33), no team's
    "read a research dataset": (ADMINS | {"team-research"}, False),
    # a team's repositories: only its CI role pushes or deletes (never its pods, an administrator, the
    # deployer or break-glass: the repository policy denies them), only the deployer and break-glass change
    # the repository (docs/how-to/byo-training.md); pulls are the nodes' (an AWS managed policy, not modelled)
    "push to research's repository": ({"team-research-ci"}, True),
    "upload a layer to research's repository": ({"team-research-ci"}, True),
    "delete an image of research's repository": ({"team-research-ci"}, True),
    "pull from research's repository": (ADMINS | {"team-research-ci"}, False),
    "change research's repository policy": ({"deployer", "break-glass"}, True),
    "make research's tags mutable": ({"deployer", "break-glass"}, True),
    # the datasets and checkpoints buckets: the artifacts bucket's administration guard (issue 33)
    "change the checkpoints bucket policy": ({"deployer", "break-glass"}, True),
    "expire the datasets by lifecycle": ({"deployer", "break-glass"}, True),
    "delete a checkpoint version for good": ({"deployer", "break-glass"}, True),
    # the platform's repositories: the deployer's pulumi up builds and pushes them (issue 33); pulls are the
    # nodes' (an AWS managed policy, not modelled)
    "push the trainer image": ({"deployer"}, True),
    "delete a trainer image": ({"deployer"}, True),
    "change the trainer repository's policy": ({"deployer", "break-glass"}, True),
    # teams.research.releases is true in prod-us-train, teams.production.releases is not
    "read a trainer checkpoint": (ADMINS | {"trainer"}, False),
    "write the trainer's exported folder": (ADMINS | {"trainer"}, False),
    "read the trainer's exported folder": (ADMINS | {"trainer", "publisher"}, False),
    "write a research job's output": (ADMINS | {"team-research"}, False),
    "read a research job's output": (ADMINS | {"team-research", "publisher"}, False),
    "list a research job's output": (ADMINS | {"team-research", "publisher"}, False),
    "read a production job's output": (ADMINS | {"team-production"}, False),
}
REPLICA_WRITE = ({"break-glass"}, True)


def _decisions(principals: Mapping[str, Principal], requests) -> dict[str, dict[str, str]]:
    return {
        name: {who: decide(p, action, target, ctx) for who, p in principals.items()}
        for name, (action, target, ctx) in requests.items()
    }


def _expected(decisions: dict[str, dict[str, str]], matrix) -> dict[str, dict[str, str]]:
    """What the matrix says of each decision: ``allow`` for who may; for a guarded request ``deny`` for
    everyone else (``implicit`` for a principal exempt from the Deny that no policy allows); otherwise
    anything but ``allow``."""
    out = {}
    for name, by_who in decisions.items():
        allowed, guarded, *rest = matrix.get(name, REPLICA_WRITE)
        exempt_only = rest[0] if rest else set()

        out[name] = {
            who: "allow"
            if who in allowed
            else "implicit"
            if who in exempt_only
            else "deny"
            if guarded
            else (by_who[who] if by_who[who] != "allow" else "not allowed")
            for who in by_who
        }
    return out


def test_the_train_stacks_matrix(plans) -> None:
    plan = plans[TRAIN]
    train = PlanIam.of(plan)
    principals = _principals(train, plan)
    assert {"publisher", "trainer", "team-production", "team-research", "team-research-ci"} <= set(principals)
    decisions = _decisions(principals, _requests(train))
    assert any(name.startswith("write a release in the") for name in decisions)
    assert decisions == _expected(decisions, TRAIN_MATRIX)


def test_the_infer_stacks_fetch_tool_reads_its_replica_and_nothing_writes_it(plans) -> None:
    train, infer = PlanIam.of(plans[TRAIN]), PlanIam.of(plans[INFER])
    region = plans[INFER].region
    replica = train.bucket(f"{region}-artifacts")
    release = _object(replica, "release/llama/20261202-0001/model.safetensors")
    key = next(t for n, t in train.keys.items() if region in n)
    principals = {
        k: v for k, v in _principals(infer, plans[INFER]).items() if k not in ("break-glass", "key-admin")
    }
    decrypt = {
        "kms:ViaService": f"s3.{region}.amazonaws.com",
        "kms:CallerAccount": ACCOUNT_ID,
        "kms:EncryptionContext:aws:s3:arn": replica.arn,
    }
    reads = {w: decide(p, "s3:GetObject", release, _s3(region)) for w, p in principals.items()}
    assert {w for w, d in reads.items() if d == "allow"} == ADMINS | {"fetch"}
    keys = {w: decide(p, "kms:Decrypt", key, decrypt) for w, p in principals.items()}
    assert {w for w, d in keys.items() if d == "allow"} == ADMINS | {"fetch"}
    writes = {w: decide(p, "s3:PutObject", release, _s3(region, **CREATE)) for w, p in principals.items()}
    assert set(writes.values()) == {
        "deny"
    }  # the infer stack's own break-glass included: only the train stack's


@pytest.mark.parametrize("stack", [*STACKS, *EXAMPLES])
def test_every_deny_exemption_of_a_platform_role_comes_with_an_allow(plans, stack: str) -> None:
    """For each Deny of a bucket or key policy that exempts a role this plan creates (ArnNotEquals
    aws:PrincipalArn), that role is allowed at least one of the denied actions on that resource: an
    exemption alone grants nothing."""
    iam = PlanIam.of(plans[stack])
    created = {p.arn: p for p in iam.roles.values()}
    missing = []
    targets = [*iam.buckets.values(), *iam.keys.values(), *iam.repositories.values()]
    for target, deny, arn in iam_eval.exemptions(targets):
        principal = created.get(arn)
        if principal is None:
            continue  # named, not created here: the deployer, or another stack's role
        principal = Principal(principal.name, principal.arn, principal.statements, context=MFA)
        # a repository policy's statements name no Resource: the repository itself
        resources = [r.replace("*", "x") for r in iam_eval._list(deny.get("Resource"))] or [target.arn]
        resources = [r if r != "x" else target.arn for r in resources]
        actions = iam_eval._list(deny.get("Action"))
        region = target.arn.split(":")[3] or plans[stack].region
        ok = any(
            decide(
                principal,
                a,
                Target(r, target.kind, target.policy, target.tags),
                _through_endpoint(plans[stack], region, _s3(region, **CREATE)),
            )
            == "allow"
            for a in actions
            for r in resources
        )
        if not ok:
            missing.append((target.arn, deny.get("Sid"), principal.name))
    assert missing == []


@pytest.mark.parametrize("stack", [*STACKS, *EXAMPLES])
def test_an_access_entry_for_a_role_of_the_plan_waits_for_the_role(plans, stack: str) -> None:
    plan = plans[stack]
    roles = {
        f"arn:aws:iam::{ACCOUNT_ID}:role/{r.inputs['name']}": r.urn
        for r in plan.by_type("aws:iam/role:Role")
        if r.inputs.get("name")
    }
    entries = plan.by_type("aws:eks/accessEntry:AccessEntry")
    racing = [
        e.name
        for e in entries
        if e.inputs["principalArn"] in roles and roles[e.inputs["principalArn"]] not in e.dependencies
    ]
    assert racing == []
    if plan.config["role"] == "train" or plan.stack in STACKS:
        assert any(e.inputs["principalArn"] in roles for e in entries)  # the break-glass entry is checked


# -- the load balancer controller changes listeners and rules of its own cluster only ----------------------

LISTENER_ACTIONS = [
    "DeleteListener",
    "DeleteRule",
    "ModifyListener",
    "AddListenerCertificates",
    "RemoveListenerCertificates",
    "ModifyRule",
    "SetRulePriorities",
    "RemoveTags",
]


@pytest.mark.parametrize("stack", [INFER, TRAIN])
def test_the_load_balancer_controller_changes_only_its_clusters_listeners(plans, stack: str) -> None:
    plan = plans[stack]
    iam = PlanIam.of(plan)
    lbc = _principals(iam, plan)["lbc"]
    cluster = plan.one("aws:eks/cluster:Cluster").inputs["name"]
    region = {"aws:RequestedRegion": plan.region}
    listener = f"arn:aws:elasticloadbalancing:{plan.region}:{ACCOUNT_ID}:listener/app/k8s-x/0123/4567"
    rule = f"arn:aws:elasticloadbalancing:{plan.region}:{ACCOUNT_ID}:listener-rule/app/k8s-x/0123/4567/89ab"
    tag = "elbv2.k8s.aws/cluster"

    def decide(action: str, arn: str, tags: dict[str, str], **context: str) -> str:
        target = Target(arn, "elb", tags=tags)
        return iam_eval.decide(lbc, f"elasticloadbalancing:{action}", target, {**region, **context})

    for action in LISTENER_ACTIONS:
        for arn in (listener, rule):
            assert decide(action, arn, {tag: cluster}) == "allow", (action, arn)
            assert decide(action, arn, {tag: "another-cluster"}) == "implicit", (action, arn)
            assert decide(action, arn, {}) == "implicit", (action, arn)  # a listener not of any controller
    for action in ("CreateListener", "CreateRule"):
        assert decide(action, "*", {}, **{f"aws:RequestTag/{tag}": cluster}) == "allow"
        assert decide(action, "*", {}, **{f"aws:RequestTag/{tag}": "another-cluster"}) == "implicit"
        assert decide(action, "*", {}) == "implicit"
        # tagging on create, as the controller sends it
        create = {f"aws:RequestTag/{tag}": cluster, "elasticloadbalancing:CreateAction": action}
        assert decide("AddTags", listener if action == "CreateListener" else rule, {}, **create) == "allow"
    # no adopting someone else's listener by tagging it
    assert decide("AddTags", listener, {}, **{f"aws:RequestTag/{tag}": cluster}) == "implicit"
    assert decide("AddTags", listener, {tag: cluster}, **{f"aws:RequestTag/{tag}": "x"}) == "implicit"


# -- ... and attaches web ACLs and Shield protections in its own account and region only --------------------

OTHER_ACCOUNT = "210987654321"


@pytest.mark.parametrize("stack", [INFER, TRAIN])
def test_the_load_balancer_controller_attaches_web_acls_in_its_account_and_region_only(
    plans, stack: str
) -> None:
    """What the controller passes (infra/services/documents/lbc_waf_shield.py): its ALB and the web ACL of the
    Ingress's ``wafv2-acl-arn`` annotation (the stack's own with ``waf: create``). WAF evaluates no tag on a
    load balancer, so the bound is the account and region; the web ACL it may associate is the stack's own
    (infra/inference/wire.py ``lbc_web_acls``)."""
    plan = plans[stack]
    lbc = _principals(PlanIam.of(plan), plan)["lbc"]
    region = {"aws:RequestedRegion": plan.region}
    asked = [
        acl
        for r in plan.resources
        if r.type == "kubernetes:networking.k8s.io/v1:Ingress"
        for acl in [((r.inputs.get("metadata") or {}).get("annotations") or {}).get(WAF_ANNOTATION)]
        if acl
    ]
    assert bool(asked) == (stack == INFER)  # the infer stack attaches its own web ACL (waf: create)
    acl = asked[0] if asked else f"arn:aws:wafv2:{plan.region}:{ACCOUNT_ID}:regional/webacl/x/0123"
    alb = f"arn:aws:elasticloadbalancing:{plan.region}:{ACCOUNT_ID}:loadbalancer/app/k8s-x/0123"
    elsewhere = [
        alb.replace(ACCOUNT_ID, OTHER_ACCOUNT),
        alb.replace(plan.region, "eu-west-1"),
        acl.replace(ACCOUNT_ID, OTHER_ACCOUNT),
        acl.replace(plan.region, "eu-west-1"),
    ]

    def decide_(action: str, arn: str) -> str:
        return decide(lbc, action, Target(arn, "waf"), region)

    # the infer stack's own web ACL, and no other: not another of its account and region; the train stack
    # names none, so it associates none
    another = acl.replace("/webacl/", "/webacl/another-")
    if stack == INFER:
        assert decide_("wafv2:AssociateWebACL", alb) == decide_("wafv2:AssociateWebACL", acl) == "allow"
    else:
        assert decide_("wafv2:AssociateWebACL", alb) == decide_("wafv2:AssociateWebACL", acl) == "implicit"
    for arn in [*elsewhere, another]:
        assert decide_("wafv2:AssociateWebACL", arn) == "implicit", arn
    for action in ("wafv2:DisassociateWebACL", "wafv2:GetWebACLForResource"):
        assert decide_(action, alb) == "allow", action
        assert decide_(action, elsewhere[0]) == decide_(action, elsewhere[1]) == "implicit", action
    protection = f"arn:aws:shield::{ACCOUNT_ID}:protection/0123"
    assert decide_("shield:DeleteProtection", protection) == "allow"
    assert decide_("shield:DeleteProtection", protection.replace(ACCOUNT_ID, OTHER_ACCOUNT)) == "implicit"
