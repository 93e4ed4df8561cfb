"""Keda: the external metrics adapter behind the inference HorizontalPodAutoscaler.

Order: namespace (Pod Security ``restricted``) and its NetworkPolicies -> release (CRDs are templates of the
chart, so ScaledObjects wait for the release). A NetworkPolicy in the monitoring namespace lets the operator
query Prometheus. Documents from ``infra/inference/documents/keda.py``. https://keda.sh/docs/2.20/deploy/#helm
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.component.namespaces import own_namespace
from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.inference.documents import keda
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class KedaArgs:
    """The pinned chart and its values, KEDA's namespace (labels, NetworkPolicies by name) and the policy
    that admits it into ``monitoring_namespace``."""

    chart: ChartRef
    namespace: str
    namespace_labels: Mapping[str, str]
    values: Mapping[str, Any]
    network_policies: Mapping[str, Mapping[str, Any]]
    monitoring_namespace: str
    monitoring_policy: Mapping[str, Any]


class Keda(pulumi.ComponentResource):
    """KEDA's operator, metrics server (``external.metrics.k8s.io``) and admission webhooks."""

    def __init__(self, name: str, args: KedaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:keda:Keda", name, None, opts)
        ns = own_namespace(
            f"{name}-namespace",
            name=args.namespace,
            labels=args.namespace_labels,
            opts=child_options(self, opts),
        )
        policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=policy, namespace=args.namespace, labels=PART_OF),
                spec=dict(spec),
                opts=child_options(self, opts, depends_on=[ns]),
            )
            for policy, spec in sorted(args.network_policies.items())
        ]
        self.prometheus_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-to-prometheus",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"allow-from-{args.namespace}", namespace=args.monitoring_namespace, labels=PART_OF
            ),
            spec=dict(args.monitoring_policy),
            opts=child_options(self, opts),
        )
        # Policies first: the webhooks and the metrics server must be reachable from their first start.
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name=keda.RELEASE,
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts, depends_on=[ns, *policies]),
        )
        self.register_outputs({})
