"""The monitoring stack in every stack's plan: releases pinned from config and ordered (CRDs first), the rule
files deployed as PrometheusRules (as they are, plus each alert's runbook URL), dashboards and PodMonitors per
role, secrets that never show, the exporters where their hardware is; and the config and stack-file refusals
around receivers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infra.core.namespaces import EXPORTERS_NAMESPACE
from infra.logs import documents as logs_docs
from infra.monitoring import documents as mon
from infra.opencost import documents as oc
from infra.plan.runner import SECRET, Plan, RecordedResource
from tests.conftest import STACKS, assert_rejected
from tests.k8s.validate import k8s_objects, validate_plan

REPO = Path(__file__).resolve().parents[3]
RELEASE = "kubernetes:helm.sh/v3:Release"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"


def _releases(plan: Plan) -> dict[str, RecordedResource]:
    """The monitoring stack's releases: its own namespace's and the node exporters' (dcgm-exporter)."""
    ns = {plan.config["cluster_services"]["monitoring_namespace"], EXPORTERS_NAMESPACE}
    return {r.inputs["name"]: r for r in plan.by_type(RELEASE) if r.inputs["namespace"] in ns}


def _logs(plan: Plan) -> bool:
    return plan.config["logs"]["enabled"]


def _opencost(plan: Plan) -> bool:
    """OpenCost (infra/opencost) runs beside Prometheus on train stacks."""
    return plan.config["role"] == "train" and plan.config["opencost"]["enabled"]


def _efa(plan: Plan) -> bool:
    return any(p["efa"] for p in plan.config["node_pools"].values())


