"""Plan-time refusals of FSx for Lustre configs that AWS (or the training pods) would refuse, each with its
message, before any resource (or, for the zone, before anything but the provider); plus the warnings."""

from __future__ import annotations

import pytest

from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config
from tests.support.config_cases import FACTS, RULES, SCHEMA, all_of, assert_refused, without_teams

F = "aiplat:platform.cluster_services.fsx"
ON = {"enabled": True}


def _fsx(**fields):
    def mutate(c: dict) -> None:
        c.setdefault("cluster_services", {})["fsx"] = {**ON, **fields}
        without_teams(c)  # the FSx claim lives in the trainer's namespace only (rule teams-without-fsx)

    return mutate


def _minio(c: dict) -> None:
    c["storage"] = {"backend": "minio", "minio": {"storage_size": "100Gi", "mode": "standalone"}}
    without_teams(c)


def _no_training(c: dict) -> None:
    without_teams(c)
    del c["training"]


CASES = [
    (
        "prod-us-train",
        _fsx(storage_capacity_gib=3000),
        RULES,
        f"{F}.storage_capacity_gib: 3000 GiB is not a capacity CreateFileSystem accepts for PERSISTENT_2 "
        "(SSD: 1200, 2400 or a multiple of 2400 GiB); fix: use 2400 or 4800 (see "
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html)",
    ),
    (
        "prod-us-train",
        _fsx(storage_capacity_gib=1300),
        RULES,
        f"{F}.storage_capacity_gib: 1300 GiB is not a capacity CreateFileSystem accepts for PERSISTENT_2 "
        "(SSD: 1200, 2400 or a multiple of 2400 GiB); fix: use 1200 or 2400",
    ),
    (
        "prod-us-train",
        _fsx(per_unit_storage_throughput=200),
        RULES,
        f"{F}.per_unit_storage_throughput: 200 MB/s/TiB is not a throughput tier of PERSISTENT_2 (SSD: 125, "
        "250, 500, 1000); fix: use one of 125, 250, 500, 1000",
    ),
    (
        "prod-us-train",
        _fsx(deployment_type="PERSISTENT_1"),
        RULES,
        f"{F}.per_unit_storage_throughput: 125 MB/s/TiB is not a throughput tier of PERSISTENT_1 (SSD: 50, "
        "100, 200)",
    ),
    (
        "prod-sg-infer",
        _fsx(),
        RULES,
        f"{F}.enabled: true on an infer stack, which has no datasets bucket and runs no training pods",
    ),
    (
        "dev-us-train",
        all_of(_minio, _fsx(availability_zone="us-west-2a")),
        RULES,
        f"{F}.enabled: true but storage.backend is minio: the datasets are in MinIO, and a data repository "
        "association links an S3 bucket (s3://bucket/prefix) only",
    ),
    (
        "prod-us-train",
        all_of(_no_training, _fsx()),
        RULES,
        f"{F}.enabled: true but the stack has no training section: the file system is placed in the "
        "training pool's zone and mounted by the training runtime",
    ),
    (
        "prod-us-train",
        _fsx(mount_path="/dev/shm/fsx"),
        RULES,
        f"{F}.mount_path: '/dev/shm/fsx' overlaps the shared memory volume the runtime mounts at '/dev/shm'",
    ),
    (
        "prod-us-train",
        _fsx(availability_zone="us-east-1b"),
        FACTS,
        f"{F}.availability_zone: 'us-east-1b' is not a zone of training pool 'train' ['us-east-1a']: every "
        "read of the training pods would cross zones",
    ),
    (
        "prod-us-train",
        _fsx(availability_zone="us-east-1f"),
        FACTS,
        f"{F}.availability_zone: 'us-east-1f' is not a zone of the VPC",
    ),
    (
        "dev-us-train",
        _fsx(),
        FACTS,
        f"{F}.availability_zone: not set, and training pool 'gpu' runs in 2 zones ['us-west-2a', "
        "'us-west-2b']; a Lustre file system is created in exactly one subnet, so one zone; fix: set "
        "availability_zone to one of ['us-west-2a', 'us-west-2b']",
    ),
    (
        "prod-us-train",
        _fsx(deployment_type="SCRATCH_2"),
        SCHEMA,
        f"{F}.deployment_type: 'SCRATCH_2' is not allowed; fix: use one of 'PERSISTENT_1' or 'PERSISTENT_2'",
    ),
    (
        "prod-us-train",
        _fsx(file_system_type_version="2.10"),
        SCHEMA,
        f"{F}.file_system_type_version: '2.10': input should be '2.12' or '2.15'",
    ),
    (
        "prod-us-train",
        _fsx(import_events=["NEW", "NEW"]),
        SCHEMA,
        f"{F}.import_events: ['NEW', 'NEW'] names an event twice",
    ),
    (
        "prod-us-train",
        _fsx(mount_path="/fsx/../etc"),
        SCHEMA,
        f"{F}.mount_path: '/fsx/../etc' must be a plain absolute path",
    ),
    (
        "prod-us-train",
        _fsx(log_retention_days=10),
        SCHEMA,
        f"{F}.log_retention_days: 10 is not a CloudWatch Logs retention period",
    ),
]
IDS = [
    "capacity-not-2400-step",
    "capacity-between-small-sizes",
    "throughput-not-a-tier",
    "throughput-of-other-type",
    "infer-stack",
    "minio-backend",
    "no-training-runtime",
    "mount-over-shm",
    "other-zone-than-pool",
    "zone-outside-vpc",
    "multi-zone-pool-no-zone",
    "scratch-type",
    "lustre-2-10",
    "duplicate-event",
    "mount-path-dotdot",
    "log-retention",
]


