"""StorageClasses: the cluster's default StorageClass, gp3 under the stack's EBS key.

Clusters created on Kubernetes 1.30 and later have no default StorageClass, so a PVC without a class
(MinIO's, a job's scratch volume) would wait forever:
https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html.
Parameters of the EBS CSI driver:
https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/parameters.md
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.core.namespaces import PART_OF
from infra.resources.options import child_options

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"


@dataclass(frozen=True, kw_only=True)
class StorageClassesArgs:
    name: str
    ebs_key_arn: pulumi.Input[str]
    iops: int = 3000
    throughput_mibps: int = 125


class StorageClasses(pulumi.ComponentResource):
    """The default gp3 StorageClass: encrypted under the EBS key, bound where the pod is scheduled
    (``WaitForFirstConsumer``, so the volume is created in the pod's zone), expandable, deleted with its
    PVC."""

    default_class_name: pulumi.Output[str]

    def __init__(self, name: str, args: StorageClassesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:storage_classes:StorageClasses", name, None, opts)
        self.gp3 = k8s.storage.v1.StorageClass(
            f"{name}-{args.name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.name, labels=PART_OF, annotations={DEFAULT_CLASS_ANNOTATION: "true"}
            ),
            provisioner=EBS_CSI_PROVISIONER,
            parameters={
                "type": "gp3",
                "iops": str(args.iops),
                "throughput": str(args.throughput_mibps),
                "encrypted": "true",
                "kmsKeyId": args.ebs_key_arn,
                "csi.storage.k8s.io/fstype": "ext4",
            },
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Delete",
            allow_volume_expansion=True,
            opts=child_options(self, opts),
        )
        self.default_class_name = self.gp3.metadata.name
        self.register_outputs({"default_class_name": self.default_class_name})
