"""Exporters on the accelerator nodes: NVIDIA dcgm-exporter (Helm release, GPU pools) and aiplat's EFA
exporter (a ConfigMap with the script, a DaemonSet on EFA nodes and its PodMonitor).

dcgm-exporter: https://github.com/NVIDIA/dcgm-exporter (chart ``deployment/``), values from
``infra/monitoring/documents.py``. EFA exporter: why it exists and where its counters come from is in the
script's docstring (``infra/monitoring/efa/efa_exporter.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.core.namespaces import PART_OF
from infra.monitoring import documents as mon
from infra.resources.helm import ChartComponent
from infra.resources.options import child_options


class DcgmExporter(ChartComponent):
    """dcgm-exporter on every GPU node, with its ServiceMonitor (created by the chart)."""

    TYPE = "aiplat:exporters:DcgmExporter"


@dataclass(frozen=True, kw_only=True)
class EfaExporterArgs:
    """The image that runs the script, the script's file name and text, and the namespace."""

    namespace: str
    image: str
    script_name: str
    script: str


class EfaExporter(pulumi.ComponentResource):
    """The EFA exporter: script ConfigMap, DaemonSet on EFA nodes, PodMonitor selected by Prometheus."""

    def __init__(self, name: str, args: EfaExporterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:exporters:EfaExporter", name, None, opts)
        labels = {**PART_OF, **mon.EFA_SELECTOR}
        script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=mon.EFA_EXPORTER, namespace=args.namespace, labels=labels
            ),
            data={args.script_name: args.script},
            opts=child_options(self, opts),
        )
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=mon.EFA_EXPORTER, namespace=args.namespace, labels=labels
            ),
            spec=mon.efa_exporter_daemonset_spec(
                image=args.image, config_map=mon.EFA_EXPORTER, script_key=args.script_name
            ),
            opts=child_options(self, opts, depends_on=[script]),
        )
        self.pod_monitor = k8s.apiextensions.CustomResource(
            f"{name}-podmonitor",
            api_version=mon.MONITORING_API,
            kind="PodMonitor",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=mon.EFA_EXPORTER, namespace=args.namespace, labels={**labels, **mon.SELECT}
            ),
            spec=mon.efa_exporter_pod_monitor_spec(args.namespace),
            opts=child_options(self, opts),
        )
        self.register_outputs({})
