"""Issue 24, audit records that hold, on every plan (stacks/ and examples/): run records nobody rewrites or
removes, the inference ALB's access logs and the web ACL's request logs.

Each test is a line of docs/platform/security.md ("What an audit record holds and who can change it"),
checked on what the real program registered.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

import pytest

from infra.core import iam
from infra.inference.documents import alb
from infra.plan.runner import Plan, RecordedResource
from infra.storage import documents as storage_docs
from tests.conftest import EXAMPLES, STACKS
from tests.support.config_cases import SCHEMA, assert_refused

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
INFER = [f"stacks/{s}" for s in STACKS if s.endswith("-infer")]


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _statements(r: RecordedResource) -> list[dict[str, Any]]:
    return json.loads(r.inputs["policy"])["Statement"]


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _denied(statements: list[dict[str, Any]], action: str, arn: str, headers: set[str]) -> bool:
    """Whether a Deny statement of ``statements`` applies to ``action`` on the object ``arn`` sent with
    ``headers`` (request condition keys present). IAM semantics for what these statements use: ``*`` in an
    ARN matches across ``/``; ``Null: {key: "true"}`` holds when the key is absent."""
    for st in statements:
        if st["Effect"] != "Deny" or not any(fnmatchcase(action, a) for a in _listed(st["Action"])):
            continue
        if not any(fnmatchcase(arn, r) for r in _listed(st["Resource"])):
            continue
        condition = st.get("Condition", {})
        assert set(condition) <= {"Null"}, f"{st['Sid']}: a condition this check cannot evaluate"
        if all((k not in headers) == (v == "true") for k, v in condition.get("Null", {}).items()):
            return True
    return False


def _allowed(statements: list[dict[str, Any]], action: str, arn: str) -> bool:
    return any(
        st["Effect"] == "Allow"
        and any(fnmatchcase(action, a) for a in _listed(st["Action"]))
        and any(fnmatchcase(arn, r) for r in _listed(st["Resource"]))
        for st in statements
    )


def _record_rules(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The statements that could bear on a run record (ours and every Deny: an unrelated Deny with a TLS
    or encryption condition is not what this checks)."""
    return [st for st in statements if st.get("Sid", "").startswith("RunRecords")]


def test_the_record_folder_is_the_trainers() -> None:
    from trainer.run import runrecord

    assert iam.RUN_RECORDS == runrecord.PREFIX


def _writer_roles(plan: Plan) -> dict[str, RecordedResource]:
    """The trainer's and every team's role policy (the roles that run training jobs)."""
    return {
        r.name: r
        for r in plan.by_type("aws:iam/rolePolicy:RolePolicy")
        if r.name == "pod-roles-trainer-policy"
        or r.name in {f"team-{t}-role-policy" for t in plan.config.get("teams", {})}
    }


@pytest.mark.parametrize("stack", ALL)
def test_training_roles_create_records_once_and_never_delete_them(plans, stack: str) -> None:
    plan = plans[stack]
    roles = _writer_roles(plan)
    if plan.config["role"] != "train" or plan.config["storage"]["backend"] != "s3":
        assert roles == {}
        return
    assert "pod-roles-trainer-policy" in roles
    if plan.config.get("teams"):
        assert {f"team-{t}-role-policy" for t in plan.config["teams"]} <= set(roles)
    for name, role in roles.items():
        statements = _statements(role)
        # a record under a run's prefix the role writes: the role's own ReadWrite grant names the prefix
        [grant] = [st for st in statements if st["Sid"] in ("ReadWriteOwnPrefix", "ReadWriteOwnCheckpoints")]
        for pattern in grant["Resource"]:
            run = pattern.removesuffix("*") + "run1/"
            record = f"{run}{iam.RUN_RECORDS}/attempt-1.end.json"
            checkpoint = f"{run}step_000000002/shard-0"
            assert _allowed(statements, "s3:PutObject", record), name
            rules = _record_rules(statements)
            assert not _denied(rules, "s3:PutObject", record, {"s3:if-none-match"}), name  # create: yes
            assert _denied(rules, "s3:PutObject", record, set()), name  # replace: no
            assert _denied(rules, "s3:DeleteObject", record, set()), name
            assert _denied(rules, "s3:DeleteObjectVersion", record, set()), name
            # checkpoints stay as writable as before
            assert not _denied(rules, "s3:PutObject", checkpoint, set()), name
            assert not _denied(rules, "s3:DeleteObject", checkpoint, set()), name


@pytest.mark.parametrize("stack", ALL)
def test_every_data_bucket_keeps_run_records_for_every_caller(plans, stack: str) -> None:
    plan = plans[stack]
    data = [
        p
        for p in plan.by_type("aws:s3/bucketPolicy:BucketPolicy")
        if p.name.endswith(("-datasets-policy", "-checkpoints-policy", "-artifacts-policy"))
    ]
    if plan.config["role"] != "train" or plan.config["storage"]["backend"] != "s3":
        assert data == []
        return
    assert {p.name for p in data} >= {f"storage-{b}-policy" for b in ("datasets", "checkpoints", "artifacts")}
    for p in data:
        statements = _statements(p)
        rules = _record_rules(statements)
        assert rules and all(st["Principal"] == "*" for st in rules), p.name
        bucket = _listed(rules[0]["Resource"])[0].split("/", 1)[0]
        for key in (f"team-a/run1/{iam.RUN_RECORDS}/x.start.json", f"{iam.RUN_RECORDS}/x.end.json"):
            assert _denied(rules, "s3:PutObject", f"{bucket}/{key}", set()), p.name
            assert not _denied(rules, "s3:PutObject", f"{bucket}/{key}", {"s3:if-none-match"}), p.name
            assert _denied(rules, "s3:DeleteObjectVersion", f"{bucket}/{key}", set()), p.name
        assert not _denied(rules, "s3:DeleteObject", f"{bucket}/team-a/run1/step_000000002/x", set())