@pytest.mark.parametrize(("stack", "mutate", "stage", "expected"), CASES, ids=IDS)
def test_refused_before_any_resource(stack_config, monitors, stack, mutate, stage, expected) -> None:
    raw = stack_config(stack)
    mutate(raw)
    assert_refused(raw, expected, monitors, stage)


def _findings(stack_config, stack: str, mutate) -> list:
    raw = stack_config(stack)
    mutate(raw)
    return run_rules(Phase.plan, RuleContext(parse_platform_config(raw)))


def test_valid_settings_pass(stack_config) -> None:
    ok = _fsx(deployment_type="PERSISTENT_1", per_unit_storage_throughput=200, storage_capacity_gib=4800)
    assert [f for f in _findings(stack_config, "prod-us-train", ok) if f.rule.startswith("fsx-")] == []


def test_run_outside_the_linked_prefix_warns(stack_config) -> None:
    findings = _findings(stack_config, "prod-us-train", _fsx(data_repository_prefix="tokenized"))
    (w,) = [f for f in findings if f.rule == "fsx-runs-datasets"]
    assert w.level is Level.warning
    assert w.one_line().startswith(
        "aiplat:platform.training.runs.gpt2-124m.dataset: 'trainer/shards/openwebtext' is outside the "
        "prefix the file system links ('tokenized'), so this run downloads it from S3"
    )


def test_export_without_writers_warns(stack_config) -> None:
    findings = _findings(stack_config, "prod-us-train", _fsx(export_events=["NEW", "CHANGED"]))
    (w,) = [f for f in findings if f.rule == "fsx-export-has-writers"]
    assert w.level is Level.warning
    assert "['NEW', 'CHANGED'] but read_only is true: the training pods cannot write" in w.one_line()
    writable = _fsx(export_events=["NEW"], read_only=False)
    assert not [f for f in _findings(stack_config, "prod-us-train", writable) if f.rule.startswith("fsx-")]


def test_off_by_default_checks_nothing(stack_config) -> None:
    # a bad capacity on a disabled section is not a finding: nothing is created from it
    off = _fsx(enabled=False, storage_capacity_gib=3000)
    assert not [f for f in _findings(stack_config, "prod-us-train", off) if f.rule.startswith("fsx-")]
