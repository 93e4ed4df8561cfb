"""Config of the monitoring stack: Prometheus, Alertmanager and Grafana (kube-prometheus-stack), dcgm-exporter
on GPU nodes and aiplat's EFA exporter on EFA nodes.

Every upstream chart is pinned here with the source of its default (the snapshots read on 2026-08-20..22).
Alert receivers are named here; their URLs are Pulumi secrets (``aiplat:alertmanager-<receiver>``, set with
``pulumi config set --secret``), never values in this section.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.core.charts import ChartPin
from infra.core.config import NAME_RE, Strict
from infra.core.project import DOCS_URL

# Prometheus durations (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#duration)
_PROM_DURATION = r"^(([0-9]+)(y|w|d|h|m|s|ms))+$"
# Kubernetes quantities for volume sizes, binary units only (Gi, Ti)
_SIZE = r"^[1-9][0-9]*(Gi|Ti)$"
# Prometheus --storage.tsdb.retention.size units
_RETENTION_SIZE = r"^[1-9][0-9]*(MB|GB|TB|MiB|GiB|TiB)$"
_SLACK_CHANNEL = r"^[#@]?[a-z0-9][a-z0-9._-]{0,79}$"
# Where a receiver's URL lives: the Pulumi secret aiplat:alertmanager-<receiver>
RECEIVER_SECRET_PREFIX = "alertmanager-"


_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# Month-to-date spend (rules/cost.yaml) reads up to 31 days back, plus the hour it averages over.
BUDGET_RETENTION_S = 32 * 86400


def duration_seconds(v: str) -> float:
    """Seconds of a Prometheus duration (``_PROM_DURATION``, e.g. ``30d``, ``1h30m``)."""
    return sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", v))


class KubePrometheusStackChart(ChartPin):
    """kube-prometheus-stack: the Prometheus operator, Prometheus, Alertmanager, Grafana, node-exporter and
    kube-state-metrics. Installed with its CRDs off: they come from ``operator_crds``."""

    repo: str = Field(
        "https://prometheus-community.github.io/helm-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("kube-prometheus-stack", description="Chart name.")
    version: str = Field(
        "88.5.3",
        description="Default: prometheus-community/helm-charts charts/kube-prometheus-stack/Chart.yaml "
        "88.5.3 (appVersion v0.93.1; commit ea930ba, 2026-08-21): Prometheus v3.14.0, Alertmanager v0.34.0, "
        "Grafana chart 12.11.1, node-exporter chart 4.56.1, kube-state-metrics chart 8.4.0.",
    )


class OperatorCrdsChart(ChartPin):
    """The prometheus-operator CRDs as their own release. Its CRDs are chart templates, so ``helm upgrade``
    upgrades them (kube-prometheus-stack keeps its copy in ``crds/``, which Helm installs once and never
    upgrades). Keep its appVersion equal to kube-prometheus-stack's."""

    repo: str = Field(
        "https://prometheus-community.github.io/helm-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("prometheus-operator-crds", description="Chart name.")
    version: str = Field(
        "31.0.1",
        description="Default: prometheus-community/helm-charts charts/prometheus-operator-crds/Chart.yaml "
        "31.0.1 (appVersion v0.93.1, the operator of kube-prometheus-stack 88.5.3; commit 4529d7b, "
        "2026-08-10).",
    )


class DcgmExporterChart(ChartPin):
    """NVIDIA dcgm-exporter on every GPU node, with aiplat's counters file
    (``infra/monitoring/dcgm/counters.csv``)."""

    repo: str = Field(
        "https://nvidia.github.io/dcgm-exporter/helm-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("dcgm-exporter", description="Chart name.")
    version: str = Field(
        "4.8.2",
        description="Default: NVIDIA/dcgm-exporter deployment/Chart.yaml 4.8.2 (tag 4.5.3-4.8.2, commit "
        "691c927, 2026-05-06; image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless).",
    )


class PrometheusSettings(Strict):
    """Prometheus' storage and scraping."""

    retention: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "15d", description="How long samples are kept (Prometheus duration, e.g. 15d)."
    )
    retention_size: Annotated[str, Field(pattern=_RETENTION_SIZE)] | None = Field(
        None,
        description="Also delete the oldest blocks past this size (e.g. 90GiB); keep it below storage_size "
        "(WAL and compaction need room). None: by time only.",
    )
    storage_size: Annotated[str, Field(pattern=_SIZE)] = Field(
        "100Gi", description="Persistent volume of each Prometheus replica (gp3 via the default class)."
    )
    storage_class: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")] | None = Field(
        None, description="StorageClass of the volume; None: cluster_services.storage_class.name."
    )
    scrape_interval: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "30s", description="Default scrape interval (the chart's default when empty is 30s)."
    )
    replicas: Annotated[int, Field(ge=1, le=3)] = Field(
        1, description="Prometheus replicas (each scrapes everything and keeps its own volume)."
    )


