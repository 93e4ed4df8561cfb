"""The AWS Load Balancer Controller and metrics-server: one Helm release each, values from ``infra/lib``.

- Load balancer controller: https://docs.aws.amazon.com/eks/latest/userguide/aws-load-balancer-controller.html
  (its IRSA role is ``infra/components/aws/lbc.py``; subnets carry the ``kubernetes.io/role/elb`` and
  ``internal-elb`` tags it discovers them by). The chart's ``crds/`` folder is installed on first install
  only; README "Cluster services" says how to upgrade the CRDs with a new version.
- metrics-server: the ``metrics.k8s.io`` API that HorizontalPodAutoscalers read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components.k8s.helm import chart_release
from infra.components.options import child_options
from infra.lib.charts import ChartRef


@dataclass(frozen=True, kw_only=True)
class ChartArgs:
    """A pinned chart installed as release ``release_name`` in ``namespace`` with ``values``."""

    chart: ChartRef
    release_name: str
    namespace: str
    values: pulumi.Input[Mapping[str, Any]]


class LoadBalancerController(pulumi.ComponentResource):
    """The AWS Load Balancer Controller (Ingress -> ALB, Service type LoadBalancer -> NLB)."""

    def __init__(self, name: str, args: ChartArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:controllers:LoadBalancerController", name, None, opts)
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name=args.release_name,
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts),
        )
        self.register_outputs({})


class MetricsServer(pulumi.ComponentResource):
    """metrics-server for HorizontalPodAutoscalers and ``kubectl top``."""

    def __init__(self, name: str, args: ChartArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:controllers:MetricsServer", name, None, opts)
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name=args.release_name,
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts),
        )
        self.register_outputs({})
