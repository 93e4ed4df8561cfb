"""The monitoring stack: the prometheus-operator CRDs and kube-prometheus-stack (two Helm releases), Grafana's
admin password, Alertmanager's receiver URLs, aiplat's alert rules, dashboards and PodMonitors.

- CRDs: the ``prometheus-operator-crds`` chart renders them as templates, so ``helm upgrade`` upgrades them;
  kube-prometheus-stack runs with ``crds.enabled: false`` and after the CRD release, so the first
  ``pulumi up`` never meets a missing kind.
  https://github.com/prometheus-community/helm-charts/tree/main/charts/kube-prometheus-stack#upgrading-chart
- Grafana's admin password: a ``random.RandomPassword`` (secret in state) in the Secret the chart reads
  (``grafana.admin.existingSecret``), never a Helm value.
- Receiver URLs: Pulumi secrets in one Secret that Alertmanager mounts (``alertmanagerSpec.secrets``) and
  reads through ``api_url_file`` / ``url_file``.
- Rules (``PrometheusRule``), dashboards (ConfigMaps the Grafana sidecar loads) and PodMonitors carry the
  label Prometheus selects by (``infra/monitoring/documents.py`` SELECT_LABEL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.monitoring import documents as mon
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class MonitoringStackArgs:
    """Charts (pinned), the stack's values, and the objects to declare beside it.

    ``rules``: PrometheusRule name -> spec; ``dashboards``: dashboard name -> JSON text;
    ``pod_monitors``: PodMonitor name -> spec (PodMonitors live in ``namespace`` and select across
    namespaces); ``service_monitors``: ServiceMonitor name -> spec (likewise); ``receiver_urls``: receiver
    name -> its URL (a secret output)."""

    namespace: str
    crds_chart: ChartRef
    stack_chart: ChartRef
    values: pulumi.Input[Mapping[str, Any]]
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dashboards: Mapping[str, str] = field(default_factory=dict)
    pod_monitors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    service_monitors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    receiver_urls: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


class MonitoringStack(pulumi.ComponentResource):
    """Prometheus, Alertmanager and Grafana with aiplat's rules, dashboards and scrape targets."""

    def __init__(self, name: str, args: MonitoringStackArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:monitoring:MonitoringStack", name, None, opts)
        ns = args.namespace

        def meta(obj: str, labels: Mapping[str, str] | None = None, **kw: Any) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=obj, namespace=ns, labels={**PART_OF, **(labels or {})}, **kw
            )

        self.crds: k8s.helm.v3.Release = chart_release(
            f"{name}-crds",
            release_name=mon.CRDS_RELEASE,
            chart=args.crds_chart,
            namespace=ns,
            values={},
            opts=child_options(self, opts),
        )
        self.grafana_password = random.RandomPassword(
            f"{name}-grafana-admin", length=32, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        grafana_secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata=meta(mon.GRAFANA_ADMIN_SECRET),
            type="Opaque",
            string_data={
                "admin-user": mon.GRAFANA_ADMIN_USER,
                "admin-password": self.grafana_password.result,
            },
            opts=child_options(self, opts),
        )
        receivers_secret = k8s.core.v1.Secret(
            f"{name}-receivers",
            metadata=meta(mon.RECEIVERS_SECRET),
            type="Opaque",
            # an empty Secret when there is no receiver: alertmanagerSpec.secrets names it either way
            string_data={r: pulumi.Output.secret(url) for r, url in sorted(args.receiver_urls.items())},
            opts=child_options(self, opts),
        )
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name=mon.KPS_RELEASE,
            chart=args.stack_chart,
            namespace=ns,
            values=args.values,
            skip_crds=True,
            opts=child_options(self, opts, depends_on=[self.crds, grafana_secret, receivers_secret]),
        )
        # Custom resources need their CRDs only; the operator picks them up whenever it runs.
        after_crds = child_options(self, opts, depends_on=[self.crds])

        def custom(kind: str, suffix: str, specs: Mapping[str, Mapping[str, Any]], prefix: str = "") -> dict:
            """One custom resource of ``kind`` per spec, named ``<prefix><key>``."""
            return {
                obj: k8s.apiextensions.CustomResource(
                    f"{name}-{suffix}-{obj}",
                    api_version=mon.MONITORING_API,
                    kind=kind,
                    metadata=meta(f"{prefix}{obj}", mon.SELECT),
                    spec=dict(spec),
                    opts=after_crds,
                )
                for obj, spec in sorted(specs.items())
            }

        self.rules = custom("PrometheusRule", "rule", args.rules, prefix="aiplat-")
        self.pod_monitors = custom("PodMonitor", "podmonitor", args.pod_monitors)
        self.service_monitors = custom("ServiceMonitor", "servicemonitor", args.service_monitors)
        self.dashboards = {
            board: k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{board}",
                metadata=meta(
                    f"aiplat-dashboard-{board}",
                    {mon.DASHBOARD_LABEL[0]: mon.DASHBOARD_LABEL[1]},
                    annotations={mon.DASHBOARD_FOLDER_ANNOTATION: mon.DASHBOARD_FOLDER},
                ),
                data={f"aiplat-{board}.json": text},
                opts=child_options(self, opts),
            )
            for board, text in sorted(args.dashboards.items())
        }
        self.grafana_admin_secret = grafana_secret.metadata.name
        self.register_outputs({"grafanaAdminSecret": self.grafana_admin_secret})