class Severity(StrEnum):
    """Severities of aiplat's alert rules: ``critical`` pages, ``warning`` notifies."""

    critical = "critical"
    warning = "warning"


class ReceiverKind(StrEnum):
    """Alertmanager integrations a receiver can be: a Slack incoming webhook or a generic webhook
    (PagerDuty Events v2, Opsgenie, an internal bridge).
    https://prometheus.io/docs/alerting/latest/configuration/"""

    slack = "slack"
    webhook = "webhook"


class ReceiverConfig(Strict):
    """One Alertmanager receiver. Its URL is the Pulumi secret ``aiplat:alertmanager-<name>`` (set with
    ``pulumi config set --secret aiplat:alertmanager-<name> <url>``), handed to Alertmanager through a
    Kubernetes Secret and read from a file (``api_url_file`` / ``url_file``), so it is in no Helm value."""

    kind: ReceiverKind = Field(description="slack or webhook.")
    severities: list[Severity] = Field(
        default_factory=lambda: [Severity.critical],
        min_length=1,
        description="Alerts of these severities go to this receiver (critical pages, warning notifies).",
    )
    channel: Annotated[str, Field(pattern=_SLACK_CHANNEL)] | None = Field(
        None, description="Slack only: channel to post to (default: the webhook's own channel)."
    )
    send_resolved: bool = Field(True, description="Also notify when the alert resolves.")

    @model_validator(mode="after")
    def _channel_is_slack(self) -> ReceiverConfig:
        if self.channel is not None and self.kind is not ReceiverKind.slack:
            raise ValueError(f"channel {self.channel!r} is for slack receivers; remove it or use kind: slack")
        return self

    @field_validator("severities")
    @classmethod
    def _unique(cls, v: list[Severity]) -> list[Severity]:
        if len(set(v)) != len(v):
            raise ValueError(f"{[str(s) for s in v]} names a severity twice")
        return v


class AlertmanagerSettings(Strict):
    """Alertmanager: receivers by name, grouping and storage."""

    receivers: dict[str, ReceiverConfig] = Field(
        default_factory=dict,
        description="Receivers keyed by name; each URL is the Pulumi secret aiplat:alertmanager-<name>. "
        "Empty: alerts are only visible in Alertmanager and Grafana.",
    )
    group_wait: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "30s", description="Wait before the first notification of a group (lets one incident's alerts join)."
    )
    group_interval: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "5m", description="Wait before notifying about new alerts added to a group already notified."
    )
    repeat_interval: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "4h", description="Re-send a still-firing group after this long."
    )
    storage_size: Annotated[str, Field(pattern=_SIZE)] = Field(
        "10Gi", description="Persistent volume for silences and notification state."
    )

    @field_validator("receivers")
    @classmethod
    def _names(cls, v: dict[str, ReceiverConfig]) -> dict[str, ReceiverConfig]:
        for name in v:
            if not NAME_RE.match(name) or name == "null":
                raise ValueError(
                    f"receiver name {name!r} must be 2-32 characters of lower-case letters, digits and '-', "
                    "starting with a letter, and not 'null' (the stack's drop receiver)"
                )
        return v


# An image reference by digest (the tag, when given, is informative): repository[:tag]@sha256:<64 hex>.
EFA_EXPORTER_IMAGE_PATTERN = r"^[a-z0-9.-]+(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]+)?@sha256:[a-f0-9]{64}$"


