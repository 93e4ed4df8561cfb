"""The monitoring values and specs where a wrong value breaks things silently: what Prometheus selects and
whether everything we (and the chart) declare carries that label, tolerations for the GPU taint, node
placement, secret names, receivers and routes, grouping and inhibition."""

from __future__ import annotations

import pytest

from infra.monitoring import documents as mon
from infra.pools.documents.nodes import EFA_LABEL, GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL
from tests.support.kubernetes import tolerates

RECEIVERS = [
    mon.Receiver(name="pager", kind="webhook", severities=["critical"]),
    mon.Receiver(name="team", kind="slack", severities=["critical", "warning"], channel="#ml"),
]


def am_config(receivers=RECEIVERS) -> dict:
    return mon.alertmanager_config(receivers, group_wait="30s", group_interval="5m", repeat_interval="4h")


def values(**kw) -> dict:
    args = dict(
        cluster_name="aiplat-prod-train",
        system_pools=["system"],
        namespace="monitoring",
        retention="30d",
        retention_size="180GiB",
        storage_class="gp3",
        prometheus_storage="200Gi",
        prometheus_replicas=1,
        scrape_interval="30s",
        alertmanager_storage="10Gi",
        alertmanager_config=am_config(),
    )
    args.update(kw)
    return mon.kube_prometheus_stack_values(mon.StackValues(**args))


def test_prometheus_selects_our_label_in_every_namespace() -> None:
    spec = values()["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        # NilUsesHelmValues true would replace our selector by release=<release> (templates/prometheus/
        # prometheus.yaml): it must be off, the selector ours, the namespace selector "all" ({}).
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
        assert spec[f"{kind}Selector"] == {"matchLabels": {mon.SELECT_LABEL[0]: mon.SELECT_LABEL[1]}}
        assert spec[f"{kind}NamespaceSelector"] == {}


def test_the_charts_own_monitors_and_rules_carry_our_label() -> None:
    v = values()
    label = {mon.SELECT_LABEL[0]: mon.SELECT_LABEL[1]}
    assert v["commonLabels"] == label  # kps' ServiceMonitors and PrometheusRules
    assert v["kube-state-metrics"]["prometheus"]["monitor"]["additionalLabels"] == label
    assert v["prometheus-node-exporter"]["prometheus"]["monitor"]["additionalLabels"] == label
    assert v["grafana"]["serviceMonitor"]["labels"] == label
    dcgm = mon.dcgm_exporter_values(gpu_pools=["train"], counters_csv="x")
    assert dcgm["serviceMonitor"]["enabled"] is True
    assert dcgm["serviceMonitor"]["additionalLabels"] == label
    for spec in (
        mon.trainer_pod_monitor_spec("training"),
        mon.inference_pod_monitor_spec("inference", "metrics"),
        mon.efa_exporter_pod_monitor_spec("monitoring"),
    ):
        assert spec["podMetricsEndpoints"], spec


def test_crds_come_from_their_own_release_and_eks_internals_are_not_scraped() -> None:
    v = values()
    assert v["crds"] == {"enabled": False}
    for component in ("kubeEtcd", "kubeControllerManager", "kubeScheduler", "kubeProxy"):
        assert v[component] == {"enabled": False}, component
    assert set(v["defaultRules"]["disabled"]) == {
        "KubeNodeNotReady",
        "NodeFilesystemSpaceFillingUp",
        "NodeFilesystemAlmostOutOfSpace",
        "KubePersistentVolumeFillingUp",
    }
    # no webhook, no certgen job, no webhook Deployment (their images never run: infra/mirror/pins.py _OFF)
    assert v["prometheusOperator"]["admissionWebhooks"] == {
        "enabled": False,
        "deployment": {"enabled": False},
    }


def test_operator_tls_secret_has_a_creator() -> None:
    """kube-prometheus-stack 88.5.3 (tag commit ea930bae): with prometheusOperator.tls.enabled (default
    true) the operator Deployment mounts Secret <fullname>-admission (templates/prometheus-operator/
    deployment.yaml, volume tls-secret); only admission-webhooks/job-patch/job-createSecret.yaml
    (admissionWebhooks.enabled and patch.enabled, default true, and not certManager) or certmanager.yaml
    (admissionWebhooks.certManager.enabled) create it. The pair of values we set must not mount a Secret
    nobody creates (review finding F8)."""
    op = values()["prometheusOperator"]
    webhooks = op.get("admissionWebhooks", {})
    mounts_secret = op.get("tls", {}).get("enabled", True)
    cert_manager = webhooks.get("certManager", {}).get("enabled", False)
    job_creates = webhooks.get("enabled", True) and webhooks.get("patch", {}).get("enabled", True)
    assert not mounts_secret or job_creates or cert_manager
    # what the values say today: no webhook, so no TLS on the operator (it serves HTTP on 8080)
    assert (webhooks["enabled"], op["tls"]["enabled"]) == (False, False)


def test_storage_retention_and_cluster_label() -> None:
    spec = values()["prometheus"]["prometheusSpec"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim == {
        "storageClassName": "gp3",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "200Gi"}},
    }
    assert (spec["retention"], spec["retentionSize"]) == ("30d", "180GiB")
    assert values(retention_size=None)["prometheus"]["prometheusSpec"]["retentionSize"] == ""
    assert spec["externalLabels"] == {"cluster": "aiplat-prod-train"}
    am = values()["alertmanager"]["alertmanagerSpec"]
    assert am["storage"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "10Gi"


def test_grafana_admin_from_our_secret_and_no_load_balancer() -> None:
    g = values()["grafana"]
    assert g["admin"] == {
        "existingSecret": mon.GRAFANA_ADMIN_SECRET,
        "userKey": "admin-user",
        "passwordKey": "admin-password",
    }
    assert "adminPassword" not in g
    assert g["service"]["type"] == "ClusterIP"
    assert g["ingress"] == {"enabled": False}
    sidecar = g["sidecar"]["dashboards"]
    assert (sidecar["label"], sidecar["labelValue"]) == mon.DASHBOARD_LABEL
    assert sidecar["enabled"] is True


def test_controllers_on_system_pools_exporters_on_every_tainted_node() -> None:
    v = values(system_pools=["system", "system-b"])
    for path in (
        ("prometheusOperator",),
        ("grafana",),
        ("kube-state-metrics",),
    ):
        terms = v[path[0]]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (expr,) = terms["nodeSelectorTerms"][0]["matchExpressions"]
        assert (expr["key"], expr["values"]) == (POOL_LABEL, ["system", "system-b"]), path
    assert v["prometheus"]["prometheusSpec"]["affinity"] == v["grafana"]["affinity"]
    assert v["alertmanager"]["alertmanagerSpec"]["affinity"] == v["grafana"]["affinity"]
    # node-exporter everywhere, whatever the taint (the GPU taint and NoExecute ones)
    ne = v["prometheus-node-exporter"]["tolerations"]
    assert tolerates(ne, GPU_TAINT_KEY, GPU_TAINT_VALUE, "NoSchedule")
    assert tolerates(ne, "any", "thing", "NoExecute")


def test_dcgm_exporter_on_gpu_pools_with_our_counters() -> None:
    v = mon.dcgm_exporter_values(gpu_pools=["gpu", "train"], counters_csv="DCGM_FI_DEV_GPU_TEMP, gauge, t.\n")
    assert v["customMetrics"] == "DCGM_FI_DEV_GPU_TEMP, gauge, t.\n"
    assert "arguments" not in v  # the chart mounts customMetrics over the file its arguments name
    assert tolerates(v["tolerations"], GPU_TAINT_KEY, GPU_TAINT_VALUE, "NoSchedule")
    (expr,) = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    assert (expr["key"], expr["operator"], expr["values"]) == (POOL_LABEL, "In", ["gpu", "train"])
    sm = v["serviceMonitor"]
    assert sm["honorLabels"] is True
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
        "action": "replace",
    } in sm["relabelings"]


