"""Container log collection as data: Fluent Bit's chart values and pipeline, the IAM policies of the collector
and of Grafana, the collector's PodMonitor, Grafana's CloudWatch data source and the run dashboard. Pure.

Pipeline (Fluent Bit 5.1.1, the appVersion of chart fluent-bit 0.58.1): ``tail`` reads the kubelet's files
``/var/log/containers/<pod>_<namespace>_<container>-<id>.log`` of the covered namespaces only; the
``kubernetes`` filter takes pod, namespace and container from that file name (``Use_Tag_For_Meta``: no
Kubernetes API calls, no RBAC, nothing lost while the API server is slow); ``cloudwatch_logs`` writes each
line to the namespace's group and the pod container's stream (``infra/core/lognames.py``) into groups the
stack declares (``auto_create_group`` off).
https://docs.fluentbit.io/manual/pipeline/outputs/cloudwatch
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core import iam
from infra.core.kube import IRSA_ANNOTATION
from infra.core.lognames import container_log_group, container_log_groups_pattern, container_log_stream
from infra.core.namespaces import LOG_COLLECTOR_PORT, PART_OF
from infra.core.trainjobs import REPLICATED_JOB
from infra.pools.documents.nodes import GPU_TAINT_KEY

RELEASE = "fluent-bit"
# The chart's ServiceAccount (serviceAccount.name), which the collector's IRSA role trusts.
SERVICE_ACCOUNT = "fluent-bit"
# The chart's selector labels (templates/_helpers.tpl fluent-bit.selectorLabels): name and instance.
POD_LABELS = {"app.kubernetes.io/name": "fluent-bit", "app.kubernetes.io/instance": RELEASE}
# Container port "http" (chart values metricsPort 2020); the v2 Prometheus endpoint serves the cmetrics
# counters the alerts read (src/http_server/api/v2/metrics.c at v5.1.1).
METRICS_PORT = LOG_COLLECTOR_PORT
METRICS_PORT_NAME = "http"
METRICS_PATH = "/api/v2/metrics/prometheus"
JOB = "fluent-bit"
OUTPUT_ALIAS = "cloudwatch"
# Offsets (tail DB) and the filesystem buffer on the node: a restarted collector resumes where it stopped
# and keeps what it had not sent yet.
STATE_DIR = "/var/fluent-bit/state"
# The kubelet's container log files (symlinks into /var/log/pods, both under /var/log).
CONTAINER_LOGS = "/var/log/containers"
# Grafana's sidecar loads data sources from ConfigMaps with this label (kube-prometheus-stack 88.5.3 values
# grafana.sidecar.datasources.label / labelValue) in Grafana's namespace.
DATASOURCE_LABEL = ("grafana_datasource", "1")
DATASOURCE_UID = "aiplat-cloudwatch"
DASHBOARD_UID = "aiplat-run"
LOG_GROUP_VARIABLE = "loggroup"  # the run dashboard's pick of the group its logs panel reads
# Actions the cloudwatch_logs plugin calls with auto_create_group off: CreateLogStream and PutLogEvents
# (plugins/out_cloudwatch_logs/cloudwatch_api.c at v5.1.1; it never calls DescribeLogStreams: an existing
# stream answers ResourceAlreadyExistsException, which the plugin takes as success).
WRITER_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
# What Grafana's CloudWatch data source calls for Logs Insights queries and log lookups
# (https://grafana.com/docs/grafana/latest/datasources/aws-cloudwatch/#configure-iam-policies).
READER_GROUP_ACTIONS = (
    "logs:FilterLogEvents",
    "logs:GetLogEvents",
    "logs:GetLogGroupFields",
    "logs:StartQuery",
)
# GetQueryResults and StopQuery take a query id, DescribeLogGroups lists the account's groups: IAM accepts
# only "*" for them (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html).
READER_QUERY_ACTIONS = ("logs:DescribeLogGroups", "logs:GetQueryResults", "logs:StopQuery")


def log_groups(cluster_name: str, namespaces: Sequence[str]) -> dict[str, str]:
    """Namespace -> its log group, every namespace once (sorted, so URNs and plans are stable)."""
    if not namespaces:
        raise ValueError("no namespace to collect logs from; name at least kube-system")
    return {ns: container_log_group(cluster_name, ns) for ns in sorted(set(namespaces))}


def tail_paths(namespaces: Sequence[str]) -> str:
    """The tail input's ``Path``: only the covered namespaces' files (the kubelet names them
    ``<pod>_<namespace>_<container>-<container id>.log``; namespaces hold no ``_``)."""
    return ",".join(f"{CONTAINER_LOGS}/*_{ns}_*.log" for ns in sorted(set(namespaces)))


def record_group(cluster_name: str) -> str:
    """The output's ``log_group_template``: the record's namespace in the C4 group name."""
    return container_log_group(cluster_name, "$kubernetes['namespace_name']")


def record_stream() -> str:
    """The output's ``log_stream_template``: the record's pod and container in the C4 stream name."""
    return container_log_stream("$kubernetes['pod_name']", "$kubernetes['container_name']")


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """What the Fluent Bit pipeline depends on. ``fallback_namespace``: the group a record goes to when its
    namespace cannot be read (a stream prefixed ``unattributed.``), one of ``namespaces``."""

    cluster_name: str
    region: str
    namespaces: Sequence[str]
    fallback_namespace: str
    flush_s: int


def pipeline(s: PipelineSettings) -> dict[str, str]:
    """The chart's ``config`` sections (``service``, ``inputs``, ``filters``, ``outputs``, classic mode).

    The chart passes each through Helm's ``tpl``: nothing here may contain ``{{``."""
    if s.fallback_namespace not in s.namespaces:
        raise ValueError(f"fallback namespace {s.fallback_namespace!r} is not one of {sorted(s.namespaces)}")
    service = f"""[SERVICE]
    Daemon Off
    Flush {s.flush_s}
    Log_Level info
    Parsers_File /fluent-bit/etc/parsers.conf
    HTTP_Server On
    HTTP_Listen 0.0.0.0
    HTTP_Port {METRICS_PORT}
    Health_Check On
    storage.path {STATE_DIR}/buffer
    storage.sync normal
    storage.backlog.mem_limit 16M
"""
    inputs = f"""[INPUT]
    Name tail
    Tag kube.*
    Path {tail_paths(s.namespaces)}
    multiline.parser cri
    DB {STATE_DIR}/tail.db
    DB.locking true
    Mem_Buf_Limit 32MB
    storage.type filesystem
    Skip_Long_Lines On
    Refresh_Interval 10
"""
    filters = """[FILTER]
    Name kubernetes
    Match kube.*
    Use_Tag_For_Meta On
    Labels Off
    Annotations Off
    Merge_Log Off
    Keep_Log On
"""
    outputs = f"""[OUTPUT]
    Name cloudwatch_logs
    Alias {OUTPUT_ALIAS}
    Match kube.*
    region {s.region}
    log_group_name {container_log_group(s.cluster_name, s.fallback_namespace)}
    log_group_template {record_group(s.cluster_name)}
    log_stream_prefix unattributed.
    log_stream_template {record_stream()}
    log_key log
    auto_create_group Off
    Retry_Limit 5
    storage.total_limit_size 1G
"""
    sections = {"service": service, "inputs": inputs, "filters": filters, "outputs": outputs}
    for name, text in sections.items():
        if "{{" in text:
            raise ValueError(f"config.{name} contains '{{{{', which the chart's tpl would evaluate")
    return sections