def _by_digest(v: str) -> str:
    if not re.match(EFA_EXPORTER_IMAGE_PATTERN, v):
        raise ValueError(
            f"{v!r} is not an image pinned by digest; append @sha256:<digest> (docker buildx imagetools "
            "inspect <image> prints it)"
        )
    return v


# Docker's official python image (standard library only is all our in-cluster scripts need), by digest.
PYTHON_IMAGE = (
    "public.ecr.aws/docker/library/python:3.12.12-slim-bookworm"
    "@sha256:593bd06efe90efa80dc4eee3948be7c0fde4134606dd40d8dd8dbcade98e669c"
)


class MonitoringConfig(Strict):
    """The monitoring stack (docs/platform/monitoring.md), in ``cluster_services.monitoring_namespace``."""

    enabled: bool = Field(True, description="Install the monitoring stack.")
    kube_prometheus_stack: KubePrometheusStackChart = Field(
        default_factory=lambda: KubePrometheusStackChart()
    )
    operator_crds: OperatorCrdsChart = Field(default_factory=lambda: OperatorCrdsChart())
    dcgm_exporter: DcgmExporterChart = Field(default_factory=lambda: DcgmExporterChart())
    efa_exporter_image: Annotated[str, AfterValidator(_by_digest)] = Field(
        PYTHON_IMAGE,
        description="Image that runs the EFA exporter script (standard library only), by digest (a tag can "
        "be re-pushed). Default: Docker's official python image, tag from docker-library/official-images "
        "library/python (commit 01732a4), through the ECR Public mirror of Docker official images (no "
        "Docker Hub pull limits); the digest is the one public Dockerfiles pin for that tag (stored "
        "sources, 2026): confirm it with `docker buildx imagetools inspect` before relying on it.",
    )
    budget_hold_image: Annotated[str, AfterValidator(_by_digest)] = Field(
        PYTHON_IMAGE,
        description="Image that runs the budget hold (infra/monitoring/budget/budget_hold.py, standard "
        "library only) on train stacks with team budgets, by digest. Default: the EFA exporter's image.",
    )
    idle_gpus_for: Annotated[str, Field(pattern=_PROM_DURATION)] = Field(
        "30m",
        description="How long a training job may hold GPUs at under 5 % utilisation before JobGpusIdle "
        "fires (Prometheus duration; the alert's `for`). Default 30m: longer than a checkpoint restore, "
        "the data loader's warm-up and a compile at start, which look idle to DCGM.",
    )
    prometheus: PrometheusSettings = Field(default_factory=lambda: PrometheusSettings())
    alertmanager: AlertmanagerSettings = Field(default_factory=lambda: AlertmanagerSettings())
    docs_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?/$")] = Field(
        DOCS_URL,
        description="Base URL of the documentation site, ending in '/'. Every alert's runbook_url is "
        "<docs_url>runbooks/<alert name>.html (one page per alert), a link a pager or chat client opens; "
        "point it at your own build of docs/ (`mkdocs build`) to serve runbooks you changed.",
    )

    @model_validator(mode="after")
    def _retention_fits(self) -> MonitoringConfig:
        size = self.prometheus.retention_size
        if size is None:
            return self
        m = re.fullmatch(r"(\d+)(MB|GB|TB|MiB|GiB|TiB)", size)
        assert m  # the field's pattern
        factor = {"MB": 1e6, "GB": 1e9, "TB": 1e12, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[m.group(2)]
        v = re.fullmatch(r"(\d+)(Gi|Ti)", self.prometheus.storage_size)
        assert v
        volume = int(v.group(1)) * (2**30 if v.group(2) == "Gi" else 2**40)
        if int(m.group(1)) * factor > 0.9 * volume:
            raise ValueError(
                f"prometheus.retention_size {size} leaves less than 10% of storage_size "
                f"{self.prometheus.storage_size} for the WAL and compaction; lower it or grow the volume"
            )
        return self

    def receiver_secret_keys(self) -> dict[str, str]:
        """Receiver name -> the Pulumi config key (without namespace) holding its URL."""
        return {name: f"{RECEIVER_SECRET_PREFIX}{name}" for name in self.alertmanager.receivers}
