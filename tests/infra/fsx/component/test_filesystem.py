"""SharedFileSystem with chosen arguments under the offline mocks: the Lustre ports in both directions for
every peer, the file system as CreateFileSystem needs it, the association with the bucket, the log group."""

from __future__ import annotations

import pulumi
import pytest

from infra.fsx.component.filesystem import LogSettings, SharedFileSystem, SharedFileSystemArgs
from infra.plan.runner import Plan
from tests.conftest import build

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
IN = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
OUT = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
KEY = "arn:aws:kms:us-east-1:123456789012:key/data"
LOGS_KEY = "arn:aws:kms:us-east-1:123456789012:key/logs"
CLIENTS = ["sg-cluster", "sg-other"]


def _args(**over) -> SharedFileSystemArgs:
    base = dict(
        name_tag="demo-fsx",
        vpc_id="vpc-1",
        subnet_id="subnet-a",
        client_security_group_ids=CLIENTS,
        deployment_type="PERSISTENT_1",
        storage_capacity_gib=4800,
        per_unit_storage_throughput=100,
        file_system_type_version="2.12",
        kms_key_arn=KEY,
        data_repository_path="s3://bucket/tokens/",
        file_system_path="/data",
        import_events=["NEW"],
        export_events=["NEW", "CHANGED"],
        import_metadata_on_create=False,
        imported_file_chunk_size_mib=2048,
        weekly_maintenance_start_time="2:04:30",
        log=LogSettings(
            group_name="/aws/fsx/demo", level="ERROR_ONLY", retention_days=30, kms_key_arn=LOGS_KEY
        ),
        tags={"Team": "ml"},
    )
    base.update(over)
    return SharedFileSystemArgs(**base)


def _plan(args: SharedFileSystemArgs) -> Plan:
    def declare(provider: pulumi.ProviderResource) -> None:
        SharedFileSystem("fsx", args, opts=pulumi.ResourceOptions(provider=provider))

    return build(declare)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return _plan(_args())


def _sg_id(plan: Plan) -> str:
    # the file system names its one group; the mocks answer the group's id
    (sg,) = plan.one(FS).inputs["securityGroupIds"]
    return sg


def _rules(plan: Plan, type_: str) -> set[tuple[str, str, int, int, str]]:
    return {
        (
            r.inputs["securityGroupId"],
            r.inputs["referencedSecurityGroupId"],
            int(r.inputs["fromPort"]),
            int(r.inputs["toPort"]),
            r.inputs["ipProtocol"],
        )
        for r in plan.by_type(type_)
    }


def test_lustre_ports_between_the_file_system_and_every_client(plan) -> None:
    sg = _sg_id(plan)
    ports = {(988, 988), (1018, 1023)}
    peers = [sg, *CLIENTS]
    # the file system's group: in and out with itself and each client group, TCP 988 and 1018-1023
    expected_fs = {(sg, p, low, high, "tcp") for p in peers for low, high in ports}
    assert {r for r in _rules(plan, IN) if r[0] == sg} == expected_fs
    assert _rules(plan, OUT) == expected_fs
    # each client group admits the file servers on the same ports; nothing else is opened on it
    assert {r for r in _rules(plan, IN) if r[0] != sg} == {
        (c, sg, low, high, "tcp") for c in CLIENTS for low, high in ports
    }
    assert not [r for r in plan.by_type(IN) + plan.by_type(OUT) if "cidrIpv4" in r.inputs]


def test_file_system_as_create_file_system_needs_it(plan) -> None:
    fs = plan.one(FS).inputs
    assert fs["subnetIds"] == "subnet-a"  # one subnet: pulumi-aws 7 takes it as a string
    assert fs["deploymentType"] == "PERSISTENT_1" and fs["storageType"] == "SSD"
    assert fs["storageCapacity"] == 4800 and fs["perUnitStorageThroughput"] == 100
    assert fs["fileSystemTypeVersion"] == "2.12"
    assert fs["kmsKeyId"] == KEY
    assert fs["automaticBackupRetentionDays"] == 0  # the bucket is the copy (and see the component)
    assert fs["weeklyMaintenanceStartTime"] == "2:04:30"
    assert fs["tags"] == {"Team": "ml", "Name": "demo-fsx"}
    # the legacy S3 link (import_path/auto_import_policy) is never used: the association is
    assert not {"importPath", "exportPath", "autoImportPolicy", "importedFileChunkSize"} & set(fs)


def test_log_group_is_ours_and_comes_first(plan) -> None:
    group = plan.one("aws:cloudwatch/logGroup:LogGroup")
    assert group.inputs == {"name": "/aws/fsx/demo", "retentionInDays": 30, "kmsKeyId": LOGS_KEY}
    assert group.options["deleteBeforeReplace"] is True  # a fixed name
    fs = plan.one(FS)
    assert fs.inputs["logConfiguration"]["level"] == "ERROR_ONLY"
    assert fs.inputs["logConfiguration"]["destination"]
    assert group.urn in fs.dependencies


def test_association_links_the_prefix_with_the_chosen_events(plan) -> None:
    dra = plan.one(DRA)
    fs = plan.one(FS)
    assert dra.inputs["fileSystemId"].startswith("fs-") and fs.urn in dra.dependencies
    assert dra.inputs["dataRepositoryPath"] == "s3://bucket/tokens/"
    assert dra.inputs["fileSystemPath"] == "/data"
    assert dra.inputs["s3"] == {
        "autoImportPolicy": {"events": ["NEW"]},
        "autoExportPolicy": {"events": ["NEW", "CHANGED"]},
    }
    assert dra.inputs["batchImportMetaDataOnCreate"] is False
    assert dra.inputs["importedFileChunkSize"] == 2048
    assert dra.inputs["deleteDataInFilesystem"] is False


def test_without_logging_or_automatic_export() -> None:
    plan = _plan(_args(log=None, export_events=(), import_events=()))
    assert not plan.by_type("aws:cloudwatch/logGroup:LogGroup")
    assert plan.one(FS).inputs["logConfiguration"] == {"level": "DISABLED"}
    # no automatic import or export: no s3 block (both are off when the API gets none)
    assert "s3" not in plan.one(DRA).inputs
