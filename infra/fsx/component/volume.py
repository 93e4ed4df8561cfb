"""LustreVolume: the FSx for Lustre CSI driver (node plugin) and the static PersistentVolume and claim that
put the file system of ``infra/fsx/component/filesystem.py`` into a namespace.

Static provisioning, as the driver documents it for an existing file system
(``examples/kubernetes/static_provisioning`` at v1.9.0): Kubernetes binds the claim to the volume, the node
plugin mounts it on the node where a pod lands. No AWS call is made from the cluster, so the driver has no
IAM role. The claim waits for the volume, the volume for the driver release (a delete goes the other way).
https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi.html
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.fsx import documents as docs
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class LustreVolumeArgs:
    """The driver chart (pinned) and values, and the file system the volume points at (its id, DNS name
    and mount name, from the AWS side), sized ``capacity_gib``, claimed in ``claim_namespace``."""

    chart: ChartRef
    driver_namespace: str
    driver_values: Mapping[str, Any]
    file_system_id: pulumi.Input[str]
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]
    capacity_gib: int
    claim_namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)


class LustreVolume(pulumi.ComponentResource):
    """The CSI driver release, the file system's PersistentVolume and the claim pods mount."""

    claim_name: pulumi.Output[str]
    volume_name: pulumi.Output[str]

    def __init__(self, name: str, args: LustreVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:fsx:LustreVolume", name, None, opts)
        labels = dict(args.labels)
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-csi-driver",
            release_name=docs.RELEASE_NAME,
            chart=args.chart,
            namespace=args.driver_namespace,
            values=args.driver_values,
            opts=child_options(self, opts),
        )
        # Outputs as leaves, not through one apply: at a first preview the file system's id, DNS name and
        # mount name are unknown, and the rest of the spec stays known (and reviewable) at preview.
        pv = docs.persistent_volume(
            file_system_id=args.file_system_id,
            dns_name=args.dns_name,
            mount_name=args.mount_name,
            capacity_gib=args.capacity_gib,
            claim_namespace=args.claim_namespace,
            labels=labels,
        )["spec"]
        self.volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=docs.VOLUME_NAME, labels=labels),
            spec=pv,
            opts=child_options(self, opts, depends_on=[self.release]),
        )
        claim = docs.persistent_volume_claim(
            namespace=args.claim_namespace, capacity_gib=args.capacity_gib, labels=labels
        )
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(**claim["metadata"]),
            spec=claim["spec"],
            opts=child_options(self, opts, depends_on=[self.volume]),
        )
        self.claim_name = self.claim.metadata.name
        self.volume_name = self.volume.metadata.name
        self.register_outputs({"claim_name": self.claim_name, "volume_name": self.volume_name})