def _source_plan(plans: dict[str, Plan], plan: Plan) -> Plan:
    return plans[f"stacks/{plan.config['storage']['source_stack']}"]


@pytest.mark.parametrize("stack", INFER)
def test_the_alb_logs_to_its_regions_access_log_bucket(plans, stack: str) -> None:
    plan = plans[stack]
    [ingress] = plan.by_type("kubernetes:networking.k8s.io/v1:Ingress")
    ann = ingress.inputs["metadata"]["annotations"]
    attrs = dict(kv.split("=") for kv in ann[alb.PREFIX + "load-balancer-attributes"].split(","))
    source = _source_plan(plans, plan)
    replica = source.outputs["artifactReplicas"][plan.region]
    assert attrs["access_logs.s3.enabled"] == "true"
    assert attrs["access_logs.s3.bucket"] == replica["accessLogBucket"]
    assert plan.region in replica["accessLogBucket"]  # an ALB logs only to a bucket of its own Region
    prefix = attrs["access_logs.s3.prefix"]
    # the train stack's policy of that bucket lets the Region's load balancers write under the prefix
    [policy] = [
        p
        for p in source.by_type("aws:s3/bucketPolicy:BucketPolicy")
        if p.name == f"replication-{plan.region}-access-logs-policy"
    ]
    [grant] = [st for st in _statements(policy) if st.get("Sid") == "LoadBalancerAccessLogs"]
    account = replica["keyArn"].split(":")[4]
    key = (
        f"arn:aws:s3:::{replica['accessLogBucket']}/{prefix}/AWSLogs/{account}/elasticloadbalancing/x.log.gz"
    )
    assert any(fnmatchcase(key, r) for r in grant["Resource"]) and grant["Action"] == "s3:PutObject"
    elb = storage_docs.ELB_LOG_ACCOUNTS[plan.region]  # Hong Kong and Singapore predate August 2022
    assert grant["Principal"] == {"AWS": f"arn:aws:iam::{elb}:root"}


@pytest.mark.parametrize("stack", ALL)
def test_web_acl_request_logs_encrypted_kept_and_without_keys(plans, stack: str) -> None:
    plan = plans[stack]
    acls = plan.by_type("aws:wafv2/webAcl:WebAcl")
    logging = plan.by_type("aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration")
    assert len(logging) == len(acls)  # every web ACL the stack creates logs
    if not acls:
        return
    [conf] = logging
    https = plan.config["inference"]["https"]
    [group] = [
        g
        for g in plan.by_type("aws:cloudwatch/logGroup:LogGroup")
        if g.inputs["name"].startswith("aws-waf-logs-")
    ]
    assert group.inputs["retentionInDays"] == https["waf_log_retention_days"]
    logs_key = plan.outputs["kmsKeyArns"]["logs"]
    assert group.inputs["kmsKeyId"] == logs_key
    assert conf.inputs["redactedFields"] == [{"singleHeader": {"name": "authorization"}}]
    assert conf.inputs["resourceArn"].split("/")[-2] == acls[0].inputs["name"]
    # the logs key lets CloudWatch Logs encrypt that group (else the group cannot be created)
    [key] = [k for k in plan.by_type("aws:kms/key:Key") if k.name == "kms-logs"]
    groups = [
        arn
        for st in json.loads(key.inputs["policy"])["Statement"]
        for arn in st.get("Condition", {}).get("ArnLike", {}).get("kms:EncryptionContext:aws:logs:arn", [])
    ]
    assert any(arn.endswith(f":log-group:{group.inputs['name']}") for arn in groups)


def test_elb_log_principal_by_region() -> None:
    old = storage_docs.load_balancer_log_delivery(
        "arn:aws:s3:::b", account_id="123456789012", region="ap-east-1"
    )
    assert old["Principal"] == {"AWS": "arn:aws:iam::754344448648:root"}
    assert old["Resource"] == ["arn:aws:s3:::b/alb/*/AWSLogs/123456789012/*"]
    sg = storage_docs.load_balancer_log_delivery("arn:aws:s3:::b", account_id="1", region="ap-southeast-1")
    assert sg["Principal"] == {"AWS": "arn:aws:iam::114774131450:root"}
    # a Region opened after August 2022 (Malaysia, 2024): the log delivery service principal
    new = storage_docs.load_balancer_log_delivery("arn:aws:s3:::b", account_id="1", region="ap-southeast-5")
    assert new["Principal"] == {"Service": "logdelivery.elasticloadbalancing.amazonaws.com"}


def test_a_waf_log_retention_cloudwatch_lacks_is_refused_naming_the_field(stack_config, monitors) -> None:
    raw = stack_config("prod-hk-infer")
    raw["inference"]["https"]["waf_log_retention_days"] = 45
    assert_refused(
        raw,
        "aiplat:platform.inference.https.waf_log_retention_days: 45 is not a CloudWatch Logs retention "
        "period; fix: use e.g. 30",
        monitors,
        SCHEMA,
    )
