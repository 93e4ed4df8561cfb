"""The container log store and its collector.

- ``LogStore`` (AWS): one CloudWatch Logs group per covered namespace (retention, the stack's logs key),
  the collector's IRSA role that may only write to those groups, and Grafana's IRSA role that may only
  query them. Created before the monitoring stack, whose Grafana service account carries the reader role.
- ``LogCollector`` (Kubernetes): Fluent Bit (pinned chart) on every node, its PodMonitor, Grafana's
  CloudWatch data source and the run dashboard (ConfigMaps the Grafana sidecar loads).

Log groups have fixed names (``infra/core/lognames.py``, what ``aiplat train logs`` reads) and are
protected with the stack's data: a ``pulumi destroy`` of a prod stack keeps a run's logs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.logs import documents as logs_docs
from infra.monitoring import documents as mon
from infra.resources.aws import fixed_name, protected
from infra.resources.helm import chart_release
from infra.resources.irsa import attached_policy, irsa_role
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class LogStoreArgs:
    """``groups``: namespace -> log group name; ``groups_arn``: every container log group of the cluster as
    one ARN pattern (the roles' policies name it before the groups exist); the collector's and Grafana's
    service accounts (namespace, name)."""

    groups: Mapping[str, str]
    groups_arn: str
    retention_days: int
    logs_key_arn: pulumi.Input[str]
    protect: bool
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    collector_service_account: tuple[str, str]
    grafana_service_account: tuple[str, str]
    description_prefix: str


class LogStore(pulumi.ComponentResource):
    """The container log groups and the two roles scoped to them."""

    collector_role_arn: pulumi.Output[str]
    grafana_role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: LogStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:logs:LogStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.groups = {
            ns: aws.cloudwatch.LogGroup(
                f"{name}-{ns}",
                name=group,
                retention_in_days=args.retention_days,
                kms_key_id=args.logs_key_arn,
                opts=protected(fixed_name(child), args.protect),
            )
            for ns, group in sorted(args.groups.items())
        }
        # The roles depend on the groups only through their policies' ARNs: no ordering needed, a role
        # may name a group before it exists.
        roles: dict[str, aws.iam.Role] = {}
        for role, (namespace, sa), policy, what in (
            (
                "collector",
                args.collector_service_account,
                logs_docs.writer_policy(args.groups_arn),
                "container log collector: write the container log groups",
            ),
            (
                "grafana",
                args.grafana_service_account,
                logs_docs.reader_policy(args.groups_arn),
                "Grafana: query the container log groups",
            ),
        ):
            roles[role] = irsa_role(
                f"{name}-{role}-role",
                oidc_provider_arn=args.oidc_provider_arn,
                oidc_issuer=args.oidc_issuer,
                namespace=namespace,
                service_account=sa,
                description=f"{args.description_prefix}: {what} ({namespace}/{sa})",
                opts=child,
            )
            attached_policy(
                f"{name}-{role}-policy",
                role=roles[role],
                description=f"{args.description_prefix}: {what}",
                policy=json.dumps(policy),
                attachment_name=f"{name}-{role}-attachment",
                opts=child,
            )
        self.collector_role_arn = roles["collector"].arn
        self.grafana_role_arn = roles["grafana"].arn
        self.register_outputs(
            {"collector_role_arn": self.collector_role_arn, "grafana_role_arn": self.grafana_role_arn}
        )


@dataclass(frozen=True, kw_only=True)
class LogCollectorArgs:
    """The chart (pinned) and its values, the namespace (the node agents', EXPORTERS_NAMESPACE), the
    PodMonitor's spec, the data source provisioning and the run dashboard (None: no run to show, an infer
    stack), as data."""

    namespace: str
    chart: ChartRef
    values: pulumi.Input[Mapping[str, Any]]
    pod_monitor: Mapping[str, Any]
    datasource: Mapping[str, Any]
    dashboard: Mapping[str, Any] | None = None


class LogCollector(pulumi.ComponentResource):
    """Fluent Bit on every node, scraped by Prometheus; Grafana's data source and run dashboard."""

    def __init__(self, name: str, args: LogCollectorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:logs:LogCollector", name, None, opts)
        ns = args.namespace

        def meta(obj: str, labels: Mapping[str, str], **kw: Any) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=obj, namespace=ns, labels={**PART_OF, **labels}, **kw)

        self.release = chart_release(
            f"{name}-release",
            release_name=logs_docs.RELEASE,
            chart=args.chart,
            namespace=ns,
            values=args.values,
            opts=child_options(self, opts),
        )
        self.pod_monitor = k8s.apiextensions.CustomResource(
            f"{name}-podmonitor",
            api_version=mon.MONITORING_API,
            kind="PodMonitor",
            metadata=meta(logs_docs.JOB, mon.SELECT),
            spec=dict(args.pod_monitor),
            opts=child_options(self, opts),
        )
        self.datasource = k8s.core.v1.ConfigMap(
            f"{name}-datasource",
            metadata=meta(
                "aiplat-datasource-cloudwatch", {logs_docs.DATASOURCE_LABEL[0]: logs_docs.DATASOURCE_LABEL[1]}
            ),
            data={"cloudwatch.yaml": json.dumps(dict(args.datasource), indent=2, sort_keys=True)},
            opts=child_options(self, opts),
        )
        self.dashboard = None
        if args.dashboard is not None:
            self.dashboard = k8s.core.v1.ConfigMap(
                f"{name}-dashboard-run",
                metadata=meta(
                    "aiplat-dashboard-run",
                    {mon.DASHBOARD_LABEL[0]: mon.DASHBOARD_LABEL[1]},
                    annotations={mon.DASHBOARD_FOLDER_ANNOTATION: mon.DASHBOARD_FOLDER},
                ),
                data={"aiplat-run.json": json.dumps(dict(args.dashboard), indent=2, sort_keys=True)},
                opts=child_options(self, opts),
            )
        self.register_outputs({})
