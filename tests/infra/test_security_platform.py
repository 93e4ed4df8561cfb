"""Issue 24 on every plan (stacks/ and examples/): IAM documents that grant what they claim, key guards
nobody but break-glass can rewrite, narrowed upstream permissions, admission policies in the cluster.

Each test is a line of docs/platform/security.md, checked on what the real program registered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _statements(r: RecordedResource, key: str = "policy") -> list[dict[str, Any]]:
    return json.loads(r.inputs[key])["Statement"]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[str]:
    res = statement.get("Resource", [])
    return [res] if isinstance(res, str) else list(res)


# -- item 7: IAM documents that grant what they claim ---------------------------------------------------

# Actions that have no resource-level permission: a statement naming them must have Resource "*", or AWS
# never grants them (Service Authorization Reference, "Resource types" column empty).
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html
STAR_ONLY = {"logs:DescribeLogGroups"}
# Actions whose requests carry no s3:prefix: a statement granting them under an s3:prefix condition never
# matches (the key is absent, StringLike on an absent key is false).
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
NO_PREFIX_KEY = {"s3:ListBucketMultipartUploads"}


def _role_policies(plan: Plan) -> list[RecordedResource]:
    return plan.by_type("aws:iam/rolePolicy:RolePolicy") + plan.by_type("aws:iam/policy:Policy")


@pytest.mark.parametrize("stack", ALL)
def test_star_only_actions_are_granted_on_star(plans, stack: str) -> None:
    seen = []
    for doc in _role_policies(plans[stack]):
        for st in _statements(doc):
            for action in set(_actions(st)) & STAR_ONLY:
                if st["Effect"] == "Allow":
                    seen.append(doc.name)
                    assert _resources(st) == ["*"], (doc.name, action, st)
    assert "network-flow-logs-policy" in seen


@pytest.mark.parametrize("stack", ALL)
def test_no_action_under_a_condition_key_its_request_lacks(plans, stack: str) -> None:
    seen = []
    for doc in _role_policies(plans[stack]):
        for st in _statements(doc):
            for action in set(_actions(st)) & NO_PREFIX_KEY:
                seen.append(doc.name)
                keys = {k for cond in st.get("Condition", {}).values() for k in cond}
                assert "s3:prefix" not in keys, (doc.name, action, st)
    trains = plans[stack].config["role"] == "train" and plans[stack].config["storage"]["backend"] == "s3"
    assert bool(seen) == trains  # the trainer and the publisher list their multipart uploads


def _urn_of(plan: Plan, type_: str, name: str) -> str:
    return plan.one(type_, name).urn


@pytest.mark.parametrize("stack", ALL)
def test_flow_log_waits_for_its_role_policy(plans, stack: str) -> None:
    plan = plans[stack]
    flow = plan.one("aws:ec2/flowLog:FlowLog")
    policy = _urn_of(plan, "aws:iam/rolePolicy:RolePolicy", "network-flow-logs-policy")
    # without it, CreateFlowLogs may run before the role can write and the first deliveries fail
    assert policy in flow.dependencies


@pytest.mark.parametrize("stack", ALL)
def test_key_events_target_waits_for_the_topic_policy(plans, stack: str) -> None:
    plan = plans[stack]
    target = plan.one("aws:cloudwatch/eventTarget:EventTarget", "keyguard-key-events-topic")
    policy = _urn_of(plan, "aws:sns/topicPolicy:TopicPolicy", "keyguard-alerts-policy")
    assert policy in target.dependencies


# -- item 3: keys nobody but break-glass (and the deployer) can rewrite ------------------------------------


def _by_sid(r: RecordedResource, key: str = "policy") -> dict[str, dict[str, Any]]:
    return {s.get("Sid", str(i)): s for i, s in enumerate(_statements(r, key))}


def _protected(plan: Plan) -> bool:
    sec = plan.config["security"]
    return sec["protect"] if sec["protect"] is not None else plan.config["environment"] == "prod"


@pytest.mark.parametrize("stack", ALL)
def test_only_break_glass_and_the_deployer_change_key_policies(plans, stack: str) -> None:
    plan = plans[stack]
    glass = plan.outputs["keyRoles"]["breakGlass"]
    deployer = plan.config["security"]["account"]["deployer_role"]
    for key in plan.by_type("aws:kms/key:Key"):
        st = _by_sid(key)
        if not _protected(plan):
            assert "OnlyBreakGlassAndDeployerChangePolicy" not in st
            continue
        deny = st["OnlyBreakGlassAndDeployerChangePolicy"]
        assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
        assert deny["Action"] == ["kms:PutKeyPolicy"]
        assert deny["Condition"] == {
            "ArnNotEquals": {"aws:PrincipalArn": [glass, f"arn:aws:iam::123456789012:role/{deployer}"]}
        }
    admin = plan.one("aws:iam/rolePolicy:RolePolicy", "keyguard-key-admin-policy")
    actions = {a for s in _statements(admin) for a in _actions(s)}
    assert not [a for a in actions if a in ("kms:*", "kms:Put*", "kms:PutKeyPolicy")], actions


@pytest.mark.parametrize("stack", ALL)
def test_key_roles_trust_named_principals_with_mfa(plans, stack: str) -> None:
    plan = plans[stack]
    sec = plan.config["security"]
    for role, field in (
        ("keyguard-key-admin", "key_admin_principals"),
        ("keyguard-break-glass", "break_glass_principals"),
    ):
        (trust,) = _statements(plan.one("aws:iam/role:Role", role), "assumeRolePolicy")
        assert trust["Action"] == "sts:AssumeRole"
        assert trust["Condition"] == {"Bool": {"aws:MultiFactorAuthPresent": "true"}}
        named = sorted(set(sec[field]))
        if _protected(plan):
            assert named and trust["Principal"] == {"AWS": named}
        else:  # an unprotected stack without names: the account root, still only with MFA
            assert trust["Principal"] == {"AWS": named or ["arn:aws:iam::123456789012:root"]}


@pytest.mark.parametrize("stack", ALL)
def test_eventbridge_uses_the_logs_key_only_for_our_rules(plans, stack: str) -> None:
    plan = plans[stack]
    logs_keys = [k for k in plan.by_type("aws:kms/key:Key") if "EventBridgePublishesAlerts" in _by_sid(k)]
    assert logs_keys
    for key in logs_keys:
        cond = _by_sid(key)["EventBridgePublishesAlerts"]["Condition"]
        assert cond["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        assert cond["ArnLike"] == {"aws:SourceArn": f"arn:aws:events:{plan.region}:123456789012:rule/*"}
    # and the rules that publish to the topic are such rules
    topic_policy = plan.one("aws:sns/topicPolicy:TopicPolicy", "keyguard-alerts-policy")
    (publish,) = _statements(topic_policy)
    rules = {
        r.inputs["name"]
        for r in plan.by_type("aws:cloudwatch/eventRule:EventRule")
        if r.name.startswith("keyguard-")
    }
    assert sorted(publish["Condition"]["ArnEquals"]["aws:SourceArn"]) == sorted(
        f"arn:aws:events:{plan.region}:123456789012:rule/{n}" for n in rules
    )


def test_a_protected_stack_must_name_its_key_guards(stack_config) -> None:
    from infra.plan.runner import run_plan
    from infra.schema.parse import parse_platform_config

    raw = stack_config("dev-us-train")
    raw["security"] = {"protect": True}
    with pytest.raises(Exception) as info:
        run_plan("dev-protected", parse_platform_config(raw))
    message = str(info.value)
    assert (
        "aiplat:platform.security.account.deployer_role: is not set, but the key policies of a protected "
        in message
    )
    assert "aiplat:platform.security.key_admin_principals: is empty on a protected stack" in message
    assert "aiplat:platform.security.break_glass_principals: is empty on a protected stack" in message


# -- item 6: what upstream leaves wide, narrowed ------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_load_balancer_controller_is_scoped_to_its_cluster_and_region(plans, stack: str) -> None:
    from infra.services.documents.lbc_iam import POLICY

    plan = plans[stack]
    docs = [p for p in plan.by_type("aws:iam/policy:Policy") if p.name.startswith("lbc-iam-policy")]
    services = plan.config["cluster_services"]
    if not services["load_balancer_controller"]["enabled"] or services["kubernetes_access"] == "skip":
        assert not docs
        return
    assert sorted(d.name for d in docs) == ["lbc-iam-policy", "lbc-iam-policy-elb"]
    cluster = plan.outputs["clusterName"]
    statements = [st for doc in docs for st in _statements(doc)]
    # every upstream action is still granted (the controller keeps working), nothing more; but a stack whose
    # Ingress names no web ACL (train stacks, waf: off) associates none (infra/inference/wire.py lbc_web_acls)
    granted = sorted({a for s in statements for a in _actions(s)})
    serving = plan.config.get("inference") if plan.config["role"] == "infer" else None
    names_acl = serving is not None and serving["https"]["waf"] in ("create", "arn")
    upstream = {a for s in POLICY["Statement"] for a in _actions(s)}
    assert granted == sorted(upstream if names_acl else upstream - {"wafv2:AssociateWebACL"})
    for st in statements:
        actions = _actions(st)
        cond = st.get("Condition", {})
        # no statement accepts any value of the cluster tag: only this cluster's
        for key, value in cond.get("Null", {}).items():
            assert not (key.endswith("Tag/elbv2.k8s.aws/cluster") and value == "false"), st
        for key, value in cond.get("StringEquals", {}).items():
            if key.endswith("Tag/elbv2.k8s.aws/cluster"):
                assert value == cluster
        if all(a.startswith(("ec2:", "elasticloadbalancing:")) for a in actions):
            assert cond["StringEquals"]["aws:RequestedRegion"] == plan.region, st
            for arn in _resources(st):
                assert arn == "*" or f":{plan.region}:123456789012:" in arn, st
        # web ACL associations on this account's and region's ALBs and web ACLs (WAF takes no tag)
        if any(a.startswith(("wafv2:", "waf-regional:")) for a in actions):
            assert all(f":{plan.region}:123456789012:" in arn for arn in _resources(st)), st
        # security-group ingress only on this cluster's groups (its own, or the node group it opens)
        if "ec2:AuthorizeSecurityGroupIngress" in actions:
            tagged = cond["StringEquals"].get("aws:ResourceTag/elbv2.k8s.aws/cluster") == cluster
            nodes = cond.get("Null") == {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "false"}
            assert tagged or nodes, st


@pytest.mark.parametrize("stack", ALL)
def test_grafana_reads_secrets_only_in_its_namespace(plans, stack: str) -> None:
    plan = plans[stack]
    releases = [
        r
        for r in plan.by_type("kubernetes:helm.sh/v3:Release")
        if r.inputs.get("chart") == "kube-prometheus-stack"
    ]
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        assert not releases
        return
    (kps,) = releases
    grafana = kps.inputs["values"]["grafana"]
    # grafana chart 12.11.1: namespaced -> a Role in the release namespace, no ClusterRole
    assert grafana["rbac"]["namespaced"] is True and not grafana["rbac"].get("extraClusterRoleRules")
    for sidecar in grafana["sidecar"].values():
        assert sidecar.get("searchNamespace") in (None, ["{{ .Release.Namespace }}"]), sidecar


# -- item 4 (infra side): what the run record holds -------------------------------------------------------


def test_runtime_env_names_are_the_run_records(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.training.documents import runtime
    from trainer.run import runrecord

    assert runtime.IMAGE_DIGEST_ENV == runrecord.IMAGE_DIGEST_ENV
    monkeypatch.setenv(runtime.NODE_NAME_ENV, "ip-10-20-1-7.ec2.internal")
    assert runrecord.node_name() == "ip-10-20-1-7.ec2.internal"


@pytest.mark.parametrize("stack", ALL)
def test_every_training_pod_knows_its_image_digest_and_node(plans, stack: str) -> None:
    plan = plans[stack]
    runtimes = plan.by_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")
    assert bool(runtimes) == (
        plan.config["role"] == "train"
        and plan.config.get("training") is not None
        and (plan.config["cluster_services"]["kubernetes_access"] != "skip")
    )
    for rt in runtimes:
        for job in rt.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            for container in pod["containers"]:
                env = {e["name"]: e for e in container["env"]}
                image = container["image"]
                assert env["AIPLAT_IMAGE_DIGEST"]["value"] == image.split("@", 1)[1]
                assert env["AIPLAT_IMAGE_DIGEST"]["value"].startswith("sha256:")
                assert env["NODE_NAME"] == {
                    "name": "NODE_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                }


@pytest.mark.parametrize("stack", ALL)
def test_prod_keeps_audit_logs_a_year_and_trail_logs_in_compliance(plans, stack: str) -> None:
    plan = plans[stack]
    prod = plan.config["environment"] == "prod"
    group = plan.one("aws:cloudwatch/logGroup:LogGroup", "cluster-control-plane-logs")
    assert group.inputs["retentionInDays"] == (
        plan.config["cluster"]["log_retention_days"] or (365 if prod else 90)
    )
    if prod:
        assert group.inputs["retentionInDays"] >= 365
    for lock in plan.by_type("aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration"):
        mode = lock.inputs["rule"]["defaultRetention"]["mode"]
        assert mode == (
            plan.config["security"]["audit"]["object_lock_mode"] or ("COMPLIANCE" if prod else "GOVERNANCE")
        )


def test_a_prod_cluster_keeping_its_audit_log_less_than_a_year_is_refused(stack_config) -> None:
    from infra.rules import Phase, RuleContext, run_rules
    from infra.schema.parse import parse_platform_config

    raw = stack_config("prod-us-train")
    raw["cluster"]["log_retention_days"] = 90
    findings = [
        f
        for f in run_rules(Phase.plan, RuleContext(parse_platform_config(raw)))
        if f.rule == "eks-audit-logs-kept-a-year-in-prod"
    ]
    assert [f.one_line() for f in findings] == [
        "aiplat:platform.cluster.log_retention_days: 90 days is less than the 365 days a prod cluster keeps "
        "its audit log; fix: set it to 365 or more (a CloudWatch Logs retention value), or leave it unset"
    ]
