"""LustreVolume on its own under mocks, with a real pulumi_kubernetes.Provider: the pinned driver release,
the static PersistentVolume pointing at the file system the AWS side returned, the claim bound to it, the
order between them, and both objects valid for Kubernetes 1.35."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from infra.core.charts import ChartRef
from infra.fsx import documents as docs
from infra.fsx.component.volume import LustreVolume, LustreVolumeArgs
from infra.plan.mocks import AwsSnapshotMocks
from infra.plan.runner import Plan, run_program
from tests.k8s.validate import validate_plan

CHART = ChartRef(
    repo="https://kubernetes-sigs.github.io/aws-fsx-csi-driver", chart="aws-fsx-csi-driver", version="1.17.0"
)
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plan() -> Plan:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        fs_id = pulumi.Output.from_input("fs-0123456789abcdef0")
        LustreVolume(
            "fsx-volume",
            LustreVolumeArgs(
                chart=CHART,
                driver_namespace="kube-system",
                driver_values=docs.csi_driver_values(region="us-west-2", pools=["train"]),
                file_system_id=fs_id,
                dns_name=fs_id.apply(lambda i: f"{i}.fsx.us-west-2.amazonaws.com"),
                mount_name="abcd1234",
                capacity_gib=4800,
                claim_namespace="jobs",
                labels={"team": "ml"},
            ),
            opts=pulumi.ResourceOptions(provider=provider),
        )

    monitor = run_program(program, stack="fsx", mocks=AwsSnapshotMocks("us-west-2"))
    return Plan(
        "fsx", "aiplat", "us-west-2", {"cluster": {"kubernetes_version": "1.35"}}, monitor.recorded, {}
    )


def test_release_is_pinned(plan) -> None:
    release = plan.one(RELEASE).inputs
    assert (release["chart"], release["version"]) == ("aws-fsx-csi-driver", "1.17.0")
    assert release["repositoryOpts"] == {"repo": CHART.repo}
    assert release["name"] == "aws-fsx-csi-driver" and release["namespace"] == "kube-system"
    assert release["values"]["controller"]["replicaCount"] == 0


def test_volume_points_at_the_file_system(plan) -> None:
    pv = plan.one(PV).inputs
    assert pv["metadata"] == {"name": "aiplat-fsx", "labels": {"team": "ml"}}
    spec = pv["spec"]
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0",
        "volumeAttributes": {
            "dnsname": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
            "mountname": "abcd1234",
        },
    }
    assert spec["capacity"] == {"storage": "4800Gi"}
    assert spec["claimRef"] == {"namespace": "jobs", "name": "fsx"}
    assert spec["persistentVolumeReclaimPolicy"] == "Retain" and spec["storageClassName"] == ""


def test_claim_binds_that_volume_only(plan) -> None:
    pvc = plan.one(PVC).inputs
    assert pvc["metadata"] == {"name": "fsx", "namespace": "jobs", "labels": {"team": "ml"}}
    assert pvc["spec"]["volumeName"] == plan.one(PV).inputs["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == ""  # no dynamic provisioning for it
    assert pvc["spec"]["accessModes"] == plan.one(PV).inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "4800Gi"


def test_order_driver_volume_claim(plan) -> None:
    release, pv, pvc = plan.one(RELEASE), plan.one(PV), plan.one(PVC)
    assert release.urn in pv.dependencies
    assert pv.urn in pvc.dependencies


def test_objects_validate_for_the_cluster_version(plan) -> None:
    assert validate_plan(plan) == []
