"""Config of container log collection (``logs`` of the stack file): Fluent Bit on every node ships container
logs to CloudWatch Logs, one log group per namespace (``infra/core/lognames.py``).

Why Fluent Bit from the fluent/helm-charts chart, not AWS's ``aws-for-fluent-bit`` chart or the EKS
``amazon-cloudwatch-observability`` add-on: the add-on writes fixed groups
(``/aws/containerinsights/<cluster>/application``), not one per namespace, and adds the CloudWatch agent's
Container Insights metrics (billed per metric) next to our Prometheus; AWS's image follows upstream
releases weeks later and carries the same ``cloudwatch_logs`` output plugin. docs/platform/logs.md.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from infra.core.charts import ChartPin
from infra.core.config import Strict, check_log_retention


class FluentBitChart(ChartPin):
    """Fluent Bit as a DaemonSet (fluent/helm-charts ``charts/fluent-bit``)."""

    repo: str = Field(
        "https://fluent.github.io/helm-charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("fluent-bit", description="Chart name.")
    version: str = Field(
        "0.58.1",
        description="Default: fluent/helm-charts charts/fluent-bit/Chart.yaml 0.58.1 (appVersion 5.1.1, "
        "image cr.fluentbit.io/fluent/fluent-bit:5.1.1; commit 22a564d, 2026-08-17).",
    )


class LogsConfig(Strict):
    """Container logs in CloudWatch Logs (docs/platform/logs.md). Which namespaces follow from the stack:
    kube-system, monitoring, the inference and (train stacks) the trainer namespace."""

    enabled: bool = Field(True, description="Run the collector and declare the log groups.")
    fluent_bit: FluentBitChart = Field(default_factory=lambda: FluentBitChart())
    retention_days: int = Field(
        30,
        description="Days CloudWatch Logs keeps container logs (CloudWatch's allowed values: 1, 3, 5, 7, "
        "14, 30, 60, 90, ...). Stored bytes are billed per GB-month: see the cost note in "
        "docs/platform/logs.md.",
    )
    flush_s: int = Field(
        5,
        ge=1,
        le=60,
        description="Seconds between flushes to CloudWatch Logs (Fluent Bit's [SERVICE] Flush): how late a "
        "line shows up, against PutLogEvents calls per node.",
    )
    memory_limit_mib: int = Field(
        256,
        ge=128,
        le=4096,
        description="Memory limit of each collector pod (MiB); its buffers in memory (32 MiB of input, "
        "16 MiB of backlog) stay well under it.",
    )

    @field_validator("retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)
