"""DevicePlugins: the NVIDIA device plugin on GPU pools and, where a pool has EFA, the EFA device plugin.

Without them the AL2023 NVIDIA AMI advertises no ``nvidia.com/gpu`` and EFA nodes no
``vpc.amazonaws.com/efa``: https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-k8s-device-plugin.html,
https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html.

Huge pages: the EFA installer in the AL2023 accelerated AMI reserves 2 MiB huge pages at boot, before the
kubelet starts, and the kubelet reports them as ``hugepages-2Mi`` capacity; neither plugin touches them.
A job asks for them like memory (``resources.limits: {hugepages-2Mi: 5120Mi, memory: ...}``; requests equal
limits) and, if it maps them through a file system, mounts ``emptyDir: {medium: HugePages-2Mi}``. Nothing
here (nor the pools' NodeConfig, which sets only local storage) reserves or resizes them.
https://kubernetes.io/docs/tasks/manage-hugepages/scheduling-hugepages/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class DevicePluginsArgs:
    """The charts (pinned) and their values (``infra/core/kube.py``); ``efa_chart`` None: no EFA pool."""

    namespace: str
    nvidia_chart: ChartRef
    nvidia_values: Mapping[str, Any]
    efa_chart: ChartRef | None = None
    efa_values: Mapping[str, Any] | None = None


class DevicePlugins(pulumi.ComponentResource):
    """Helm releases of the NVIDIA and (optionally) EFA device plugins."""

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:device_plugins:DevicePlugins", name, None, opts)
        child = child_options(self, opts)
        self.nvidia: k8s.helm.v3.Release = chart_release(
            f"{name}-nvidia",
            release_name="nvidia-device-plugin",
            chart=args.nvidia_chart,
            namespace=args.namespace,
            values=args.nvidia_values,
            opts=child,
        )
        self.efa: k8s.helm.v3.Release | None = None
        if args.efa_chart is not None:
            self.efa = chart_release(
                f"{name}-efa",
                release_name="aws-efa-k8s-device-plugin",
                chart=args.efa_chart,
                namespace=args.namespace,
                values=args.efa_values or {},
                opts=child,
            )
        self.register_outputs({})
