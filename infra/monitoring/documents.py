"""The monitoring stack as data: chart values, Alertmanager's configuration, and the specs of the objects we
declare (PrometheusRules, PodMonitors, the EFA exporter's DaemonSet). Pure, no Pulumi.

Each builder names the chart version it was written against; unset keys keep the chart's defaults. What
breaks silently when wrong is asserted in ``tests/infra/monitoring/test_documents.py``.
Prometheus selects monitors and rules by ``SELECT_LABEL``, not kps's default ``release: <release>``
(values.yaml ``*SelectorNilUsesHelmValues``); the charts' own objects get it through kps ``commonLabels``,
the subcharts' ``prometheus.monitor.additionalLabels`` / ``serviceMonitor.labels`` and dcgm-exporter's
``serviceMonitor.additionalLabels``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.kube import IRSA_ANNOTATION, TOLERATE_ALL
from infra.core.namespaces import EXPORTERS_NAMESPACE, PART_OF
from infra.pools.documents.nodes import EFA_LABEL, POOL_LABEL, pool_affinity
from infra.training.documents.runtime import WORKLOAD_BANDWIDTH, WORKLOAD_LABEL

SELECT_LABEL = ("aiplat.io/prometheus", "aiplat")
SELECT = {SELECT_LABEL[0]: SELECT_LABEL[1]}
MONITORING_API = (
    "monitoring.coreos.com/v1"  # prometheus-operator v0.93.1 CRDs (prometheus-operator-crds 31.0.1)
)
KPS_RELEASE = (
    "kps"  # object names: kps-prometheus, kps-alertmanager, kps-grafana (docs/platform/monitoring.md)
)
# Prometheus' Service (kps values prometheus.service.port 9090) under fullnameOverride KPS_RELEASE; the
# inference autoscaler (KEDA) queries it.
PROMETHEUS_SERVICE = f"{KPS_RELEASE}-prometheus"
PROMETHEUS_PORT = 9090
CRDS_RELEASE = "prometheus-operator-crds"
DCGM_RELEASE = "dcgm-exporter"
GRAFANA_ADMIN_SECRET = "grafana-admin"
# Grafana's ServiceAccount, named in the values (grafana chart 12.11.1 serviceAccount.name; its default is
# the same fullname) so the IRSA role of its CloudWatch data source can trust it by name (infra/logs).
GRAFANA_SERVICE_ACCOUNT = f"{KPS_RELEASE}-grafana"
GRAFANA_ADMIN_USER = "admin"
RECEIVERS_SECRET = "alertmanager-receivers"
# The operator mounts alertmanagerSpec.secrets at /etc/alertmanager/secrets/<secret>/<key> (kps values.yaml
# alertmanager.alertmanagerSpec.secrets).
RECEIVERS_MOUNT = f"/etc/alertmanager/secrets/{RECEIVERS_SECRET}"
DASHBOARD_LABEL = ("grafana_dashboard", "1")  # kps values grafana.sidecar.dashboards.label/labelValue
DASHBOARD_FOLDER_ANNOTATION = "grafana_folder"
DASHBOARD_FOLDER = "aiplat"
TRAINER_JOB = "aiplat-trainer"
INFERENCE_JOB = "aiplat-inference"
EFA_EXPORTER = "efa-exporter"
EFA_EXPORTER_PORT = 9809
# Kubeflow Trainer runs a TrainJob as a JobSet; JobSet labels every pod with the JobSet's (= the TrainJob's)
# name (kubernetes-sigs/jobset api/jobset/v1alpha2 JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The trainer serves one registry per local rank on metrics.port_base + LOCAL_RANK: the ports of
# SCRAPED_METRICS_PORTS (tests/infra/monitoring/test_documents.py checks the regex matches exactly those).
TRAINER_PORT_REGEX = "940[0-7]"
# kps default rules that aiplat's rules (infra/monitoring/rules/node.yaml) replace: one problem, one page.
REPLACED_DEFAULT_ALERTS = (
    "KubeNodeNotReady",
    "NodeFilesystemSpaceFillingUp",
    "NodeFilesystemAlmostOutOfSpace",
    "KubePersistentVolumeFillingUp",
)
# EKS runs etcd, the scheduler and the controller manager itself; kube-proxy binds its metrics to
# 127.0.0.1. Scraping them fails, and their default "...Down" alerts would fire for ever.
UNSCRAPABLE_ON_EKS = ("kubeEtcd", "kubeControllerManager", "kubeScheduler", "kubeProxy")


def _node_relabeling() -> dict[str, Any]:
    """The scraped pod's node as label ``node`` (what the alert rules group and inhibit by)."""
    return {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}