def node_tolerations(taint_keys: Sequence[str]) -> list[dict[str, Any]]:
    """Tolerations of every taint key the stack's nodes carry: the GPU pools' taint
    (``infra/pools/documents/nodes.py``, also on Karpenter's GPU NodePools) and each pool's configured
    taints (``taint_keys``), any value and effect: a collector kept off a node loses that node's logs.
    The DaemonSet controller adds the node-condition tolerations (not-ready, pressure) itself."""
    return [{"key": k, "operator": "Exists"} for k in sorted({GPU_TAINT_KEY, *taint_keys})]


@dataclass(frozen=True, kw_only=True)
class CollectorValues:
    """What the chart's values depend on besides the pipeline: the collector's role ARN (a Pulumi output
    in the plan, typed loosely: documents import no Pulumi) and its memory limit, the
    taint keys of the stack's pools."""

    role_arn: Any
    memory_limit_mib: int
    taint_keys: Sequence[str] = ()


def fluent_bit_values(p: PipelineSettings, v: CollectorValues) -> dict[str, Any]:
    """fluent/helm-charts ``fluent-bit`` 0.58.1 values (``charts/fluent-bit/values.yaml`` at commit
    22a564d): a DaemonSet on every node, reading the node's ``/var/log`` read-only, with its state on the
    node, no Kubernetes API access (tag metadata), AWS credentials through IRSA."""
    return {
        "kind": "DaemonSet",
        "fullnameOverride": RELEASE,
        # the chart's helm test pulls busybox:latest from Docker Hub; nothing runs `helm test`
        "testFramework": {"enabled": False},
        "serviceAccount": {
            "create": True,
            "name": SERVICE_ACCOUNT,
            "annotations": {IRSA_ANNOTATION: v.role_arn},
        },
        # Use_Tag_For_Meta: the filter never calls the API server, so no ClusterRole is needed
        "rbac": {"create": False},
        # on every node before workloads, and never evicted first under node pressure
        "priorityClassName": "system-node-critical",
        "tolerations": node_tolerations(v.taint_keys),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "podLabels": dict(PART_OF),
        # Root reads the kubelet's 0640 root-owned files; nothing else: no capability, no writes but the
        # state host path.
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"memory": f"{v.memory_limit_mib}Mi"},
        },
        "metricsPort": METRICS_PORT,
        "flush": p.flush_s,
        "daemonSetVolumes": [
            {"name": "varlog", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "state", "hostPath": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
        ],
        "daemonSetVolumeMounts": [
            {"name": "varlog", "mountPath": "/var/log", "readOnly": True},
            {"name": "state", "mountPath": STATE_DIR},
        ],
        "config": {**pipeline(p), "customParsers": ""},
        # Prometheus scrapes it through our PodMonitor (collector_pod_monitor_spec), not the chart's.
        "serviceMonitor": {"enabled": False},
        "prometheusRule": {"enabled": False},
        "dashboards": {"enabled": False},
    }


