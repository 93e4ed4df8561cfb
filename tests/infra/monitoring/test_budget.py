"""Team budgets end to end without a cluster: the config, the group of series generated from it (run under
promtool with the cost rules), the Alertmanager routes to a team's receiver, the budget hold's decisions on
ClusterQueues as the API server returns them (the planned queue, with the CRD's defaults and a status; every
patched result checked against the Kueue v0.19.2 CRD model), one pass of the hold over real HTTP, and the
hold's objects in the plan (least privilege, the CronJob) and ``aiplat train why``'s words."""

from __future__ import annotations

import copy
import http.server
import importlib.util
import json
import shutil
import subprocess
import sys
import threading
import urllib.error
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from infra.jobs import why
from infra.monitoring import documents as mon
from infra.plan.runner import Plan
from infra.queueing.names import cluster_queue
from tests.conftest import assert_rejected
from tests.k8s.crds.kueue import ClusterQueueSpec
from tests.support.fake_kube import merge_patch

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "infra" / "monitoring" / "rules"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
CRONJOB = "kubernetes:batch/v1:CronJob"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
# A Prometheus HTTP API answer to /api/v1/query?query=aiplat:team_budget:spent_ratio, in the format of
# https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries (vector result).
PROMETHEUS_ANSWER = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {
                "metric": {
                    "__name__": "aiplat:team_budget:spent_ratio",
                    "team": "research",
                    "on_exhausted": "hold",
                },
                "value": [1796601600.0, "1.0417"],
            },
            {
                "metric": {
                    "__name__": "aiplat:team_budget:spent_ratio",
                    "team": "vision",
                    "on_exhausted": "hold",
                },
                "value": [1796601600.0, "0.42"],
            },
        ],
    },
}


def test_the_script_carries_the_platforms_annotation_names() -> None:
    """The script runs alone in the cluster: it keeps its own copy of the names `aiplat train why` reads."""
    from infra.core.labels import BUDGET_EXEMPT_ANNOTATION, BUDGET_HOLD_ANNOTATION

    assert (hold.HOLD_ANNOTATION, hold.EXEMPT_ANNOTATION) == (
        BUDGET_HOLD_ANNOTATION,
        BUDGET_EXEMPT_ANNOTATION,
    )


def load_hold() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "budget_hold", REPO / "infra" / "monitoring" / "budget" / "budget_hold.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


hold = load_hold()
MONTH = "2026-12"


@pytest.fixture(scope="module")
def prod(plan_stack) -> Plan:
    return plan_stack("prod-us-train")


