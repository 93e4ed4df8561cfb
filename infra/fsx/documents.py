"""FSx for Lustre as data: the Lustre ports, the CSI driver's chart values and the static PersistentVolume
and claim that bind the training pods to the file system. Pure, no Pulumi.

- Ports: "You must set up the security group to allow inbound traffic on ports 988 and 1018-1023"
  (https://docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html); the file system's group
  admits them from itself and from the clients' groups, and the clients' groups admit them from the file
  system's ("Lustre client VPC security group rules",
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html).
- Chart: kubernetes-sigs/aws-fsx-csi-driver ``charts/aws-fsx-csi-driver`` 1.17.0 (values.yaml and templates
  at tag ``helm-chart-aws-fsx-csi-driver-1.17.0``).
- Static volume: the driver's ``examples/kubernetes/static_provisioning/specs/{pv,claim}.yaml`` at v1.9.0;
  the node plugin mounts ``<volumeAttributes.dnsname>@tcp:/<volumeAttributes.mountname>``
  (``pkg/driver/node.go`` NodePublishVolume, v1.9.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.pools.documents.nodes import pool_affinity

# Lustre LNET: 988, and 1018-1023 (TCP), as (from_port, to_port).
LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
CSI_DRIVER = "fsx.csi.aws.com"
RELEASE_NAME = "aws-fsx-csi-driver"
# The static volume and its claim (the PersistentVolume is cluster-scoped; one file system per cluster).
VOLUME_NAME = "aiplat-fsx"
CLAIM_NAME = "fsx"
# Mount options of the driver's static example: POSIX locks across clients.
MOUNT_OPTIONS = ("flock",)


def csi_driver_values(*, region: str, pools: Sequence[str]) -> dict[str, Any]:
    """Values of the aws-fsx-csi-driver chart 1.17.0 for static volumes only.

    - ``controller.replicaCount: 0``: the controller (csi-provisioner, csi-resizer) creates and resizes file
      systems for dynamic volumes and needs an IAM role for that; a static volume is bound by Kubernetes and
      mounted by the node plugin alone. At 1.17.0 ``nodeComponentOnly: true`` drops only the controller's
      PodDisruptionBudget (``templates/pdb.yaml``; ``controller-deployment.yaml`` has no condition), so the
      Deployment is kept at zero replicas.
    - ``region`` on both: otherwise the driver asks the instance metadata service for it, which pods do not
      reach (IMDSv2 with hop limit 1 on our nodes); ``node.region`` is read by ``node-daemonset.yaml``
      (``{{- with .Values.node.region }}``) though values.yaml does not list it.
    - The node plugin (privileged, in kube-system) runs only on the pools whose pods mount the file system,
      tolerating their taints (the chart's ``tolerateAllTaints``), instead of on every node.
    """
    return {
        "nodeComponentOnly": True,
        "controller": {
            "replicaCount": 0,
            "region": region,
            "podDisruptionBudget": {"enabled": False},
        },
        "node": {
            "region": region,
            "affinity": pool_affinity(pools),
            # the chart's default, stated: the affinity above confines the plugin, so a taint added to
            # the pool never keeps its pods from mounting
            "tolerateAllTaints": True,
        },
    }


def persistent_volume(
    *,
    file_system_id: Any,
    dns_name: Any,
    mount_name: Any,
    capacity_gib: int,
    claim_namespace: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    """The static PersistentVolume of the file system (``metadata`` and ``spec``), pre-bound to our claim
    (``claimRef``) so no other claim takes it; ``Retain``: deleting the claim leaves the file system alone.
    The file system's id, DNS and mount names are placed as they are (strings, or deploy-time values)."""
    return {
        "metadata": {"name": VOLUME_NAME, "labels": labels},
        "spec": {
            "capacity": {"storage": f"{capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "mountOptions": list(MOUNT_OPTIONS),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": claim_namespace, "name": CLAIM_NAME},
            "csi": {
                "driver": CSI_DRIVER,
                "volumeHandle": file_system_id,
                "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
            },
        },
    }


def persistent_volume_claim(*, namespace: str, capacity_gib: int, labels: dict[str, str]) -> dict[str, Any]:
    """The claim the training pods mount (``metadata`` and ``spec``): bound to our volume by name, no
    StorageClass (``""`` turns dynamic provisioning off for it)."""
    return {
        "metadata": {"name": CLAIM_NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": VOLUME_NAME,
            "resources": {"requests": {"storage": f"{capacity_gib}Gi"}},
        },
    }


def data_repository_path(bucket: str, prefix: str) -> str:
    """``s3://bucket/prefix/`` as CreateDataRepositoryAssociation takes it (FSx appends the trailing '/')."""
    return f"s3://{bucket}/{prefix.strip('/')}/" if prefix.strip("/") else f"s3://{bucket}/"