def test_efa_exporter_on_efa_nodes_read_only() -> None:
    spec = mon.efa_exporter_daemonset_spec(
        image="img:1", config_map="efa-exporter", script_key="efa_exporter.py"
    )
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {EFA_LABEL: "true"}
    assert tolerates(pod["tolerations"], GPU_TAINT_KEY, GPU_TAINT_VALUE, "NoSchedule")
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    (c,) = pod["containers"]
    assert c["command"] == ["python3", "/opt/efa-exporter/efa_exporter.py"]
    assert all(m["readOnly"] for m in c["volumeMounts"])
    assert {"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}} in pod["volumes"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["EFA_EXPORTER_PORT"] == str(c["ports"][0]["containerPort"])
    assert (
        c["ports"][0]["name"]
        == mon.efa_exporter_pod_monitor_spec("monitoring")["podMetricsEndpoints"][0]["port"]
    )


def test_trainer_pod_monitor_keeps_rank_ports_and_names_the_job() -> None:
    spec = mon.trainer_pod_monitor_spec("training")
    assert spec["namespaceSelector"] == {"matchNames": ["training"]}
    (ep,) = spec["podMetricsEndpoints"]
    keep = [r for r in ep["relabelings"] if r["action"] == "keep"]
    assert keep == [
        {
            "sourceLabels": ["__meta_kubernetes_pod_container_port_number"],
            "regex": "940[0-7]",
            "action": "keep",
        }
    ]
    targets = {r.get("targetLabel"): r for r in ep["relabelings"]}
    # what the rules in infra/monitoring/rules/training.yaml select and group by
    assert targets["job"]["replacement"] == "aiplat-trainer"
    assert targets["trainjob"]["sourceLabels"] == [
        "__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name"
    ]
    assert "node" in targets


def test_every_route_names_a_receiver_and_each_severity_reaches_its_receivers() -> None:
    cfg = am_config()
    names = {r["name"] for r in cfg["receivers"]}
    routes = cfg["route"]["routes"]
    assert cfg["route"]["receiver"] in names
    assert {r["receiver"] for r in routes} <= names
    by_receiver = {r["receiver"]: r for r in routes if r["receiver"] != "null"}
    assert by_receiver["pager"]["matchers"] == ['severity =~ "critical"']
    assert by_receiver["team"]["matchers"] == ['severity =~ "critical|warning"']
    # a critical alert goes to both: every receiver route continues
    assert all(r["continue"] for r in by_receiver.values())


def test_urls_come_from_the_mounted_secret() -> None:
    cfg = am_config()
    receivers = {r["name"]: r for r in cfg["receivers"]}
    (hook,) = receivers["pager"]["webhook_configs"]
    (slack,) = receivers["team"]["slack_configs"]
    assert hook["url_file"] == f"/etc/alertmanager/secrets/{mon.RECEIVERS_SECRET}/pager"
    assert slack["api_url_file"] == f"/etc/alertmanager/secrets/{mon.RECEIVERS_SECRET}/team"
    assert "url" not in hook and "api_url" not in slack
    assert slack["channel"] == "#ml"
    assert values()["alertmanager"]["alertmanagerSpec"]["secrets"] == [mon.RECEIVERS_SECRET]


def test_no_receivers_still_a_valid_tree() -> None:
    cfg = am_config([])
    assert [r["name"] for r in cfg["receivers"]] == ["null"]
    assert {r["receiver"] for r in cfg["route"]["routes"]} == {"null"}


def test_one_page_per_node_and_node_down_silences_the_node() -> None:
    cfg = am_config()
    # grouped by alert name, cluster and node, not by GPU: 8 hot GPUs of a node are one notification
    assert cfg["route"]["group_by"] == ["alertname", "cluster", "node"]
    assert "gpu" not in cfg["route"]["group_by"]
    node_down = [r for r in cfg["inhibit_rules"] if r["source_matchers"] == ['alertname = "NodeNotReady"']]
    assert node_down == [
        {
            "source_matchers": ['alertname = "NodeNotReady"'],
            "target_matchers": ['alertname != "NodeNotReady"'],
            "equal": ["cluster", "node"],
        }
    ]


def test_unknown_receiver_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind 'email'"):
        am_config([mon.Receiver(name="x", kind="email", severities=["critical"])])


def test_rule_spec_keeps_the_groups_and_links_each_alert_to_its_runbook() -> None:
    record = {"record": "r:up", "expr": "up"}
    doc = {
        "groups": [
            {
                "name": "g",
                "interval": "1m",
                "rules": [record, {"alert": "A", "expr": "up == 0", "annotations": {"summary": "s"}}],
            }
        ]
    }
    spec = mon.prometheus_rule_spec(doc, "https://docs.example.org/aiplat/")
    group = spec["groups"][0]
    assert (group["name"], group["interval"], group["rules"][0]) == ("g", "1m", record)
    assert group["rules"][1]["annotations"] == {
        "summary": "s",
        "runbook_url": "https://docs.example.org/aiplat/runbooks/A.html",
    }
    assert "runbook_url" not in doc["groups"][0]["rules"][1]["annotations"]  # the file's data is not changed
    with pytest.raises(ValueError, match="non-empty 'groups'"):
        mon.prometheus_rule_spec({"groups": []}, "https://x/")


def test_rule_file_with_its_own_runbook_url_is_refused() -> None:
    doc = {
        "groups": [{"name": "g", "rules": [{"alert": "A", "expr": "1", "annotations": {"runbook_url": "u"}}]}]
    }
    with pytest.raises(ValueError, match="alert A: runbook_url is set from monitoring.docs_url"):
        mon.prometheus_rule_spec(doc, "https://x/")


def test_trainer_port_regex_admits_exactly_the_scraped_ports() -> None:
    """Prometheus anchors relabel regexes: the PodMonitor keeps exactly the ports the platform scrapes
    (SCRAPED_METRICS_PORTS, which the NetworkPolicy admits and the rule trainer-configs-load holds)."""
    import re

    from infra.core.trainer_settings import SCRAPED_METRICS_PORTS

    low, high = SCRAPED_METRICS_PORTS
    kept = [p for p in range(1, 65536) if re.fullmatch(mon.TRAINER_PORT_REGEX, str(p))]
    assert kept == list(range(low, high + 1))


def test_grafana_service_account_carries_the_logs_role_only_when_given() -> None:
    """Grafana's CloudWatch data source authenticates as its service account (IRSA): the role's ARN goes on
    the account the chart creates, named as the role's trust policy names it (infra/logs)."""
    g = values(grafana_role_arn="arn:aws:iam::123456789012:role/grafana")["grafana"]
    assert g["serviceAccount"] == {
        "name": mon.GRAFANA_SERVICE_ACCOUNT,
        "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/grafana"},
    }
    assert "serviceAccount" not in values()["grafana"]
