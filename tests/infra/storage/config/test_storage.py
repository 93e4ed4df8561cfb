"""Bad storage config fails the plan with one clear line per problem, before any resource exists."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from infra.cli.main import main
from infra.core.project import CONFIG_KEY
from infra.io.stackfiles import load_stack_config
from infra.storage.config.storage import BucketPurpose, StorageConfig


def _storage(c: dict) -> dict:
    return c.setdefault("storage", {})


CASES: list[tuple[str, str, Callable[[dict], None], str]] = [
    (
        "bucket-uppercase",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"datasets": "Team_Datasets"}),
        "aiplat:platform.storage.bucket_names.datasets: bucket name 'Team_Datasets' contains 'D', 'T', '_'",
    ),
    (
        "bucket-reserved-prefix",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"artifacts": "xn--models"}),
        "aiplat:platform.storage.bucket_names.artifacts: bucket name 'xn--models' starts with 'xn--', "
        "a prefix S3 reserves; fix: use e.g. 'models'",
    ),
    (
        "bucket-ip",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"checkpoints": "10.1.2.3"}),
        "bucket name '10.1.2.3' is formatted as an IP address",
    ),
    (
        "bucket-alias-suffix",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"checkpoints": "ckpt-s3alias"}),
        "ends with '-s3alias', a suffix S3 reserves",
    ),
    (
        "bucket-too-long",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"datasets": "d" * 64}),
        "is 64 characters long (S3 allows 3 to 63)",
    ),
    (
        "bucket-unknown-purpose",
        "dev-us-train",
        lambda c: _storage(c).update(bucket_names={"models": "aiplat-models"}),
        "aiplat:platform.storage.bucket_names.models",
    ),
    (
        "replicate-not-inference",
        "dev-us-train",
        lambda c: _storage(c).update(replicate_to=["eu-west-1"]),
        "aiplat:platform.storage.replicate_to.0: 'eu-west-1' is not an inference region "
        "(regions of this project's infer stacks: ap-east-1, ap-southeast-1); "
        "fix: replicate only to a region that has an infer stack",
    ),
    (
        "replicate-not-a-region",
        "dev-us-train",
        lambda c: _storage(c).update(replicate_to=["ap-east-9"]),
        "aiplat:platform.storage.replicate_to.0: 'ap-east-9' is not an AWS region",
    ),
    (
        "replicate-own-region",
        "prod-us-train",
        lambda c: _storage(c).update(replicate_to=["us-east-1", "ap-east-1"]),
        "aiplat:platform: storage.replicate_to includes the stack's own region us-east-1; fix: remove it",
    ),
    (
        "minio-without-size",
        "dev-us-train",
        lambda c: _storage(c).update(backend="minio", minio={"chart_version": "5.4.0"}),
        "aiplat:platform.storage.minio.storage_size: required key is missing",
    ),
    (
        "minio-without-section",
        "dev-us-train",
        lambda c: _storage(c).update(backend="minio"),
        "aiplat:platform.storage: backend is 'minio' but there is no minio section; fix: add storage.minio",
    ),
    (
        "minio-bad-size",
        "dev-us-train",
        lambda c: _storage(c).update(backend="minio", minio={"storage_size": "500GB"}),
        "aiplat:platform.storage.minio.storage_size: '500GB' is not a storage quantity",
    ),
    (
        "minio-with-replication",
        "prod-us-train",
        lambda c: _storage(c).update(backend="minio", minio={"storage_size": "1Ti"}),
        "aiplat:platform.storage: replicate_to needs backend 's3'",
    ),
    (
        "backend-typo",
        "dev-us-train",
        lambda c: _storage(c).update(backend="gcs"),
        "aiplat:platform.storage.backend: 'gcs' is not allowed; fix: use one of 's3' or 'minio'",
    ),
    (
        "lifecycle-ia-too-early",
        "dev-us-train",
        lambda c: _storage(c).update(lifecycle={"checkpoint_noncurrent_ia_days": 7}),
        "aiplat:platform.storage.lifecycle.checkpoint_noncurrent_ia_days: 7 days is too early: S3 moves "
        "noncurrent versions to STANDARD_IA after 30 days at the earliest; fix: use 30 or more",
    ),
    (
        "lifecycle-order",
        "dev-us-train",
        lambda c: _storage(c).update(
            lifecycle={"checkpoint_noncurrent_ia_days": 60, "checkpoint_noncurrent_expire_days": 40}
        ),
        "checkpoint_noncurrent_expire_days 40 is not after checkpoint_noncurrent_ia_days 60",
    ),
    (
        "source-not-replicating",
        "prod-hk-infer",
        # alone: in the global endpoint it would also disagree on the API keys' source (tests/infra/edge)
        lambda c: (_storage(c).update(source_stack="dev-us-train"), c["inference"].pop("global_endpoint")),
        "aiplat:platform.storage.source_stack: 'dev-us-train' does not replicate to ap-east-1; "
        "fix: add ap-east-1 to storage.replicate_to of dev-us-train",
    ),
    (
        "source-unknown",
        "prod-hk-infer",
        # alone: in the global endpoint it would also disagree on the API keys' source (tests/infra/edge)
        lambda c: (_storage(c).update(source_stack="prod-eu-train"), c["inference"].pop("global_endpoint")),
        "aiplat:platform.storage.source_stack: no stack 'prod-eu-train'; fix: use one of the train stacks",
    ),
    (
        "source-on-train",
        "dev-us-train",
        lambda c: _storage(c).update(source_stack="prod-us-train"),
        "aiplat:platform: storage.source_stack is set on a train stack",
    ),
    (
        "replicate-on-infer",
        "prod-sg-infer",
        lambda c: _storage(c).update(replicate_to=["ap-east-1"]),
        "aiplat:platform: storage.replicate_to is set on an infer stack",
    ),
]


@pytest.mark.parametrize(("base", "mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_storage_config_fails_plan(
    stack_doc, write_stack, tmp_path, capsys, base, mutate, expected
) -> None:
    # the real stacks next to the bad one: they define the inference regions and the train stacks
    for name in ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        folder = write_stack(name, stack_doc(name))
    doc = stack_doc(base)
    # a range of its own: beside its base's file, a copy keeping the base's range is refused for that first
    doc["config"][CONFIG_KEY].setdefault("network", {})["vpc_cidr"] = "10.99.0.0/16"
    mutate(doc["config"][CONFIG_KEY])
    write_stack("bad", doc)
    out_dir = tmp_path / "out"
    assert main(["plan", "--stack", "bad", "--stacks-dir", str(folder), "--out", str(out_dir)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0] and "Pulumi.bad.yaml" in lines[0]
    assert "Traceback" not in err
    assert not (out_dir / "bad.json").exists()


def test_defaults_and_override() -> None:
    st = StorageConfig(bucket_names={"datasets": "team-datasets"})
    assert st.bucket_name(BucketPurpose.datasets, "aiplat", "prod", "us-east-1") == "team-datasets"
    assert (
        st.bucket_name(BucketPurpose.checkpoints, "aiplat", "prod", "us-east-1")
        == "aiplat-prod-us-east-1-checkpoints"
    )


@pytest.mark.parametrize("stack", ["dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"])
def test_real_stacks_pass_cross_stack_checks(stack: str) -> None:
    cfg = load_stack_config(stack)
    assert cfg.storage.backend.value == "s3"