@pytest.mark.parametrize("stack", STACKS)
def test_releases_pinned_and_crds_first(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    mc = plan.config["monitoring"]
    releases = _releases(plan)
    expected = {
        mon.CRDS_RELEASE: mc["operator_crds"],
        mon.KPS_RELEASE: mc["kube_prometheus_stack"],
        mon.DCGM_RELEASE: mc["dcgm_exporter"],
        **({logs_docs.RELEASE: plan.config["logs"]["fluent_bit"]} if _logs(plan) else {}),
        **({oc.RELEASE: plan.config["opencost"]["chart"]} if _opencost(plan) else {}),
    }
    assert set(releases) == set(expected)
    for name, chart in expected.items():
        inputs = releases[name].inputs
        assert (inputs["chart"], inputs["version"], inputs["repositoryOpts"]["repo"]) == (
            chart["chart"],
            chart["version"],
            chart["repo"],
        ), name
    kps = releases[mon.KPS_RELEASE]
    crds = releases[mon.CRDS_RELEASE].urn
    assert kps.inputs["skipCrds"] is True and kps.inputs["values"]["crds"] == {"enabled": False}
    assert crds in kps.dependencies
    # the exporters that need host access run in their own privileged namespace, not in monitoring
    assert releases[mon.DCGM_RELEASE].inputs["namespace"] == EXPORTERS_NAMESPACE
    assert kps.inputs["values"]["prometheus-node-exporter"]["namespaceOverride"] == EXPORTERS_NAMESPACE
    # everything that needs a monitoring.coreos.com kind waits for the CRD release
    for r in [*plan.by_type(RULE), *plan.by_type(POD_MONITOR), releases[mon.DCGM_RELEASE]]:
        assert crds in r.dependencies, r.name


@pytest.mark.parametrize("stack", STACKS)
def test_rule_files_deployed_as_prometheus_rules(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    rules = {r.inputs["metadata"]["name"]: r.inputs for r in plan.by_type(RULE)}
    train = plan.config["role"] == "train"
    workload = ["training", "waste", "cost"] if train else ["inference"]
    expected = {
        "gpu",
        "node",
        *workload,
        *(["efa"] if _efa(plan) else []),
        *(["logs"] if _logs(plan) else []),
    }
    # train stacks also get the group generated from their teams and pools (test_budget.py checks it)
    assert set(rules) == {f"aiplat-{n}" for n in expected | ({mon.TEAMS_RULES} if train else set())}
    idle_for = plan.config["monitoring"]["idle_gpus_for"]
    for name in expected:
        doc = yaml.safe_load((REPO / "infra" / "monitoring" / "rules" / f"{name}.yaml").read_text())
        obj = rules[f"aiplat-{name}"]
        # the file's groups as they are, each alert with its runbook on the docs site (monitoring.docs_url)
        docs_url = plan.config["monitoring"]["docs_url"]
        expected = [
            {
                **group,
                "rules": [
                    {
                        **rule,
                        "annotations": {
                            **rule["annotations"],
                            "runbook_url": f"{docs_url}runbooks/{rule['alert']}.html",
                        },
                        # the idle window is the stack's (monitoring.idle_gpus_for), not the file's
                        **({"for": idle_for} if rule["alert"] == "JobGpusIdle" else {}),
                    }
                    if "alert" in rule
                    else rule
                    for rule in group["rules"]
                ],
            }
            for group in doc["groups"]
        ]
        assert obj["spec"]["groups"] == expected
        assert obj["metadata"]["labels"][mon.SELECT_LABEL[0]] == mon.SELECT_LABEL[1]
        assert obj["metadata"]["namespace"] == plan.config["cluster_services"]["monitoring_namespace"]


@pytest.mark.parametrize("stack", STACKS)
def test_dashboards_loaded_by_the_sidecar(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    sidecar = _releases(plan)[mon.KPS_RELEASE].inputs["values"]["grafana"]["sidecar"]["dashboards"]
    boards = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in plan.by_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"].get("labels", {}).get(sidecar["label"]) == sidecar["labelValue"]
    }
    workload = "training" if plan.config["role"] == "train" else "inference"
    expected = {"gpu", workload, *(["efa"] if _efa(plan) else []), *(["cost"] if _opencost(plan) else [])}
    # the run dashboard (infra/logs, built as data: it names the stack's log groups) on train stacks
    run = {"run"} if _logs(plan) and plan.config["role"] == "train" else set()
    assert set(boards) == {f"aiplat-dashboard-{n}" for n in expected | run}
    for name in expected:
        (text,) = boards[f"aiplat-dashboard-{name}"]["data"].values()
        assert json.loads(text) == json.loads(
            (REPO / "infra" / "monitoring" / "dashboards" / f"{name}.json").read_text()
        )


@pytest.mark.parametrize("stack", STACKS)
def test_pod_monitors_per_role(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    monitors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plan.by_type(POD_MONITOR)}
    storage = plan.config["storage"]
    expected = {mon.EFA_EXPORTER} if _efa(plan) else set()
    if plan.config["role"] == "train":
        expected.add(mon.TRAINER_JOB)
        # the trainer's namespace, then the teams' (where their queued runs live)
        teams = [t.get("namespace") or f"team-{name}" for name, t in plan.config.get("teams", {}).items()]
        assert monitors[mon.TRAINER_JOB]["namespaceSelector"] == {
            "matchNames": [storage["trainer"]["namespace"], *teams]
        }
    else:
        expected |= {mon.INFERENCE_JOB, "inference-router"}  # the servers, the model-name router
        spec = monitors[mon.INFERENCE_JOB]
        assert spec["namespaceSelector"] == {"matchNames": [storage["inference"]["namespace"]]}
        # the port the inference namespace's NetworkPolicy lets the monitoring namespace scrape
        assert spec["podMetricsEndpoints"][0]["port"] == "metrics"
    if _logs(plan):
        expected.add(logs_docs.JOB)
    assert set(monitors) == expected


@pytest.mark.parametrize("stack", STACKS)
def test_kueue_scraped_where_it_runs(plan_stack, stack: str) -> None:
    """Train stacks with teams run Kueue: a ServiceMonitor selects its metrics Service (the chart's labels)
    and the manager reports the per-ClusterQueue resource series the waste rules read."""
    plan = plan_stack(stack)
    monitors = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in plan.by_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
        if r.inputs["metadata"]["namespace"] == plan.config["cluster_services"]["monitoring_namespace"]
    }
    kueue = plan.config["queueing"]["kueue"]
    if plan.config["role"] != "train" or not plan.config.get("teams"):
        assert mon.KUEUE_JOB not in monitors
        return
    spec = monitors[mon.KUEUE_JOB]
    assert spec["namespaceSelector"] == {"matchNames": [kueue["namespace"]]}
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/name"] == kueue["chart"]
    (endpoint,) = spec["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https", "https") and endpoint["bearerTokenFile"]
    # Prometheus reads the token file only if the operator lets ServiceMonitors name files
    kps = _releases(plan)[mon.KPS_RELEASE].inputs["values"]["prometheus"]["prometheusSpec"]
    assert not kps.get("arbitraryFSAccessThroughSMs", {}).get("deny")
    (release,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == "kueue"]
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["metrics"]["enableClusterQueueResources"] is True


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_never_in_the_plan(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    secrets = {r.inputs["metadata"]["name"]: r.inputs for r in plan.by_type("kubernetes:core/v1:Secret")}
    assert secrets[mon.GRAFANA_ADMIN_SECRET]["stringData"] == SECRET
    receivers = plan.config["monitoring"]["alertmanager"]["receivers"]
    if receivers:
        assert secrets[mon.RECEIVERS_SECRET]["stringData"] == SECRET
    text = json.dumps([r.as_json() for r in plan.resources])
    assert "plan.invalid" not in text  # the placeholder URL the plan hands the program
    values = _releases(plan)[mon.KPS_RELEASE].inputs["values"]
    config = values["alertmanager"]["config"]
    assert {r["name"] for r in config["receivers"]} == {"null", *receivers}


@pytest.mark.parametrize("stack", STACKS)
def test_efa_exporter_only_with_efa(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    daemonsets = [
        r for r in plan.by_type("kubernetes:apps/v1:DaemonSet") if r.name.startswith("efa-exporter")
    ]
    assert len(daemonsets) == (1 if _efa(plan) else 0)


@pytest.mark.parametrize("stack", STACKS)
def test_monitoring_objects_validate(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ns = plan.config["cluster_services"]["monitoring_namespace"]
    objects = [o for o in k8s_objects(plan) if (o.manifest.get("metadata") or {}).get("namespace") == ns]
    assert len(objects) >= 5
    assert validate_plan(plan, only=lambda o: (o.manifest.get("metadata") or {}).get("namespace") == ns) == []


def test_stack_outputs_say_how_to_reach_grafana(plan_stack) -> None:
    out = plan_stack("prod-us-train").outputs["monitoring"]
    assert out["grafana"] == "kubectl -n monitoring port-forward svc/kps-grafana 3000:80"
    assert out["rules"] == ["gpu", "node", "efa", "training", "waste", "cost", "logs", "teams"]


# -- config and stack files -------------------------------------------------------------------------------


def test_config_refusals(stack_config) -> None:
    raw = stack_config("prod-us-train")
    assert_rejected(
        raw,
        "monitoring.prometheus",
        {"retention_size": "195GiB", "storage_size": "200Gi"},
        ["retention_size 195GiB leaves less than 10% of storage_size 200Gi"],
    )
    assert_rejected(raw, "monitoring.alertmanager.receivers", {"null": {"kind": "slack"}}, ["not 'null'"])
    assert_rejected(
        raw,
        "monitoring.alertmanager.receivers",
        {"pager": {"kind": "webhook", "channel": "#x"}},
        ["channel '#x' is for slack receivers"],
    )
    assert_rejected(raw, "monitoring.prometheus.retention", "15 days", ["monitoring.prometheus.retention"])
    assert_rejected(raw, "monitoring.kube_prometheus_stack.version", "88.x", ["not an exact chart version"])


def test_receiver_urls_only_as_secrets(stack_doc, stack_config, write_stack) -> None:
    from infra.core.errors import ConfigErrors
    from infra.io.stackfiles import load_stack_config

    doc = stack_doc("prod-us-train")
    doc["config"]["aiplat:alertmanager-pager"] = "https://events.pagerduty.com/v2/enqueue"
    folder = write_stack("s", doc)
    with pytest.raises(ConfigErrors) as info:
        load_stack_config("s", folder)
    assert "aiplat:alertmanager-pager: a receiver URL in plain text" in str(info.value)
    assert "pulumi config set --secret aiplat:alertmanager-pager <url>" in str(info.value)

    doc["config"]["aiplat:alertmanager-pager"] = {"secure": "v1:abc"}
    doc["config"]["aiplat:alertmanager-pagr"] = {"secure": "v1:abc"}
    folder = write_stack("s", doc)
    with pytest.raises(ConfigErrors) as info:
        load_stack_config("s", folder)
    assert "aiplat:alertmanager-pagr: secret of no receiver" in str(info.value)
    assert "did you mean 'aiplat:alertmanager-pager'" in str(info.value)

    del doc["config"]["aiplat:alertmanager-pagr"]
    cfg = load_stack_config("s", write_stack("s", doc))
    assert set(cfg.monitoring.alertmanager.receivers) == {"pager", "ml-platform"}
