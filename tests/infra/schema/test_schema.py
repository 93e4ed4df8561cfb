"""Config validation: every bad input fails with a message that names the field and the fix."""

from __future__ import annotations

import pytest

from infra.core.config import Environment, Role
from infra.core.errors import ConfigErrors
from infra.io.stackfiles import load_stack_config
from infra.pools.config import CapacityType
from tests.conftest import DELETE, assert_rejected


def test_every_stack_file_is_valid() -> None:
    for stack in ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        cfg = load_stack_config(stack)
        assert cfg.node_pools, stack


def test_stack_facts() -> None:
    dev = load_stack_config("dev-us-train")
    assert (dev.environment, dev.role, dev.region) == (Environment.dev, Role.train, "us-west-2")
    assert dev.node_pools["gpu"].capacity_type is CapacityType.spot
    prod = load_stack_config("prod-us-train")
    assert prod.region == "us-east-1" and prod.node_pools["train"].instance_type == "p5.48xlarge"
    assert load_stack_config("prod-hk-infer").region == "ap-east-1"
    assert load_stack_config("prod-sg-infer").region == "ap-southeast-1"


BAD = [
    # (path to change, new value, expected fragments of the one-line message)
    ("regoin", "us-east-1", ["aiplat:platform.regoin: unknown key", "did you mean 'region'?"]),
    ("region", "us west 2", ["aiplat:platform.region", "'us west 2' is not an AWS region name"]),
    (
        "environment",
        "staging",
        ["aiplat:platform.environment", "'staging' is not allowed", "'dev' or 'prod'"],
    ),
    ("role", DELETE, ["aiplat:platform.role: required key is missing"]),
    ("tags.Owner", DELETE, ["aiplat:platform.tags.Owner: required key is missing"]),
    ("tags.Environment", "prod", ["tags.Environment is 'prod' but environment is 'dev'", "make them equal"]),
    ("tags.extra", {"aws:foo": "x"}, ["aiplat:platform.tags.extra", "reserved 'aws:' prefix"]),
    ("network.vpc_cidr", "10.0.0.0/8", ["aiplat:platform.network.vpc_cidr", "prefix /8", "/16 to /20"]),
    ("network.vpc_cidr", "8.8.0.0/16", ["not a private", "10.0.0.0/16"]),
    ("network.vpc_cidr", "10.0.0.0/33", ["not an IPv4 CIDR"]),
    ("network.az_count", 9, ["aiplat:platform.network.az_count", "9"]),
    ("node_pools.gpu.instance_type", "g5", ["node_pools.gpu.instance_type", "'g5'", "should match pattern"]),
    (
        "node_pools.gpu.capacty_type",
        "spot",
        ["node_pools.gpu.capacty_type: unknown key", "did you mean 'capacity_type'"],
    ),
    (
        "node_pools.gpu.capacity_type",
        "cheap",
        ["node_pools.gpu.capacity_type", "'cheap' is not allowed", "'spot'"],
    ),
    (
        "node_pools.gpu.min_size",
        3,
        ["aiplat:platform.node_pools.gpu", "min_size 3 is greater than max_size 2"],
    ),
    ("node_pools.gpu.desired_size", 5, ["desired_size 5 is outside min_size..max_size (0..2)"]),
    ("node_pools.GPU_Pool", {"instance_type": "g5.xlarge"}, ["pool name 'GPU_Pool'", "lower-case"]),
    # a quoted number is a string, not coerced (pydantic's strict mode)
    (
        "node_pools.gpu.max_size",
        "3",
        [
            "aiplat:platform.node_pools.gpu.max_size: '3' is a string, but an integer is expected; "
            "fix: write it without quotes (max_size: 3)"
        ],
    ),
    (
        "network.az_count",
        "three",
        ["network.az_count: 'three' is a string", "write an integer without quotes"],
    ),
    (
        "training.bandwidth_check.enabled",
        "false",
        ["bandwidth_check.enabled: 'false' is a string, but true or false is expected", "(enabled: false)"],
    ),
]


@pytest.mark.parametrize(("path", "value", "expected"), BAD, ids=[f"{p}={v!r}"[:40] for p, v, _ in BAD])
def test_bad_input_is_named(stack_config, path: str, value: object, expected: list[str]) -> None:
    assert_rejected(stack_config("dev-us-train"), path, value, expected)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("aiplat:platfrom", "did you mean 'aiplat:platform'?"),
        ("aws:region", "set aiplat:platform.region instead"),
        ("foo:bar", "remove it; this project reads only aiplat:platform"),
    ],
)
def test_unknown_top_level_keys(stack_doc, stack_config, write_stack, key: str, expected: str) -> None:
    doc = stack_doc("dev-us-train")
    doc["config"][key] = "x"
    folder = write_stack("bad", doc)
    with pytest.raises(ConfigErrors) as info:
        load_stack_config("bad", folder)
    assert f"Pulumi.bad.yaml: {key}:" in str(info.value)
    assert expected in str(info.value)


def test_unknown_stack_suggests(tmp_path) -> None:
    with pytest.raises(ConfigErrors, match="did you mean 'prod-us-train'"):
        load_stack_config("prod-us-trian")
