"""One vllm-router version: the image's pin file, the test environment (pyproject's dev extra, and what is
installed) and the config's default (``inference.router.version``)."""

from __future__ import annotations

import importlib.metadata as md
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from infra.inference.router.config import VLLM_ROUTER_VERSION, RouterConfig

REPO = Path(__file__).resolve().parents[4]


def _pinned(lines: list[str]) -> set[str]:
    reqs = [Requirement(x.split("#", 1)[0].strip()) for x in lines if x.split("#", 1)[0].strip()]
    return {
        str(s.version) for r in reqs if r.name == "vllm-router" for s in r.specifier if s.operator == "=="
    }


def test_the_image_the_tests_and_the_config_run_one_router_version() -> None:
    image = _pinned((REPO / "images/router/requirements.txt").read_text().splitlines())
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert image == _pinned(dev) == {VLLM_ROUTER_VERSION} == {RouterConfig().version}
    assert md.version("vllm-router") == VLLM_ROUTER_VERSION


def test_another_version_is_refused_with_where_the_pin_lives() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(
        ValidationError, match=r"installs vllm-router 0\.1\.17 \(images/router/requirements\.txt\)"
    ):
        RouterConfig(version="0.1.16")