def groups_arn(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """Every container log group of the cluster, their streams included, as one ARN pattern: IAM matches
    log-group actions on ``<group ARN>:*`` and stream actions on ``<group ARN>:log-stream:<stream>``, all
    under ``log-group:/aiplat/<cluster>/containers/*`` (infra/core/lognames.py); the ``/containers/`` after
    the cluster name keeps another cluster's groups out. One ARN whatever the number of namespaces and teams
    (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html,
    resource types log-group and log-stream)."""
    pattern = container_log_groups_pattern(cluster_name)
    return f"arn:{partition}:logs:{region}:{account_id}:log-group:{pattern}"


def writer_policy(groups: str) -> iam.Policy:
    """The collector's policy: create streams in and put events to the cluster's container log groups
    (``groups``: ``groups_arn``) only; no CreateLogGroup: the stack declares them, with retention and the
    logs key, so a namespace without its group is written nowhere."""
    return iam.policy(
        {
            "Sid": "WriteOwnContainerLogGroups",
            "Effect": "Allow",
            "Action": list(WRITER_ACTIONS),
            "Resource": [groups],
        }
    )


def reader_policy(groups: str) -> iam.Policy:
    """Grafana's policy: Logs Insights queries and log reads on the cluster's container log groups
    (``groups``: ``groups_arn``) only."""
    return iam.policy(
        {
            "Sid": "QueryContainerLogGroups",
            "Effect": "Allow",
            "Action": list(READER_GROUP_ACTIONS),
            "Resource": [groups],
        },
        {
            "Sid": "QueryResults",
            "Effect": "Allow",
            "Action": list(READER_QUERY_ACTIONS),
            "Resource": "*",
        },
    )


def collector_pod_monitor_spec(namespace: str) -> dict[str, Any]:
    """Every collector pod's Prometheus endpoint, as job ``fluent-bit`` with label ``node`` (what the
    alerts group by)."""
    return {
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {"matchLabels": dict(POD_LABELS)},
        "podMetricsEndpoints": [
            {
                "port": METRICS_PORT_NAME,
                "path": METRICS_PATH,
                "interval": "30s",
                "relabelings": [
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                        "targetLabel": "node",
                        "action": "replace",
                    },
                    {"targetLabel": "job", "replacement": JOB, "action": "replace"},
                ],
            }
        ],
    }


def datasource_provisioning(region: str) -> dict[str, Any]:
    """Grafana's CloudWatch data source (provisioning file format, apiVersion 1). ``authType: default``:
    the AWS SDK's default chain, which takes Grafana's IRSA web identity token.
    https://grafana.com/docs/grafana/latest/datasources/aws-cloudwatch/#provision-the-data-source"""
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "CloudWatch",
                "type": "cloudwatch",
                "uid": DATASOURCE_UID,
                "access": "proxy",
                "editable": False,
                "jsonData": {"authType": "default", "defaultRegion": region},
            }
        ],
    }


def run_stream_pattern() -> str:
    """The Logs Insights regex of one run's streams (``$run``, ``$rank`` are the dashboard's variables):
    JobSet names a TrainJob's pods ``<trainjob>-node-0-<rank>-<5 random>`` (infra/core/trainjobs.py)."""
    return f"/^${{run}}-{REPLICATED_JOB}-0-${{rank}}-[a-z0-9]{{5}}\\./"