@dataclass(frozen=True, kw_only=True)
class StackValues:
    """What the kube-prometheus-stack values depend on."""

    cluster_name: str
    system_pools: Sequence[str]
    namespace: str  # the release's (the operator manages objects there only)
    retention: str
    retention_size: str | None
    storage_class: str
    prometheus_storage: str
    prometheus_replicas: int
    scrape_interval: str
    alertmanager_storage: str
    alertmanager_config: Mapping[str, Any]
    # The IAM role Grafana's CloudWatch data source queries the container logs with (None: no logs data
    # source); a Pulumi output in the plan, typed loosely here.
    grafana_role_arn: Any = None


def kube_prometheus_stack_values(v: StackValues) -> dict[str, Any]:
    """prometheus-community ``kube-prometheus-stack`` 88.5.3 values
    (``charts/kube-prometheus-stack/values.yaml`` at commit cf408a2), with the Grafana 12.11.1,
    node-exporter 4.56.1 and kube-state-metrics 8.4.0 subcharts."""
    system = pool_affinity(v.system_pools)

    def volume(size: str) -> dict[str, Any]:
        return {
            "volumeClaimTemplate": {
                "spec": {
                    "storageClassName": v.storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}},
                }
            }
        }

    prometheus_spec: dict[str, Any] = {
        # our label, not the release label; every namespace ({} selects all, None would mean "own only")
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "serviceMonitorSelector": {"matchLabels": dict(SELECT)},
        "serviceMonitorNamespaceSelector": {},
        "podMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelector": {"matchLabels": dict(SELECT)},
        "podMonitorNamespaceSelector": {},
        "ruleSelectorNilUsesHelmValues": False,
        "ruleSelector": {"matchLabels": dict(SELECT)},
        "ruleNamespaceSelector": {},
        "retention": v.retention,
        "retentionSize": v.retention_size or "",
        "storageSpec": volume(v.prometheus_storage),
        "replicas": v.prometheus_replicas,
        "scrapeInterval": v.scrape_interval,
        # every alert carries the cluster: Alertmanager groups and inhibits by it
        "externalLabels": {"cluster": v.cluster_name},
        "affinity": system,
    }
    return {
        # Object names as docs/platform/monitoring.md gives them (kps-prometheus, kps-alertmanager): without
        # it the chart's fullname helper joins release and chart name (templates/_helpers.tpl, truncated to
        # 26 characters: kps-kube-prometheus-stack-prometheus), and the Prometheus address the inference
        # autoscaler queries (PROMETHEUS_SERVICE) would not exist.
        "fullnameOverride": KPS_RELEASE,
        # CRDs come from the prometheus-operator-crds release (upgraded with it); this chart's crds/ copy
        # would be installed once and never upgraded.
        "crds": {"enabled": False},
        "commonLabels": dict(SELECT),
        "defaultRules": {"disabled": {name: True for name in REPLACED_DEFAULT_ALERTS}},
        **{component: {"enabled": False} for component in UNSCRAPABLE_ON_EKS},
        "prometheusOperator": {
            # The admission webhook is called by the EKS control plane, which the monitoring namespace's
            # default-deny NetworkPolicy does not let in; rules are checked by promtool in make test.
            "admissionWebhooks": {"enabled": False, "deployment": {"enabled": False}},
            # ... and with it off nothing creates the Secret <fullname>-admission (only the webhook's
            # createSecret Job or admissionWebhooks.certManager do), while tls.enabled (default true) mounts
            # it into the operator: the pod would stay ContainerCreating ("secret kps-admission not found")
            # and the atomic release roll back. Without the webhook the operator needs no TLS: it serves
            # metrics over HTTP on 8080. kube-prometheus-stack 88.5.3 values.yaml prometheusOperator.tls and
            # templates/prometheus-operator/deployment.yaml (volume tls-secret; --web.listen-address=:8080
            # when tls is off); prometheus-community/helm-charts issues #418, #1438, #6586.
            "tls": {"enabled": False},
            "affinity": system,
            # The operator writes the StatefulSets, Secrets and ConfigMaps of the Prometheus and Alertmanager
            # it manages, and the kubelet's Service and Endpoints: all in the release's namespace, not
            # kube-system (the chart's kubeletService.namespace) nor any other. Its ClusterRole stays the
            # chart's (values.yaml has no namespaced RBAC at 88.5.3); the admission policy
            # aiplat-addon-namespaces refuses its writes elsewhere (infra/admission).
            "prometheusInstanceNamespaces": [v.namespace],
            "alertmanagerInstanceNamespaces": [v.namespace],
            "alertmanagerConfigNamespaces": [v.namespace],
            "thanosRulerInstanceNamespaces": [v.namespace],
            "kubeletService": {"namespace": v.namespace},
        },
        # the kubelet ServiceMonitor selects the kubelet Service where the operator keeps it
        "kubelet": {"namespace": v.namespace},
        "prometheus": {"prometheusSpec": prometheus_spec},
        "alertmanager": {
            "config": dict(v.alertmanager_config),
            "alertmanagerSpec": {
                "secrets": [RECEIVERS_SECRET],
                "storage": volume(v.alertmanager_storage),
                "affinity": system,
            },
        },
        "grafana": {
            "admin": {
                "existingSecret": GRAFANA_ADMIN_SECRET,
                "userKey": "admin-user",
                "passwordKey": "admin-password",
            },
            # no load balancer, no ingress: reach it with kubectl port-forward (docs/platform/monitoring.md)
            "service": {"type": "ClusterIP"},
            "ingress": {"enabled": False},
            # No volume (dashboards and datasources come from ConfigMaps), so nothing to chown: the chart
            # runs its busybox init container only with persistence.enabled and initChownData.enabled
            # (charts/grafana 12.11.1 templates/_pod.tpl); both off, said where the chart's default is not.
            "persistence": {"enabled": False},
            "initChownData": {"enabled": False},
            # A Role in Grafana's own namespace instead of a ClusterRole that reads every Secret and
            # ConfigMap of the cluster: the sidecars look only there, where our dashboards and the chart's
            # datasources are. grafana-community/helm-charts charts/grafana 12.11.1 values.yaml
            # (rbac.namespaced) and templates/role.yaml; searchNamespace goes through `tpl`
            # (templates/_pod.tpl), so the release namespace is named, not written down twice.
            "rbac": {"namespaced": True},
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": DASHBOARD_LABEL[0],
                    "labelValue": DASHBOARD_LABEL[1],
                    "searchNamespace": ["{{ .Release.Namespace }}"],
                    "folderAnnotation": DASHBOARD_FOLDER_ANNOTATION,
                    "provider": {"foldersFromFilesStructure": True},
                }
            },
            "serviceMonitor": {"labels": dict(SELECT)},
            "affinity": system,
            **(
                {
                    "serviceAccount": {
                        "name": GRAFANA_SERVICE_ACCOUNT,
                        "annotations": {IRSA_ANNOTATION: v.grafana_role_arn},
                    }
                }
                if v.grafana_role_arn is not None
                else {}
            ),
        },
        "kube-state-metrics": {
            # kube_node_labels{label_aiplat_io_pool}: which pool a node is of (rules/waste.yaml, idle GPUs
            # of reserved capacity); kube-state-metrics exposes no label it is not told to (chart 8.4.0
            # values.yaml metricLabelsAllowlist, "<resource>=[<label>,...]")
            "metricLabelsAllowlist": [f"nodes=[{POOL_LABEL}]"],
            "prometheus": {"monitor": {"additionalLabels": dict(SELECT)}},
            "affinity": system,
        },
        "prometheus-node-exporter": {
            # in the exporters' privileged namespace, not monitoring (node-exporter chart 4.56.1 values)
            "namespaceOverride": EXPORTERS_NAMESPACE,
            "prometheus": {
                "monitor": {"additionalLabels": dict(SELECT), "relabelings": [_node_relabeling()]}
            },
            # every node, whatever its taints: the chart's default tolerates NoSchedule only
            "tolerations": TOLERATE_ALL,
        },
    }


