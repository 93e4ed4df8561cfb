"""The scale benchmark's generated stacks (bench/scale_stacks.py) are valid configs: 200 teams with unique
30-character names, as many releasing as the schema allows, and copies of dev-us-train with their own
prefixes and VPC ranges."""

from __future__ import annotations

from pathlib import Path

from bench.scale_stacks import (
    FOLDER_STACK,
    TRAIN_STACK,
    write_alone_folder,
    write_stacks_folder,
    write_train_folder,
)
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.queueing.config import MAX_RELEASING_TEAMS


def test_a_train_stack_with_two_hundred_teams_is_a_valid_config(tmp_path: Path) -> None:
    stack = write_train_folder(tmp_path, 200)
    cfg = load_stack_config(stack, tmp_path)
    assert stack == TRAIN_STACK and len(cfg.teams) == 200
    generated = [name for name in cfg.teams if name not in ("production", "research")]
    assert {len(name) for name in generated} == {30}
    assert sum(t.releases for t in cfg.teams.values()) == MAX_RELEASING_TEAMS
    assert (tmp_path / "policy-pack" / f"{TRAIN_STACK}.json").is_file()


def test_a_folder_of_sixteen_stacks_has_distinct_prefixes_and_networks(tmp_path: Path) -> None:
    names = write_stacks_folder(tmp_path, 16)
    assert list_stacks(tmp_path) == sorted(names) and len(names) == 16
    configs = [load_stack_config(s, tmp_path) for s in names]
    keys = {(c.name_prefix, c.environment, c.role, c.region) for c in configs}
    assert len(keys) == 16
    assert len({c.network.vpc_cidr for c in configs if c.region == "us-west-2"}) == 13
    assert write_alone_folder(tmp_path / "alone") == FOLDER_STACK
    assert list_stacks(tmp_path / "alone") == [FOLDER_STACK]
