"""Container logs over every stack's plan: one encrypted group per collected namespace with the configured
retention, a collector role that may write only to those groups (IAM's matching over the planned policy,
against the planned groups), a logs key that lets CloudWatch Logs encrypt them, a collector that tolerates
every taint the stack's nodes carry, and roles trusted by exactly the service accounts the charts create."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.core.lognames import container_log_group
from infra.logs import documents as docs
from infra.monitoring import documents as mon
from infra.plan.runner import Plan, RecordedResource
from infra.queueing.names import team_namespace
from tests.conftest import EXAMPLES, STACKS
from tests.infra.logs.test_documents import allowed, iam_match
from tests.support.kubernetes import tolerates

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
POLICY = "aws:iam/policy:Policy"
ROLE = "aws:iam/role:Role"
RELEASE = "kubernetes:helm.sh/v3:Release"
TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def container_groups(plan: Plan) -> dict[str, RecordedResource]:
    """The plan's container log groups by name (those under the C4 prefix of the stack's cluster)."""
    prefix = container_log_group(cluster_name(plan), "")
    return {r.inputs["name"]: r for r in plan.by_type(LOG_GROUP) if r.inputs["name"].startswith(prefix)}


def cluster_name(plan: Plan) -> str:
    (group,) = [
        r.inputs["name"]
        for r in plan.by_type(LOG_GROUP)
        if r.inputs["name"].endswith("/containers/kube-system")
    ]
    return group.split("/")[2]


def arn(plan: Plan, group: str) -> str:
    return f"arn:aws:logs:{plan.region}:123456789012:log-group:{group}"


def policy(plan: Plan, name: str) -> dict[str, Any]:
    return json.loads(plan.one(POLICY, name).inputs["policy"])


def planned_namespaces(plan: Plan) -> set[str]:
    """Every namespace the plan creates or installs a chart into (the controllers' included)."""
    created = {r.inputs["metadata"]["name"] for r in plan.by_type("kubernetes:core/v1:Namespace")}
    return created | {r.inputs["namespace"] for r in plan.by_type(RELEASE)}


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_of_the_stack_ships_its_logs(plan_stack, stack: str) -> None:
    """The issue's case: cert-manager, kueue-system, kubeflow-system (and KEDA's) ran without a log group or
    a Fluent Bit path, so a controller's errors were gone with its pod."""
    plan = plan_stack(stack)
    namespaces = {g.rsplit("/", 1)[1] for g in container_groups(plan)}
    assert planned_namespaces(plan) <= namespaces, planned_namespaces(plan) - namespaces


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_namespace_of_an_example_ships_its_logs(plan_example, example: str) -> None:
    plan = plan_example(example)
    if plan.config["cluster_services"].get("kubernetes_access") == "skip":
        return  # no Kubernetes objects, no collector
    namespaces = {g.rsplit("/", 1)[1] for g in container_groups(plan)}
    assert planned_namespaces(plan) <= namespaces, planned_namespaces(plan) - namespaces


@pytest.mark.parametrize("stack", STACKS)
def test_one_encrypted_group_per_namespace_with_the_configured_retention(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    groups = container_groups(plan)
    namespaces = {g.rsplit("/", 1)[1] for g in groups}
    assert {"kube-system", "monitoring", "inference"} <= namespaces
    if plan.config["role"] == "train":
        assert plan.config["storage"]["trainer"]["namespace"] in namespaces
    key = plan.one("aws:kms/key:Key", "kms-logs")
    for r in groups.values():
        assert r.inputs["retentionInDays"] == plan.config["logs"]["retention_days"]
        assert r.property_dependencies["kmsKeyId"] == [key.urn]


@pytest.mark.parametrize("stack", STACKS)
def test_collector_policy_admits_only_the_planned_groups(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    writer = policy(plan, "logs-collector-policy")
    planned = [arn(plan, g) for g in container_groups(plan)]
    for group in planned:
        assert allowed(writer, "logs:PutLogEvents", f"{group}:log-stream:pod.container")
        assert allowed(writer, "logs:CreateLogStream", f"{group}:*")
    # every other log group the plan declares (control plane, flow logs, sessions...) stays out
    others = [
        arn(plan, r.inputs["name"])
        for r in plan.by_type(LOG_GROUP)
        if arn(plan, r.inputs["name"]) not in planned
    ]
    assert others
    for group in others:
        assert not allowed(writer, "logs:PutLogEvents", f"{group}:log-stream:x"), group
    # one pattern covers them: the document does not grow with the namespaces (teams)
    assert [len(st["Resource"]) for st in writer["Statement"]] == [1]


@pytest.mark.parametrize("stack", STACKS)
def test_logs_key_lets_cloudwatch_encrypt_the_groups(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    key_policy = json.loads(plan.one("aws:kms/key:Key", "kms-logs").inputs["policy"])
    (st,) = [s for s in key_policy["Statement"] if s.get("Sid") == "CloudWatchLogsUsesKey"]
    assert st["Principal"] == {"Service": f"logs.{plan.region}.amazonaws.com"}
    patterns = st["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    for group in container_groups(plan):
        assert any(iam_match(p, arn(plan, group)) for p in patterns), group


def release_values(plan: Plan, release: str) -> dict[str, Any]:
    (r,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == release]
    return r.inputs["values"]


@pytest.mark.parametrize("stack", STACKS)
def test_collector_tolerates_every_taint_of_the_stacks_nodes(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    tolerations = release_values(plan, docs.RELEASE)["tolerations"]
    taints = [
        (t["key"], t.get("value", ""), TAINT_EFFECTS[t["effect"]])
        for ng in plan.by_type("aws:eks/nodeGroup:NodeGroup")
        for t in ng.inputs.get("taints") or []
    ]
    taints += [
        (t["key"], t.get("value", ""), t["effect"])
        for pool in plan.by_type("kubernetes:karpenter.sh/v1:NodePool")
        for t in pool.inputs["spec"]["template"]["spec"].get("taints") or []
    ]
    assert any(key == "nvidia.com/gpu" for key, _, _ in taints)
    for key, value, effect in taints:
        assert tolerates(tolerations, key, value, effect), (key, value, effect)


def trusted_subject(role: RecordedResource) -> str:
    (st,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    (sub,) = [v for k, v in st["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    return sub


@pytest.mark.parametrize("stack", STACKS)
def test_roles_are_trusted_by_the_service_accounts_the_charts_create(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    fluent = release_values(plan, docs.RELEASE)["serviceAccount"]
    kps = release_values(plan, mon.KPS_RELEASE)["grafana"]["serviceAccount"]
    collector_role = plan.one(ROLE, "logs-collector-role")
    grafana_role = plan.one(ROLE, "logs-grafana-role")
    # each role trusts the service account its chart creates, in the namespace the chart is installed in
    (chart,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == docs.RELEASE]
    (stack_chart,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == mon.KPS_RELEASE]
    ns, kps_ns = chart.inputs["namespace"], stack_chart.inputs["namespace"]
    assert trusted_subject(collector_role) == f"system:serviceaccount:{ns}:{fluent['name']}"
    assert trusted_subject(grafana_role) == f"system:serviceaccount:{kps_ns}:{kps['name']}"
    # the annotations carry the roles' ARNs (their resources feed the values)
    assert collector_role.urn in chart.property_dependencies["values"]
    assert grafana_role.urn in stack_chart.property_dependencies["values"]


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_scrapes_the_collector_and_alerts_on_it(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    values = release_values(plan, docs.RELEASE)
    (pm,) = [
        r
        for r in plan.by_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
        if r.inputs["metadata"]["name"] == docs.JOB
    ]
    assert pm.inputs["metadata"]["labels"][mon.SELECT_LABEL[0]] == mon.SELECT_LABEL[1]
    # it selects the chart's pods (selector labels: name = chart name, instance = release name)
    assert pm.inputs["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "fluent-bit",
        "app.kubernetes.io/instance": values["fullnameOverride"],
    }
    assert pm.inputs["spec"]["podMetricsEndpoints"][0]["port"] == "http"  # the chart's container port name
    rules = [
        r
        for r in plan.by_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
        if r.inputs["metadata"]["name"] == "aiplat-logs"
    ]
    assert len(rules) == 1


@pytest.mark.parametrize("stack", STACKS)
def test_grafana_gets_the_data_source_and_the_run_dashboard_reads_the_runs_groups(
    plan_stack, stack: str
) -> None:
    plan = plan_stack(stack)
    configmaps = {
        r.inputs["metadata"]["name"]: r.inputs for r in plan.by_type("kubernetes:core/v1:ConfigMap")
    }
    kps = release_values(plan, mon.KPS_RELEASE)["grafana"]
    source = configmaps["aiplat-datasource-cloudwatch"]
    # the label Grafana's sidecar loads data sources by (kube-prometheus-stack values, left at its default)
    assert source["metadata"]["labels"][docs.DATASOURCE_LABEL[0]] == docs.DATASOURCE_LABEL[1]
    assert "datasources" not in kps.get("sidecar", {})
    (provisioning,) = source["data"].values()
    (ds,) = json.loads(provisioning)["datasources"]
    assert ds["type"] == "cloudwatch" and ds["jsonData"]["defaultRegion"] == plan.region
    board = configmaps.get("aiplat-dashboard-run")
    if plan.config["role"] != "train":
        assert board is None  # no run to show on an infer stack
        return
    (text,) = board["data"].values()
    (logs_panel,) = [p for p in json.loads(text)["panels"] if p["datasource"]["type"] == "cloudwatch"]
    assert logs_panel["datasource"]["uid"] == ds["uid"]
    # a run's pods are in the trainer namespace or in a team's
    run_namespaces = [plan.config["storage"]["trainer"]["namespace"]] + [
        team_namespace(team, c.get("namespace")) for team, c in plan.config.get("teams", {}).items()
    ]
    run_groups = sorted(container_log_group(cluster_name(plan), ns) for ns in run_namespaces)
    assert set(run_groups) <= set(container_groups(plan))
    # the panel reads the group picked among the run namespaces' groups, one at a time (StartQuery takes 50)
    (picked,) = logs_panel["targets"][0]["logGroups"]
    (pick,) = [v for v in json.loads(text)["templating"]["list"] if picked["arn"] == f"${v['name']}"]
    assert sorted(o["text"] for o in pick["options"]) == run_groups
    assert all(o["value"] == arn(plan, o["text"]) for o in pick["options"])