@dataclass(frozen=True, kw_only=True)
class Receiver:
    """An Alertmanager receiver: ``kind`` slack or webhook, the severities it gets; its URL is the key
    ``name`` of the Secret ``RECEIVERS_SECRET``."""

    name: str
    kind: str
    severities: Sequence[str]
    channel: str | None = None
    send_resolved: bool = True


NULL_RECEIVER = "null"
GROUP_BY = ("alertname", "cluster", "node")


def alertmanager_config(
    receivers: Sequence[Receiver],
    *,
    group_wait: str,
    group_interval: str,
    repeat_interval: str,
    team_receivers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Alertmanager's configuration (https://prometheus.io/docs/alerting/latest/configuration/, v0.34.0).

    - Grouping by alert name, cluster and node: the eight GPUs of a node overheating are one notification.
    - Each receiver gets the severities it asks for (``continue`` lets several receivers get one alert);
      anything else goes to ``null``, as do Watchdog and InfoInhibitor (kps' own routes).
    - Inhibition: ``NodeNotReady`` holds back every other alert of the same node and cluster (its GPUs,
      EFA devices, disks, trainer ranks); a critical alert holds back the warning of the same name
      (kps' default); InfoInhibitor holds back info alerts (kps' default).
    - URLs come from files (``api_url_file`` since 0.22, webhook ``url_file`` since 0.26, fixed in 0.28).
    - ``team_receivers`` (team -> receiver, ``teams.<team>.receiver``): every alert labelled ``team`` goes
      to that team's receiver whatever its severity, grouped per team; ``TeamBudgetExhausted`` holds back
      the same team's ``TeamBudgetThresholdReached``.
    """
    routes: list[dict[str, Any]] = [
        {"receiver": NULL_RECEIVER, "matchers": ['alertname = "Watchdog"']},
        {"receiver": NULL_RECEIVER, "matchers": ['alertname = "InfoInhibitor"']},
    ]
    configs: list[dict[str, Any]] = [{"name": NULL_RECEIVER}]
    for team, receiver in sorted((team_receivers or {}).items()):
        routes.append(
            {
                "receiver": receiver,
                "matchers": [f'team = "{team}"'],
                "group_by": ["alertname", "cluster", "team"],
                "continue": True,
            }
        )
    for r in receivers:
        routes.append(
            {
                "receiver": r.name,
                "matchers": [f'severity =~ "{"|".join(sorted(r.severities))}"'],
                "continue": True,
            }
        )
        url_file = f"{RECEIVERS_MOUNT}/{r.name}"
        if r.kind == "slack":
            slack: dict[str, Any] = {
                "api_url_file": url_file,
                "send_resolved": r.send_resolved,
                "title": (
                    "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} ({{ .CommonLabels.cluster }})"
                ),
                "text": (
                    "{{ range .Alerts }}*{{ .Labels.severity }}* {{ .Annotations.summary }}\n"
                    "{{ .Annotations.description }}\nRunbook: {{ .Annotations.runbook_url }}\n{{ end }}"
                ),
            }
            if r.channel:
                slack["channel"] = r.channel
            configs.append({"name": r.name, "slack_configs": [slack]})
        elif r.kind == "webhook":
            configs.append(
                {
                    "name": r.name,
                    "webhook_configs": [{"url_file": url_file, "send_resolved": r.send_resolved}],
                }
            )
        else:
            raise ValueError(f"receiver {r.name}: unknown kind {r.kind!r}")
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": NULL_RECEIVER,
            "group_by": list(GROUP_BY),
            "group_wait": group_wait,
            "group_interval": group_interval,
            "repeat_interval": repeat_interval,
            "routes": routes,
        },
        "inhibit_rules": [
            {
                "source_matchers": ['alertname = "NodeNotReady"'],
                "target_matchers": ['alertname != "NodeNotReady"'],
                "equal": ["cluster", "node"],
            },
            {
                "source_matchers": ['severity = "critical"'],
                "target_matchers": ['severity = "warning"'],
                "equal": ["cluster", "namespace", "alertname"],
            },
            {
                "source_matchers": ['alertname = "TeamBudgetExhausted"'],
                "target_matchers": ['alertname = "TeamBudgetThresholdReached"'],
                "equal": ["cluster", "team"],
            },
            {
                "source_matchers": ['alertname = "InfoInhibitor"'],
                "target_matchers": ['severity = "info"'],
                "equal": ["cluster", "namespace"],
            },
        ],
        "receivers": configs,
        "templates": ["/etc/alertmanager/config/*.tmpl"],
    }


def dcgm_exporter_values(*, gpu_pools: Sequence[str], counters_csv: str) -> dict[str, Any]:
    """NVIDIA ``dcgm-exporter`` chart 4.8.2 values (``deployment/values.yaml`` at tag 4.5.3-4.8.2).

    ``customMetrics`` becomes the chart's ConfigMap ``exporter-metrics-config-map``, which its default
    ``extraVolumeMounts`` mount over ``/etc/dcgm-exporter/default-counters.csv`` (the file ``arguments``
    names), so ``arguments`` stay as they are. The chart's default tolerations cover only the control
    plane, and it has no node selector: placed on the GPU pools, tolerating every taint there.
    ``honorLabels`` keeps the exporter's ``pod``/``namespace`` of the workload using each GPU (otherwise
    renamed ``exported_pod``...). Profiling fields (DCGM_FI_PROF_*) need the chart's default SYS_ADMIN.
    Privileged: the exporter requests no GPU and reads every GPU of its node through the image's
    ``NVIDIA_VISIBLE_DEVICES=all``, which the GPU nodes' toolkit honours only for privileged containers
    (``infra/pools/documents/nodes.py`` TOOLKIT_GPU_ISOLATION; Helm merges this over the chart's
    ``securityContext``, keeping its root user and SYS_ADMIN). Its namespace is the privileged exporters'.
    """
    return {
        "customMetrics": counters_csv,
        "securityContext": {"privileged": True},
        "affinity": pool_affinity(gpu_pools),
        "tolerations": TOLERATE_ALL,
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "honorLabels": True,
            "additionalLabels": dict(SELECT),
            "relabelings": [_node_relabeling()],
        },
        "extraEnv": [
            # XID counts per code over 5 minutes (DCGM_EXP_XID_ERRORS_COUNT), the exporter's default window
            {"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": "300000"},
        ],
    }


# Where an alert's runbook lives under the docs site: docs/runbooks/<alert>.md, which MkDocs serves at
# runbooks/<alert>.html (mkdocs.yml sets use_directory_urls: false so the site also browses from file://).
RUNBOOKS_PATH = "runbooks"


def runbook_url(docs_url: str, alert: str) -> str:
    """The runbook page of ``alert`` on the docs site at ``docs_url`` (``monitoring.docs_url``)."""
    return f"{docs_url}{RUNBOOKS_PATH}/{alert}.html"


def prometheus_rule_spec(
    rule_file: Mapping[str, Any], docs_url: str, alert_for: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A PrometheusRule's spec from a Prometheus rule file (``groups:`` as promtool reads it), every alert
    annotated with its ``runbook_url`` on the docs site at ``docs_url``. The URL is derived from the alert's
    name here only, so a rule file that sets one itself is refused. ``alert_for``: alert name -> the ``for``
    the stack config sets in place of the file's (``monitoring.idle_gpus_for``)."""
    alert_for = dict(alert_for or {})
    groups = rule_file.get("groups")
    if not isinstance(groups, list) or not groups:
        raise ValueError("a rule file needs a non-empty 'groups' list")
    out = []
    for group in groups:
        rules = []
        for rule in group.get("rules", []):
            if "alert" in rule:
                annotations = dict(rule.get("annotations") or {})
                if "runbook_url" in annotations:
                    raise ValueError(
                        f"alert {rule['alert']}: runbook_url is set from monitoring.docs_url; remove it from "
                        "the rule file"
                    )
                annotations["runbook_url"] = runbook_url(docs_url, rule["alert"])
                rule = {**rule, "annotations": annotations}
                if rule["alert"] in alert_for:
                    rule["for"] = alert_for.pop(rule["alert"])
            rules.append(rule)
        out.append({**group, "rules": rules})
    if alert_for:
        raise ValueError(f"alert_for names {sorted(alert_for)}, which the rule file does not define")
    return {"groups": out}


# Series the stack's own group ``aiplat-teams`` records from its config (``team_rules``); rules/waste.yaml
# and rules/cost.yaml join on them.
TEAM_NAMESPACE_INFO = "aiplat:team_namespace:info"
TEAM_BUDGET_USD = "aiplat:team_budget_usd"
TEAM_BUDGET_ALERT_RATIO = "aiplat:team_budget_alert_ratio"
POOL_PURCHASE_OPTION_INFO = "aiplat:pool_purchase_option:info"
GENERATED_SERIES = (TEAM_NAMESPACE_INFO, TEAM_BUDGET_USD, TEAM_BUDGET_ALERT_RATIO, POOL_PURCHASE_OPTION_INFO)
TEAMS_RULES = "teams"


@dataclass(frozen=True, kw_only=True)
class TeamFacts:
    """What the rules need of a team: its namespace and, with a budget, USD a month, the alert fractions
    and what 100 % does (``hold`` or ``alert``)."""

    team: str
    namespace: str
    budget_usd: float | None = None
    alert_at: Sequence[float] = ()
    on_exhausted: str | None = None


def team_rules(teams: Sequence[TeamFacts], pools: Mapping[str, tuple[str, bool]]) -> dict[str, Any]:
    """The rule file of group ``aiplat-teams``: constant series from the stack config, one per team
    (namespace, budget, each alert fraction) and per node pool (``pools``: pool -> (purchase option,
    reserved)), so the static rules can join the teams' pods and the pools' nodes to them."""
    rules: list[dict[str, Any]] = []
    for t in sorted(teams, key=lambda t: t.team):
        rules.append(
            {
                "record": TEAM_NAMESPACE_INFO,
                "expr": "vector(1)",
                "labels": {"team": t.team, "namespace": t.namespace},
            }
        )
        if t.budget_usd is None:
            continue
        rules.append(
            {
                "record": TEAM_BUDGET_USD,
                "expr": f"vector({float(t.budget_usd)!r})",
                "labels": {"team": t.team, "on_exhausted": t.on_exhausted or "alert"},
            }
        )
        for fraction in t.alert_at:
            rules.append(
                {
                    "record": TEAM_BUDGET_ALERT_RATIO,
                    "expr": f"vector({float(fraction)!r})",
                    "labels": {"team": t.team, "threshold": f"{fraction:g}"},
                }
            )
    for pool, (option, reserved) in sorted(pools.items()):
        rules.append(
            {
                "record": POOL_PURCHASE_OPTION_INFO,
                "expr": "vector(1)",
                "labels": {"pool": pool, "purchase_option": option, "reserved": str(reserved).lower()},
            }
        )
    return {"groups": [{"name": "aiplat-teams", "rules": rules}]}


def trainer_pod_monitor_spec(namespace: str, *team_namespaces: str) -> dict[str, Any]:
    """The trainer's ranks: pods of TrainJobs (JobSet label) in ``namespace`` and the teams' namespaces
    (``team_namespaces``, where their queued runs live), every declared container
    port 9400-9407, as job ``aiplat-trainer`` with labels ``node`` and ``trainjob``. The bandwidth check
    runs on the training runtime (same ports declared, no metrics served): its pods, labelled
    ``aiplat.io/workload: bandwidth-check`` (``infra/training/documents/runtime.py``), are not scraped."""
    return {
        "namespaceSelector": {"matchNames": [namespace, *team_namespaces]},
        "selector": {
            "matchExpressions": [
                {"key": JOBSET_NAME_LABEL, "operator": "Exists"},
                {"key": WORKLOAD_LABEL, "operator": "NotIn", "values": [WORKLOAD_BANDWIDTH]},
            ]
        },
        "podMetricsEndpoints": [
            {
                "path": "/metrics",
                "interval": "30s",
                "relabelings": [
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_container_port_number"],
                        "regex": TRAINER_PORT_REGEX,
                        "action": "keep",
                    },
                    _node_relabeling(),
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name"],
                        "targetLabel": "trainjob",
                        "action": "replace",
                    },
                    {"targetLabel": "job", "replacement": TRAINER_JOB, "action": "replace"},
                ],
            }
        ],
    }


