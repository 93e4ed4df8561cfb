"""FSx for Lustre as data: valid capacities and tiers (CreateFileSystem's words), the zone, where a dataset
appears on the mount, the S3 path of the association, the CSI driver's values and the static volume."""

from __future__ import annotations

import re
from pathlib import Path

import botocore.loaders
import pytest

from infra.fsx import constraints as facts
from infra.fsx import documents as docs
from infra.fsx.config import FsxConfig, LustreDeploymentType
from infra.io import snapshot
from infra.io.kube_validate import validate_manifest
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import read_trainer_settings
from infra.training.documents import runtime as t
from infra.training.documents import stack

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(
    ("gib", "valid"),
    [(1200, True), (2400, True), (3600, False), (4800, True), (7200, True), (1300, False), (0, False)],
)
def test_capacity(gib: int, valid: bool) -> None:
    # "1200 GiB, 2400 GiB, and increments of 2400 GiB" for persistent SSD
    assert facts.capacity_valid(gib) is valid


@pytest.mark.parametrize(
    ("gib", "near"), [(1000, (1200,)), (1800, (1200, 2400)), (3000, (2400, 4800)), (9000, (7200, 9600))]
)
def test_nearest_capacities_are_valid(gib: int, near: tuple[int, ...]) -> None:
    assert facts.nearest_capacities(gib) == near
    assert all(facts.capacity_valid(g) for g in near)


def test_throughput_tiers_are_the_ones_the_fsx_api_model_lists() -> None:
    # botocore's fsx service model carries CreateFileSystem's documentation, the source of the table
    doc = botocore.loaders.Loader().load_service_model("fsx", "service-2")["shapes"][
        "CreateFileSystemLustreConfiguration"
    ]["members"]["PerUnitStorageThroughput"]["documentation"]
    listed = {
        LustreDeploymentType(kind): tuple(int(v) for v in values.split(", "))
        for kind, values in re.findall(r"For <code>(\w+)</code> SSD storage: ([\d, ]+) MB/s/TiB", doc)
    }
    assert listed == facts.THROUGHPUT_TIERS


def test_throughput_is_the_per_tib_rate_times_the_tebibytes() -> None:
    # PerUnitStorageThroughput: "the amount of read and write throughput for each 1 tebibyte (TiB)"
    assert facts.throughput_mbps(FsxConfig(storage_capacity_gib=2048, per_unit_storage_throughput=250)) == 500


@pytest.mark.parametrize(
    ("fields", "dataset", "path"),
    [
        ({}, "shards/owt", "/fsx/datasets/shards/owt"),
        ({"data_repository_prefix": "shards"}, "shards/owt", "/fsx/datasets/owt"),
        ({"data_repository_prefix": "shards/"}, "shards", "/fsx/datasets"),
        ({"data_repository_prefix": "shards"}, "shardsx/owt", None),  # not under the prefix
        ({"data_repository_prefix": "a/b", "file_system_path": "/"}, "a/b/c", "/fsx/c"),
        ({"mount_path": "/mnt/lustre", "file_system_path": "/in/"}, "d", "/mnt/lustre/in/d"),
    ],
)
def test_dataset_path(fields: dict, dataset: str, path: str | None) -> None:
    assert facts.dataset_path(FsxConfig(**fields), dataset) == path


@pytest.mark.parametrize(
    ("prefix", "path"),
    [("", "s3://b/"), ("shards", "s3://b/shards/"), ("shards/", "s3://b/shards/"), ("a/b", "s3://b/a/b/")],
)
def test_data_repository_path(prefix: str, path: str) -> None:
    assert docs.data_repository_path("b", prefix) == path


def test_csi_driver_values_for_static_volumes() -> None:
    values = docs.csi_driver_values(region="eu-west-1", pools=["train", "a-train"])
    # no controller: a static volume needs none, and it would need an IAM role
    assert values["controller"]["replicaCount"] == 0
    assert values["controller"]["podDisruptionBudget"] == {"enabled": False}
    assert values["nodeComponentOnly"] is True
    # the region from config, not from IMDS (unreachable from pods with hop limit 1)
    assert values["controller"]["region"] == values["node"]["region"] == "eu-west-1"
    # the node plugin only where pods mount the file system, whatever their taints
    terms = values["node"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "aiplat.io/pool", "operator": "In", "values": ["a-train", "train"]}]}
    ]
    assert values["node"]["tolerateAllTaints"] is True
    with pytest.raises(ValueError):
        docs.csi_driver_values(region="eu-west-1", pools=[])


def test_volume_and_claim_match() -> None:
    pv = docs.persistent_volume(
        file_system_id="fs-1",
        dns_name="fs-1.fsx.r.amazonaws.com",
        mount_name="m",
        capacity_gib=1200,
        claim_namespace="ns",
        labels={},
    )
    pvc = docs.persistent_volume_claim(namespace="ns", capacity_gib=1200, labels={})
    assert pv["spec"]["claimRef"] == {
        "namespace": pvc["metadata"]["namespace"],
        "name": pvc["metadata"]["name"],
    }
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["capacity"]["storage"] == pvc["spec"]["resources"]["requests"]["storage"] == "1200Gi"
    assert pv["spec"]["mountOptions"] == ["flock"]


def _fsx_example(**fsx_fields):
    cfg = load_stack_config("fsx", EXAMPLES)
    fsx = cfg.cluster_services.fsx.model_copy(update=fsx_fields)
    return cfg.model_copy(update={"cluster_services": cfg.cluster_services.model_copy(update={"fsx": fsx})})


def _runtime_pod(cfg) -> dict:
    settings = read_trainer_settings(cfg.training.runtime.trainer_config)
    spec = stack.runtime_spec(
        cfg, snapshot.instance_facts("p5.48xlarge", cfg.region), settings, image="r/t@sha256:" + "0" * 64
    )
    doc = t.runtime_document(spec)
    assert validate_manifest(doc, "1.35") == []
    return doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("read_only", [True, False])
def test_runtime_mounts_the_claim(read_only: bool) -> None:
    pod = _runtime_pod(_fsx_example(read_only=read_only))
    (node,) = pod["containers"]
    assert {"name": "shared-fs", "mountPath": "/fsx", "readOnly": read_only} in node["volumeMounts"]
    assert {
        "name": "shared-fs",
        "persistentVolumeClaim": {"claimName": docs.CLAIM_NAME, "readOnly": read_only},
    } in pod["volumes"]


def test_runtime_without_fsx_mounts_nothing_more() -> None:
    pod = _runtime_pod(_fsx_example(enabled=False))
    assert [v["name"] for v in pod["volumes"]] == ["dshm", "data-cache"]


def test_runs_read_linked_datasets_from_the_mount() -> None:
    cfg = _fsx_example()
    assert stack.data_uri(cfg, "shards/openwebtext") == "/fsx/datasets/openwebtext"
    # outside the linked prefix, or with runs_read_datasets off: S3 as before
    assert stack.data_uri(cfg, "raw/x") == "s3://fsxdemo-dev-us-east-1-datasets/trainer/raw/x"
    off = _fsx_example(runs_read_datasets=False)
    assert stack.data_uri(off, "shards/openwebtext").startswith("s3://fsxdemo-dev-us-east-1-datasets/")
