"""Karpenter in the cluster: its CRDs and controller (two Helm releases), the EC2NodeClass and GPU NodePools.

The AWS side (controller role, node role and its access entry, interruption queue) is
``infra/karpenter/component/aws.py``. CRDs come from the ``karpenter-crd`` chart so that ``helm upgrade``
upgrades them (a chart's ``crds/`` folder is installed once and never upgraded); the controller release
skips its own copy. https://karpenter.sh/docs/upgrading/upgrade-guide/#crd-upgrades
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.karpenter import documents as docs
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class KarpenterArgs:
    """Charts (pinned, same version), the controller's values, and the custom resources' specs
    (``infra/karpenter/documents.py``): one EC2NodeClass ``node_class_name`` and NodePools by name."""

    chart: ChartRef
    crd_chart: ChartRef
    namespace: str
    values: pulumi.Input[Mapping[str, Any]]
    node_class_name: str
    node_class_spec: pulumi.Input[Mapping[str, Any]]
    node_pools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class Karpenter(pulumi.ComponentResource):
    """Karpenter's releases, then its EC2NodeClass, then the NodePools that reference it."""

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:karpenter:Karpenter", name, None, opts)
        crds = chart_release(
            f"{name}-crd",
            release_name="karpenter-crd",
            chart=args.crd_chart,
            namespace=args.namespace,
            values={},
            opts=child_options(self, opts),
        )
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name="karpenter",
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            skip_crds=True,
            opts=child_options(self, opts, depends_on=[crds]),
        )
        # The controller's webhooks validate the custom resources: create them once it runs.
        after_controller = child_options(self, opts, depends_on=[self.release])
        self.node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass",
            api_version=docs.NODECLASS_API,
            kind="EC2NodeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.node_class_name, labels=PART_OF),
            spec=args.node_class_spec,
            opts=after_controller,
        )
        self.node_pools: dict[str, k8s.apiextensions.CustomResource] = {}
        for pool_name, spec in sorted(args.node_pools.items()):
            self.node_pools[pool_name] = k8s.apiextensions.CustomResource(
                f"{name}-nodepool-{pool_name}",
                api_version=docs.NODEPOOL_API,
                kind="NodePool",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=pool_name, labels=PART_OF),
                spec=dict(spec),
                opts=child_options(self, opts, depends_on=[self.release, self.node_class]),
            )
        self.register_outputs({})