def _metric_panel(title: str, exprs: Sequence[str], y: int) -> dict[str, Any]:
    return {
        "title": title,
        "type": "timeseries",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": 0, "y": y},
        "targets": [{"expr": e, "refId": chr(ord("A") + i)} for i, e in enumerate(exprs)],
    }


def run_dashboard(*, cluster_name: str, group_arns_by_name: Mapping[str, str]) -> dict[str, Any]:
    """One run (TrainJob) on one page: its metrics (Prometheus, label ``trainjob``) on the left, its ranks'
    container logs (CloudWatch Logs Insights over the training namespaces' groups, streams of the run's
    pods) on the right, for the dashboard's time range; the logs stay after the pods are gone.
    ``group_arns_by_name``: log group name -> ARN (the groups the query reads).

    The query reads the group picked in variable ``loggroup`` (the run's namespace), one at a time:
    StartQuery takes at most 50 groups
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_StartQuery.html), and a stack has
    a training namespace per team. Grafana puts the variable's value (the ARN) in the query's log groups
    (public/app/plugins/datasource/cloudwatch/utils/templateVariableUtils.ts)."""
    run = 'trainjob="$run"'
    query = (
        "fields @timestamp, @logStream, @message"
        f" | filter @logStream like {run_stream_pattern()}"
        " | sort @timestamp desc | limit 1000"
    )
    names = sorted(group_arns_by_name)
    logs_panel = {
        "title": "Logs of the run's ranks (CloudWatch Logs)",
        "type": "logs",
        "datasource": {"type": "cloudwatch", "uid": DATASOURCE_UID},
        "gridPos": {"h": 32, "w": 12, "x": 12, "y": 0},
        "options": {"showTime": True, "wrapLogMessage": True, "sortOrder": "Descending"},
        "targets": [
            {
                "refId": "A",
                "datasource": {"type": "cloudwatch", "uid": DATASOURCE_UID},
                "queryMode": "Logs",
                "region": "default",
                "expression": query,
                "logGroups": [{"arn": f"${LOG_GROUP_VARIABLE}", "name": f"${LOG_GROUP_VARIABLE}"}],
            }
        ],
    }
    return {
        "uid": DASHBOARD_UID,
        "title": "aiplat / Run",
        "description": f"One training run's metrics and its ranks' logs side by side (cluster "
        f"{cluster_name}; logs: docs/platform/logs.md).",
        "tags": ["aiplat", "training", "logs"],
        "editable": False,
        "schemaVersion": 39,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "utc",
        "graphTooltip": 1,
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"selected": False, "text": "Prometheus", "value": "prometheus"},
                    "hide": 0,
                },
                {
                    "name": "run",
                    "label": "Run (TrainJob)",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": "label_values(trainer_step, trainjob)", "refId": "run-var"},
                    "definition": "label_values(trainer_step, trainjob)",
                    "refresh": 2,
                    "multi": False,
                    "includeAll": False,
                    "sort": 1,
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": LOG_GROUP_VARIABLE,
                    "label": "Log group (the run's namespace)",
                    "type": "custom",
                    # Grafana's custom variable: 'text : value' pairs, comma-separated
                    "query": ",".join(f"{n} : {group_arns_by_name[n]}" for n in names),
                    "options": [
                        {"text": n, "value": group_arns_by_name[n], "selected": i == 0}
                        for i, n in enumerate(names)
                    ],
                    "current": {"text": names[0], "value": group_arns_by_name[names[0]]} if names else {},
                    "multi": False,
                    "includeAll": False,
                    "hide": 0,
                },
                {
                    "name": "rank",
                    "label": "Node rank (regex)",
                    "type": "textbox",
                    "query": "[0-9]+",
                    "current": {"text": "[0-9]+", "value": "[0-9]+"},
                    "hide": 0,
                },
            ]
        },
        "annotations": {"list": []},
        "panels": [
            _metric_panel("Loss", [f"trainer_loss{{{run}}}"], 0),
            _metric_panel("Tokens per second", [f'trainer_tokens_per_second{{{run},rank="0"}}'], 8),
            _metric_panel(
                "Step and last committed checkpoint",
                [
                    f'trainer_step{{{run},rank="0"}}',
                    f'trainer_checkpoint_last_committed_step{{{run},rank="0"}}',
                ],
                16,
            ),
            _metric_panel("torchrun restarts", [f'trainer_restart_count{{{run},rank="0"}}'], 24),
            logs_panel,
        ],
    }