def inference_pod_monitor_spec(namespace: str, port_name: str) -> dict[str, Any]:
    """The inference servers: every pod in ``namespace`` with a container port ``port_name``."""
    return {
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {},
        "podMetricsEndpoints": [
            {
                "port": port_name,
                "path": "/metrics",
                "interval": "30s",
                "relabelings": [
                    _node_relabeling(),
                    {"targetLabel": "job", "replacement": INFERENCE_JOB, "action": "replace"},
                ],
            }
        ],
    }


KUEUE_JOB = "kueue"


def kueue_service_monitor_spec(namespace: str, chart_name: str) -> dict[str, Any]:
    """Kueue's controller metrics (kueue_* series: the waste rules' borrowed GPUs) from the chart's metrics
    Service in ``namespace`` (kubernetes-sigs/kueue v0.19.2 charts/kueue
    templates/manager/auth_proxy_service.yaml: labels kueue.metricsService.labels, port ``https`` 8443),
    as the chart's own ServiceMonitor (templates/prometheus/monitor.yaml, off unless enablePrometheus;
    it lacks our selector label) scrapes it: HTTPS with the Prometheus ServiceAccount's token (the
    endpoint authorises ``get`` on the non-resource URL /metrics, which kube-prometheus-stack's
    Prometheus ClusterRole grants) and the chart's default ``insecureSkipVerify`` (Kueue serves a
    certificate it makes itself)."""
    return {
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": chart_name,
                "app.kubernetes.io/component": "metrics-service",
            }
        },
        "endpoints": [
            {
                "port": "https",
                "scheme": "https",
                "path": "/metrics",
                "interval": "30s",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "tlsConfig": {"insecureSkipVerify": True},
                "relabelings": [{"targetLabel": "job", "replacement": KUEUE_JOB, "action": "replace"}],
            }
        ],
    }