@pytest.fixture(scope="module")
def served_queue(prod: Plan) -> dict[str, Any]:
    """research's ClusterQueue as the API server would return it: the planned object with the CRD's
    default stopPolicy, server metadata and a status."""
    planned = next(r.inputs for r in prod.by_type(KUEUE) if r.inputs["metadata"]["name"] == "team-research")
    obj = copy.deepcopy(planned)
    obj["metadata"].update(
        {"resourceVersion": "48213", "uid": "5c8e6d0e-2f0b-4c1e-9d8a-1f6f0f0d3a11", "generation": 3}
    )
    obj["spec"].setdefault("stopPolicy", "None")
    obj["status"] = {
        "conditions": [
            {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
        ],
        "pendingWorkloads": 2,
        "reservingWorkloads": 1,
    }
    return obj


def with_(
    obj: dict[str, Any], *, policy: str | None = None, annotations: dict[str, str] | None = None
) -> dict:
    out = copy.deepcopy(obj)
    if policy is not None:
        out["spec"]["stopPolicy"] = policy
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    return out


def applied(obj: dict[str, Any], decision: Any) -> dict[str, Any]:
    """The queue after the decision's patch, its spec valid under the Kueue CRD model."""
    result = merge_patch(obj, decision.patch) if decision.patch else obj
    ClusterQueueSpec.model_validate(result["spec"])
    return result


# -- config ------------------------------------------------------------------------------------------------


def test_budget_config_refusals(stack_config) -> None:
    raw = stack_config("prod-us-train")
    assert_rejected(raw, "teams.research.budget.monthly_usd", 0, ["teams.research.budget.monthly_usd"])
    assert_rejected(raw, "teams.research.budget.alert_at", [0.8, 1.0], ["teams.research.budget.alert_at"])
    assert_rejected(raw, "teams.research.budget.alert_at", [0.5, 0.5], ["names a fraction twice"])
    assert_rejected(
        raw, "teams.research.budget.on_exhausted", "drain", ["teams.research.budget.on_exhausted"]
    )
    assert_rejected(
        raw, "monitoring.prometheus.retention", "30d", ["teams.research.budget needs", "retention", "30d"]
    )
    assert_rejected(raw, "teams.research.receiver", "nobody", ["teams.research.receiver", "'nobody'"])
    assert_rejected(raw, "monitoring.enabled", False, ["teams.research.budget needs monitoring.enabled"])


# -- the generated group with the cost rules, under promtool -----------------------------------------------


def test_generated_group_from_the_stack(prod: Plan) -> None:
    rule = next(
        r.inputs for r in prod.by_type(RULE) if r.inputs["metadata"]["name"] == f"aiplat-{mon.TEAMS_RULES}"
    )
    records = [(r["record"], r["expr"], r["labels"]) for g in rule["spec"]["groups"] for r in g["rules"]]
    budget = prod.config["teams"]["research"]["budget"]
    assert (
        mon.TEAM_BUDGET_USD,
        f"vector({float(budget['monthly_usd'])!r})",
        {"team": "research", "on_exhausted": "hold"},
    ) in records
    assert [
        (e, labels["threshold"]) for name, e, labels in records if name == mon.TEAM_BUDGET_ALERT_RATIO
    ] == [(f"vector({f!r})", f"{f:g}") for f in budget["alert_at"]]
    namespaces = {
        labels["team"]: labels["namespace"] for name, _, labels in records if name == mon.TEAM_NAMESPACE_INFO
    }
    assert namespaces == {t: c["namespace"] or f"team-{t}" for t, c in prod.config["teams"].items()}
    pools = {labels["pool"]: labels for name, _, labels in records if name == mon.POOL_PURCHASE_OPTION_INFO}
    for name, pool in prod.config["node_pools"].items():
        if pool["gpu"]:
            assert pools[name]["purchase_option"] == pool["capacity_type"]


def test_generated_group_drives_the_budget_alerts_under_promtool(tmp_path: Path) -> None:
    """The group team_rules writes, loaded with rules/cost.yaml: 80 % warns, 100 % is exhausted with
    on_exhausted hold, a team under budget stays quiet."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install the Debian package 'prometheus'")
    teams = [
        mon.TeamFacts(
            team="research", namespace="team-research", budget_usd=1000, alert_at=[0.8], on_exhausted="hold"
        ),
        mon.TeamFacts(
            team="vision", namespace="team-vision", budget_usd=100000, alert_at=[0.5], on_exhausted="hold"
        ),
    ]
    (tmp_path / "teams.yaml").write_text(
        yaml.safe_dump(mon.team_rules(teams, {"train": ("capacity_block", True)}))
    )
    shutil.copy(RULES / "cost.yaml", tmp_path / "cost.yaml")
    node = (
        'instance="g1",node="g1",instance_type="p5.48xlarge",region="us-east-1",provider_id="i-1",'
        'arch="amd64",uid="u"'
    )
    series = [
        (f"node_gpu_hourly_cost{{{node}}}", "50x1300"),
        (
            'container_gpu_allocation{namespace="team-research",pod="a",container="node",instance="g1",node="g1",uid="p"}',
            "1x1300",
        ),
        (
            'container_gpu_allocation{namespace="team-vision",pod="b",container="node",instance="g1",node="g1",uid="q"}',
            "1x1300",
        ),
    ]

    def firing(alert: str, **labels: str) -> str:
        every = {
            "alertname": alert,
            "alertstate": "firing",
            "severity": "warning",
            "team": "research",
            **labels,
        }
        return "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in every.items()) + "}"

    test = {
        "rule_files": ["teams.yaml", "cost.yaml"],
        # every minute, as Prometheus evaluates (groups run apart: the generated group's series must be
        # within the 5-minute lookback when the cost group reads them)
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                # ALERTS: the firing alerts' labels (annotations are cost_test.yaml's concern)
                "promql_expr_test": [
                    {"expr": "ALERTS", "eval_time": "15h", "exp_samples": []},
                    {
                        "expr": "ALERTS",
                        "eval_time": "16h",
                        "exp_samples": [
                            {"labels": firing("TeamBudgetThresholdReached", threshold="0.8"), "value": 1}
                        ],
                    },
                    {
                        "expr": "ALERTS",
                        "eval_time": "20h",
                        "exp_samples": [
                            {"labels": firing("TeamBudgetExhausted", on_exhausted="hold"), "value": 1},
                            {"labels": firing("TeamBudgetThresholdReached", threshold="0.8"), "value": 1},
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    for args in (["check", "rules", "teams.yaml"], ["test", "rules", "test.yaml"]):
        result = subprocess.run([promtool, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr


def test_team_routes_and_inhibition() -> None:
    receivers = [mon.Receiver(name="ml-platform", kind="slack", severities=["critical", "warning"])]
    config = mon.alertmanager_config(
        receivers,
        group_wait="30s",
        group_interval="5m",
        repeat_interval="4h",
        team_receivers={"research": "research-chat"},
    )
    routes = config["route"]["routes"]
    team = [r for r in routes if r["receiver"] == "research-chat"]
    assert team == [
        {
            "receiver": "research-chat",
            "matchers": ['team = "research"'],
            "group_by": ["alertname", "cluster", "team"],
            "continue": True,
        }
    ]
    # the team route comes before the severity routes, and lets them have the alert too
    assert routes.index(team[0]) < next(i for i, r in enumerate(routes) if r["receiver"] == "ml-platform")
    assert {
        "source_matchers": ['alertname = "TeamBudgetExhausted"'],
        "target_matchers": ['alertname = "TeamBudgetThresholdReached"'],
        "equal": ["cluster", "team"],
    } in config["inhibit_rules"]


# -- the hold's decisions on ClusterQueues -----------------------------------------------------------------


def test_over_budget_holds_and_marks_the_month(served_queue) -> None:
    decision = hold.decide(served_queue, 1.04, MONTH)
    result = applied(served_queue, decision)
    assert decision.action == "hold"
    assert result["spec"]["stopPolicy"] == "Hold"
    assert result["metadata"]["annotations"] == {hold.HOLD_ANNOTATION: MONTH}
    # the patch is conditional on the version read; the rest of the spec is untouched
    assert decision.patch["metadata"]["resourceVersion"] == served_queue["metadata"]["resourceVersion"]
    assert result["spec"]["resourceGroups"] == served_queue["spec"]["resourceGroups"]
    # held and still over budget: nothing more to do
    assert hold.decide(result, 1.2, MONTH).action == "keep"


def test_under_budget_releases_only_its_own_hold(served_queue) -> None:
    held = applied(served_queue, hold.decide(served_queue, 1.04, MONTH))
    # the budget was raised: spend is 60 % of the new one
    decision = hold.decide(held, 0.6, MONTH)
    released = applied(held, decision)
    assert decision.action == "release"
    assert released["spec"]["stopPolicy"] == "None"
    assert hold.HOLD_ANNOTATION not in released["metadata"].get("annotations", {})
    # an operator's hold (no annotation), Hold or HoldAndDrain, is never lifted
    for policy in ("Hold", "HoldAndDrain"):
        manual = with_(served_queue, policy=policy, annotations={})
        assert hold.decide(manual, 0.1, MONTH).action == "keep"
        assert hold.decide(manual, None, MONTH).action == "keep"
    # an operator who drained our hold keeps it: only stopPolicy Hold with our annotation is released
    drained = with_(held, policy="HoldAndDrain")
    assert hold.decide(drained, 0.1, MONTH).action == "keep"


def test_the_month_turns(served_queue) -> None:
    held = applied(served_queue, hold.decide(served_queue, 1.04, "2026-11"))
    # December: no spend yet (the month-to-date series restarts), the November hold goes
    assert applied(held, hold.decide(held, None, "2026-12"))["spec"]["stopPolicy"] == "None"
    # ... but missing data in the month of the hold keeps it (OpenCost or Prometheus down)
    assert hold.decide(held, None, "2026-11").action == "keep"


def test_operator_exemption_and_manual_release(served_queue) -> None:
    exempt = with_(served_queue, annotations={hold.EXEMPT_ANNOTATION: MONTH})
    assert hold.decide(exempt, 1.5, MONTH).action == "keep"
    # an exemption of last month does not carry over
    old = with_(served_queue, annotations={hold.EXEMPT_ANNOTATION: "2026-11"})
    assert applied(old, hold.decide(old, 1.5, MONTH))["spec"]["stopPolicy"] == "Hold"
    # exempted while we hold: released
    held = applied(served_queue, hold.decide(served_queue, 1.04, MONTH))
    held["metadata"]["annotations"][hold.EXEMPT_ANNOTATION] = MONTH
    assert applied(held, hold.decide(held, 1.04, MONTH))["spec"]["stopPolicy"] == "None"
    # released by hand (stopPolicy None, our annotation left): the stale annotation goes when under budget
    by_hand = with_(served_queue, policy="None", annotations={hold.HOLD_ANNOTATION: MONTH})
    decision = hold.decide(by_hand, 0.5, MONTH)
    assert decision.action == "release"
    assert hold.HOLD_ANNOTATION not in applied(by_hand, decision)["metadata"]["annotations"]


def test_spent_ratios_from_a_prometheus_answer() -> None:
    assert hold.spent_ratios(PROMETHEUS_ANSWER["data"]["result"]) == {"research": 1.0417, "vision": 0.42}


class FakeKube:
    """The two calls the hold makes, on stored objects; a patch is applied as the API server would."""

    def __init__(self, objects: dict[str, dict[str, Any]]):
        self.objects = objects
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def get_cluster_queue(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[name])

    def patch_cluster_queue(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((name, patch))
        self.objects[name] = merge_patch(self.objects[name], patch)
        ClusterQueueSpec.model_validate(self.objects[name]["spec"])
        return self.objects[name]


def test_one_pass_over_http(served_queue, monkeypatch, capsys) -> None:
    """main(): Prometheus answers over real HTTP; research is held, vision (42 %) is left alone."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            assert "aiplat%3Ateam_budget%3Aspent_ratio" in self.path
            body = json.dumps(PROMETHEUS_ANSWER).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        vision = copy.deepcopy(served_queue)
        vision["metadata"]["name"] = cluster_queue("vision")
        kube = FakeKube(
            {cluster_queue("research"): copy.deepcopy(served_queue), cluster_queue("vision"): vision}
        )
        monkeypatch.setenv("PROMETHEUS_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("BUDGET_QUEUES", json.dumps({t: cluster_queue(t) for t in ("research", "vision")}))
        assert hold.main(kube, datetime(2026, 12, 6, 12, tzinfo=UTC)) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert [name for name, _ in kube.patches] == ["team-research"]
    assert kube.objects["team-research"]["spec"]["stopPolicy"] == "Hold"
    assert kube.objects["team-vision"]["spec"]["stopPolicy"] == "None"
    out = capsys.readouterr().out
    assert "research: clusterqueue team-research: hold: 104% of the budget spent in 2026-12" in out


# -- the plan ----------------------------------------------------------------------------------------------


def test_hold_in_the_plan_with_least_privilege(prod: Plan) -> None:
    held = sorted(
        cluster_queue(t)
        for t, c in prod.config["teams"].items()
        if c["budget"] and c["budget"]["on_exhausted"] == "hold"
    )
    assert held == ["team-research"]
    role = next(
        r.inputs for r in prod.by_type(CLUSTER_ROLE) if r.inputs["metadata"]["name"] == "aiplat-budget-hold"
    )
    assert role["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues"],
            "resourceNames": held,
            "verbs": ["get", "patch"],
        }
    ]
    (cron,) = [r.inputs for r in prod.by_type(CRONJOB) if r.inputs["metadata"]["name"] == mon.BUDGET_HOLD]
    namespace = prod.config["cluster_services"]["monitoring_namespace"]
    assert cron["metadata"]["namespace"] == namespace
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert json.loads(env["BUDGET_QUEUES"]) == {"research": "team-research"}
    assert env["PROMETHEUS_URL"] == f"http://{mon.PROMETHEUS_SERVICE}.{namespace}:{mon.PROMETHEUS_PORT}"
    assert pod["serviceAccountName"] == mon.BUDGET_HOLD
    assert "@sha256:" in pod["containers"][0]["image"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert prod.outputs["monitoring"]["budgetHold"] == held


def test_no_hold_without_budgets(plan_stack) -> None:
    dev = plan_stack("dev-us-train")
    assert not [r for r in dev.by_type(CRONJOB) if r.inputs["metadata"]["name"] == mon.BUDGET_HOLD]


def test_why_says_the_queue_is_held_for_budget(served_queue) -> None:
    held = applied(served_queue, hold.decide(served_queue, 1.04, MONTH))
    line = why.budget_hold_story(held)
    assert line is not None and MONTH in line and "budget" in line
    assert why.budget_hold_story(served_queue) is None
    # an operator's hold is not said to be the budget's
    assert why.budget_hold_story(with_(served_queue, policy="Hold", annotations={})) is None


def test_node_pools_are_labelled_in_kube_state_metrics(prod: Plan) -> None:
    """kube_node_labels carries aiplat.io/pool (what aiplat:pool_gpus_idle_reserved joins pools by)."""
    from infra.pools.documents.nodes import POOL_LABEL

    (kps,) = [r for r in prod.by_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == mon.KPS_RELEASE]
    assert kps.inputs["values"]["kube-state-metrics"]["metricLabelsAllowlist"] == [f"nodes=[{POOL_LABEL}]"]
    waste = yaml.safe_load((RULES / "waste.yaml").read_text())
    exprs = [r["expr"] for g in waste["groups"] for r in g["rules"]]
    label = "label_" + POOL_LABEL.replace(".", "_").replace("/", "_")
    assert any(label in e for e in exprs)


def test_the_api_calls_on_a_local_api_server(served_queue) -> None:
    """Kube's GET and merge PATCH as sent over HTTP (tests/support/fake_kube.py): the bearer token, the
    merge-patch content type, and a stale resourceVersion refused (the run fails and the next one rereads)."""
    from tests.support.fake_kube import TOKEN_PREFIX, FakeKube

    fake = FakeKube().start()
    try:
        fake.put("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", copy.deepcopy(served_queue))
        kube = hold.Kube(base=fake.url, token=f"{TOKEN_PREFIX}test")
        got = kube.get_cluster_queue("team-research")
        decision = hold.decide(got, 1.2, MONTH)
        patched = kube.patch_cluster_queue("team-research", decision.patch)
        assert patched["spec"]["stopPolicy"] == "Hold"
        ClusterQueueSpec.model_validate(patched["spec"])
        (sent,) = fake.sent("PATCH", "/clusterqueues/team-research")
        assert sent.auth == f"Bearer {TOKEN_PREFIX}test" and sent.body == decision.patch
        # the same patch again carries the version read before the first one: refused
        with pytest.raises(urllib.error.HTTPError) as info:
            kube.patch_cluster_queue("team-research", decision.patch)
        assert info.value.code == 409
    finally:
        fake.stop()
