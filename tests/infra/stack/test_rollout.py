"""``rollout.yaml``: its schema errors and the waves checked against the project's stacks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from infra.core.config import Environment
from infra.core.errors import ConfigErrors
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.schema.parse import parse_model
from infra.stack.rollout import SECRETS_PATTERN, RolloutConfig, plan_waves
from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "rollout.yaml").read_text())
STACKS = {s: load_stack_config(s) for s in list_stacks()}


def _rollout(**changes: object) -> RolloutConfig:
    raw = copy.deepcopy(RAW)
    raw.update(changes)
    return parse_model(raw, RolloutConfig, "rollout.yaml")


def _errors(rollout: RolloutConfig, env: Environment = Environment.prod) -> list[str]:
    with pytest.raises(ConfigErrors) as info:
        plan_waves(rollout, env, STACKS)
    return str(info.value).splitlines()


def test_shipped_file_is_valid() -> None:
    r = load_rollout_config()
    assert r.backend_url.startswith("s3://") and r.secrets_provider.startswith("awskms://")
    assert plan_waves(r, Environment.dev, STACKS) == [["dev-us-train"]]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("backend_url", "my-bucket", "rollout.yaml.backend_url: 'my-bucket': string should match pattern"),
        # the pattern as written: \S (no whitespace) must not be shown as \s (whitespace)
        (
            "secrets_provider",
            "kms:foo",
            f"rollout.yaml.secrets_provider: 'kms:foo': string should match pattern '{SECRETS_PATTERN}'; "
            "fix: correct the value",
        ),
        (
            "health",
            {"nodes_ready_timeout_s": "900"},
            "rollout.yaml.health.nodes_ready_timeout_s: '900' is a string, but an integer is expected; "
            "fix: write it without quotes (nodes_ready_timeout_s: 900)",
        ),
        (
            "polcy_packs",
            ["policies"],
            "rollout.yaml.polcy_packs: unknown key; fix: did you mean 'policy_packs'?",
        ),
        (
            "environments",
            {"stage": {"waves": [["x"]]}},
            "rollout.yaml.environments.stage.[key]: 'stage' is not allowed",
        ),
        (
            "health",
            {"inference_health_path": "healthz"},
            "rollout.yaml.health.inference_health_path: 'healthz' is",
        ),
    ],
)
def test_schema_errors(key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigErrors) as info:
        _rollout(**{key: value})
    assert expected in str(info.value)


def test_waves_must_cover_the_environment_and_respect_sources() -> None:
    bad = _rollout(
        environments={
            "prod": {
                "waves": [
                    ["prod-sg-infer", "prod-us-train"],
                    ["prod-us-trian", "dev-us-train", "prod-sg-infer"],
                ]
            }
        }
    )
    assert _errors(bad) == [
        "rollout.yaml: environments.prod.waves.1: no stack 'prod-us-trian'; fix: use stacks of prod: "
        "prod-hk-infer, prod-sg-infer, prod-us-train",
        "rollout.yaml: environments.prod.waves.1: 'dev-us-train' is a dev stack; "
        "fix: move it to environments.dev",
        "rollout.yaml: environments.prod.waves.1: 'prod-sg-infer' is already in waves.0; fix: list it once",
        "rollout.yaml: environments.prod.waves: 'prod-hk-infer' is in no wave; fix: add it to a wave",
        "rollout.yaml: environments.prod.waves.0: 'prod-sg-infer' reads 'prod-us-train''s outputs but is "
        "not in a later wave; fix: put prod-sg-infer in a wave after prod-us-train's (waves.0)",
    ]


def test_default_waves_train_then_infer_one_region_of_the_global_endpoint_at_a_time() -> None:
    assert plan_waves(_rollout(environments={}), Environment.prod, STACKS) == [
        ["prod-us-train"],
        ["prod-hk-infer"],
        ["prod-sg-infer"],
    ]


def test_the_validation_record_owner_rolls_out_first() -> None:
    late = _rollout(
        environments={"prod": {"waves": [["prod-us-train"], ["prod-sg-infer"], ["prod-hk-infer"]]}}
    )
    assert _errors(late) == [
        "rollout.yaml: environments.prod.waves.1: 'prod-sg-infer' waits for the certificate validation "
        "record of api.inference.example.com that 'prod-hk-infer' declares, but prod-hk-infer rolls out "
        "later (waves.2); fix: put prod-hk-infer in a wave before prod-sg-infer's"
    ]


def test_two_regions_of_one_global_endpoint_never_share_a_wave() -> None:
    both = _rollout(environments={"prod": {"waves": [["prod-us-train"], ["prod-hk-infer", "prod-sg-infer"]]}})
    assert _errors(both) == [
        "rollout.yaml: environments.prod.waves.1: prod-hk-infer and prod-sg-infer both serve the global "
        "endpoint api.inference.example.com in one wave: draining both at once leaves no region to answer "
        "it; fix: put each of them in a wave of its own"
    ]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors, match="not found; fix: create it"):
        load_rollout_config(tmp_path / "rollout.yaml")