EFA_SELECTOR = {"app.kubernetes.io/name": EFA_EXPORTER}


def efa_exporter_pod_monitor_spec(namespace: str) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {"matchLabels": dict(EFA_SELECTOR)},
        "podMetricsEndpoints": [
            {
                "port": "metrics",
                "path": "/metrics",
                "interval": "30s",
                "relabelings": [
                    _node_relabeling(),
                    {"targetLabel": "job", "replacement": EFA_EXPORTER, "action": "replace"},
                ],
            }
        ],
    }


def _script_container() -> dict[str, Any]:
    """A small Python script's container (the EFA exporter, the budget hold): its resources and a locked-down
    security context."""
    return {
        "resources": {
            "requests": {"cpu": "10m", "memory": "32Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def efa_exporter_daemonset_spec(*, image: str, config_map: str, script_key: str) -> dict[str, Any]:
    """The EFA exporter on every EFA node (``vpc.amazonaws.com/efa.present=true``, set on pools with
    ``efa: true``), tolerating every taint there. It reads the host's ``/sys`` (read-only hostPath, as
    node-exporter does: ``/sys/class/infiniband`` entries are symlinks into ``/sys/devices``), runs as
    nobody with no capabilities and a read-only root file system."""
    return {
        "selector": {"matchLabels": dict(EFA_SELECTOR)},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        "template": {
            "metadata": {"labels": {**EFA_SELECTOR, **PART_OF}},
            "spec": {
                "nodeSelector": {EFA_LABEL: "true"},
                "tolerations": TOLERATE_ALL,
                "priorityClassName": "system-node-critical",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65534,
                    "runAsGroup": 65534,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "exporter",
                        "image": image,
                        "command": ["python3", f"/opt/efa-exporter/{script_key}"],
                        "env": [
                            {"name": "EFA_EXPORTER_SYSFS", "value": "/host/sys"},
                            {"name": "EFA_EXPORTER_PORT", "value": str(EFA_EXPORTER_PORT)},
                            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                        ],
                        "ports": [{"name": "metrics", "containerPort": EFA_EXPORTER_PORT, "protocol": "TCP"}],
                        "readinessProbe": {
                            "httpGet": {"path": "/healthz", "port": "metrics"},
                            "periodSeconds": 30,
                        },
                        "livenessProbe": {
                            "httpGet": {"path": "/healthz", "port": "metrics"},
                            "periodSeconds": 30,
                            "failureThreshold": 5,
                        },
                        **_script_container(),
                        "volumeMounts": [
                            {"name": "script", "mountPath": "/opt/efa-exporter", "readOnly": True},
                            {"name": "sys", "mountPath": "/host/sys", "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "script", "configMap": {"name": config_map, "defaultMode": 0o444}},
                    {"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}},
                ],
            },
        },
    }


# The budget hold (``budget/budget_hold.py``): a CronJob in the monitoring namespace (it queries Prometheus
# there; the namespace's NetworkPolicies let its pods reach each other and HTTPS, the API server, anywhere).
BUDGET_HOLD = "budget-hold"
BUDGET_HOLD_SELECTOR = {"app.kubernetes.io/name": BUDGET_HOLD}
# Every 5 minutes: the spend it reads moves by the hour (rules/cost.yaml), so a hold lands within minutes of
# the hour that crossed the budget.
BUDGET_HOLD_SCHEDULE = "*/5 * * * *"
KUEUE_GROUP = "kueue.x-k8s.io"


def budget_hold_rules(cluster_queues: Sequence[str]) -> list[dict[str, Any]]:
    """The hold's ClusterRole: get and patch the named ClusterQueues (the teams' with ``on_exhausted:
    hold``), nothing else; list and watch are not needed (it reads each queue by name)."""
    if not cluster_queues:
        raise ValueError(
            "budget_hold_rules needs at least one ClusterQueue; an empty resourceNames grants all"
        )
    return [
        {
            "apiGroups": [KUEUE_GROUP],
            "resources": ["clusterqueues"],
            "resourceNames": sorted(cluster_queues),
            "verbs": ["get", "patch"],
        }
    ]


def budget_hold_cronjob_spec(
    *,
    image: str,
    config_map: str,
    script_key: str,
    service_account: str,
    prometheus_url: str,
    queues: Mapping[str, str],
    system_pools: Sequence[str],
) -> dict[str, Any]:
    """The hold's CronJob: one run at a time, every ``BUDGET_HOLD_SCHEDULE``, as nobody with no
    capabilities and a read-only root file system, on the system pools. ``queues``: team -> ClusterQueue."""
    return {
        "schedule": BUDGET_HOLD_SCHEDULE,
        "timeZone": "Etc/UTC",
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 300,
        "successfulJobsHistoryLimit": 1,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {
            "spec": {
                "backoffLimit": 1,
                "activeDeadlineSeconds": 240,
                "template": {
                    "metadata": {"labels": {**BUDGET_HOLD_SELECTOR, **PART_OF}},
                    "spec": {
                        "serviceAccountName": service_account,
                        # the one pod of the account that calls the API (the account mounts no token)
                        "automountServiceAccountToken": True,
                        "restartPolicy": "Never",
                        "enableServiceLinks": False,
                        "affinity": pool_affinity(system_pools),
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65534,
                            "runAsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": BUDGET_HOLD,
                                "image": image,
                                "command": ["python3", f"/opt/budget-hold/{script_key}"],
                                "env": [
                                    {"name": "PROMETHEUS_URL", "value": prometheus_url},
                                    {
                                        "name": "BUDGET_QUEUES",
                                        "value": json.dumps(dict(sorted(queues.items()))),
                                    },
                                    {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                                ],
                                **_script_container(),
                                "volumeMounts": [
                                    {"name": "script", "mountPath": "/opt/budget-hold", "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "script", "configMap": {"name": config_map, "defaultMode": 0o444}}
                        ],
                    },
                },
            }
        },
    }
