"""A key written twice in one mapping of a file a person edits is refused, with the key and both lines;
PyYAML alone keeps the last copy without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.core.errors import ConfigErrors
from infra.io.stackfiles import load_stack_config
from infra.io.yaml_files import DuplicateKeyError, load_yaml
from tests.conftest import REPO


def test_a_duplicate_team_in_a_stack_file_is_refused(tmp_path: Path) -> None:
    text = (REPO / "stacks" / "Pulumi.dev-us-train.yaml").read_text()
    lines = text.splitlines()
    at = lines.index("      ml:")  # the one team, under teams:
    copy = ["      ml:", "        quotas:", "          gpu: {gpus: 1}", "        default_priority: dev"]
    (tmp_path / "Pulumi.dev-us-train.yaml").write_text("\n".join([*lines, *copy]) + "\n")
    with pytest.raises(ConfigErrors) as info:
        load_stack_config("dev-us-train", tmp_path)
    [line] = str(info.value).splitlines()
    assert line == (
        f"{tmp_path / 'Pulumi.dev-us-train.yaml'}: (file): key 'ml' under 'teams' appears twice: at line "
        f"{at + 1} and at line {len(lines) + 1}; fix: keep one 'ml' (merge the two: a YAML loader keeps only "
        f"the last copy, so everything under line {at + 1} would be ignored)"
    )


def test_merge_keys_and_distinct_keys_still_load() -> None:
    assert load_yaml("a: &x {b: 1}\nc:\n  <<: *x\n  d: 2\n") == {"a": {"b": 1}, "c": {"b": 1, "d": 2}}
    assert load_yaml("a: {b: 1}\nc: {b: 2}\n") == {"a": {"b": 1}, "c": {"b": 2}}


def test_a_duplicate_at_the_top_names_no_parent() -> None:
    with pytest.raises(DuplicateKeyError) as info:
        load_yaml("name: a\nimage: x\nname: b\n")
    assert str(info.value) == "key 'name' appears twice: at line 1 and at line 3"
