"""The one-line errors of values YAML reads differently than their author meant, and of numbers out of
range: each says what to write instead and why."""

from __future__ import annotations

import pytest

from infra.core.errors import ConfigErrors
from infra.schema.parse import parse_platform_config
from tests.conftest import with_value


def _error(raw: dict, path: str, value: object) -> str:
    with pytest.raises(ConfigErrors) as info:
        parse_platform_config(with_value(raw, path, value))
    [line] = str(info.value).splitlines()
    return line


def test_an_unquoted_kubernetes_version_says_quote_it(stack_config) -> None:
    # `kubernetes_version: 1.30` in a stack file: YAML reads the float 1.3
    line = _error(stack_config("dev-us-train"), "cluster.kubernetes_version", 1.3)
    assert line == (
        "aiplat:platform.cluster.kubernetes_version: 1.3 is a number (YAML reads an unquoted 1.30 as the "
        'number 1.3), but text is expected; fix: quote it: kubernetes_version: "1.30"'
    )


def test_an_unquoted_kubernetes_version_that_survives_as_written(stack_config) -> None:
    line = _error(stack_config("dev-us-train"), "cluster.kubernetes_version", 1.35)
    assert line.endswith('1.35 is a number, but text is expected; fix: quote it: kubernetes_version: "1.35"')


def test_one_api_key_slot_says_why_two_and_what_to_set(stack_config) -> None:
    line = _error(stack_config("prod-sg-infer"), "inference.auth.api_key_slots", 1)
    assert line.startswith(
        "aiplat:platform.inference.auth.api_key_slots: 1: input should be greater than or equal to 2; "
        "fix: set api_key_slots to at least 2 ("
    )
    assert "At least two, so a new key is valid before the old one goes." in line
    assert "correct the value" not in line


def test_a_number_above_its_range_names_the_bound(stack_config) -> None:
    line = _error(stack_config("prod-sg-infer"), "inference.auth.api_key_slots", 9)
    assert "fix: set api_key_slots to at most 8 (" in line
