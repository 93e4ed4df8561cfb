"""Every Dockerfile's steps against recorded facts of its base image (tests/images/base_images.yaml) that
break a build: a user or group that already exists, the Python version. Nothing is built (no Docker engine
here); what is checked is what `docker build` would run into."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from infra.core import dockerfiles
from tests.conftest import REPO

FACTS = yaml.safe_load((Path(__file__).parent / "base_images.yaml").read_text())["images"]
DOCKERFILES = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("images/*/Dockerfile"))
REQUIRES_PYTHON = SpecifierSet(
    tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
)


def _facts(ref: str) -> dict:
    tag = ref.split("@", 1)[0]
    assert tag in FACTS, f"{tag}: record its users, groups and Python in tests/images/base_images.yaml"
    return FACTS[tag]


def build_problems(text: str) -> list[str]:
    """What a build of the Dockerfile ``text`` would fail on, by the recorded facts of its bases."""
    bases = dockerfiles.base_images(text)
    problems = []
    for base in bases:
        facts = _facts(base.ref)
        users, groups = facts["users"], facts["groups"]
        for add in dockerfiles.account_adds(text):
            taken = users if add.command == "useradd" else groups
            if add.name in taken:
                problems.append(
                    f"line {add.line}: {add.command} {add.name}: {base.ref} already has {add.name!r}"
                )
            if add.id is not None and add.id in taken.values():
                owner = next(n for n, i in taken.items() if i == add.id)
                problems.append(
                    f"line {add.line}: {add.command} id {add.id}: {base.ref} gives it to {owner!r}"
                )
            if add.command == "useradd" and add.user_group and add.name in groups:
                problems.append(f"line {add.line}: useradd --user-group {add.name}: the group exists")
    return problems


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_steps_fit_the_base(dockerfile: str) -> None:
    assert build_problems((REPO / dockerfile).read_text()) == []


def test_the_old_vllm_useradd_is_caught() -> None:
    """The step the vLLM Dockerfile had: the upstream image already has a user `vllm` (uid 2000)."""
    old = (
        "ARG VLLM_IMAGE=docker.io/vllm/vllm-openai:v0.33.0\nFROM ${VLLM_IMAGE}\n"
        "RUN useradd --system --no-log-init --uid 10001 --user-group --no-create-home \\\n"
        "    --shell /usr/sbin/nologin vllm\n"
    )
    assert build_problems(old) == [
        "line 3: useradd vllm: docker.io/vllm/vllm-openai:v0.33.0 already has 'vllm'"
    ]
    # and a uid the base gives away (Ubuntu 24.04's `ubuntu`)
    taken = "FROM nvidia/cuda:13.0.3-cudnn-runtime-ubuntu24.04\nRUN useradd -u 1000 trainer\n"
    assert build_problems(taken) == [
        "line 2: useradd id 1000: nvidia/cuda:13.0.3-cudnn-runtime-ubuntu24.04 gives it to 'ubuntu'"
    ]


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_python_of_the_base_runs_our_code_and_our_locks(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text()
    for base in dockerfiles.base_images(text):
        python = _facts(base.ref)["python"]
        if re.search(r"^COPY\s+(--\S+\s+)*(trainer|inference)/", text, re.M):
            assert REQUIRES_PYTHON.contains(f"{python}.0"), (
                f"{base.ref}: Python {python} vs {REQUIRES_PYTHON}"
            )
        lock = Path(dockerfile).parent / "requirements.lock"
        if (REPO / lock).exists():
            made_for = re.search(r"--python-version (\d+\.\d+)", (REPO / lock).read_text())
            assert made_for and made_for.group(1) == python, f"{lock} was generated for another Python"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_every_from_is_pinned_by_digest_or_the_build_refuses_it(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text()
    for base in dockerfiles.base_images(text):
        if base.pinned:
            continue
        # a FROM without a digest only through a build argument, and the build checks that argument
        assert base.arg, f"{dockerfile}: FROM {base.ref} without a digest"
        assert re.search(rf'case "\$\{{{base.arg}\}}" in \*@sha256:', text), f"{dockerfile}: no digest check"


def test_the_dockerfile_reader() -> None:
    text = (
        "# syntax\nARG BASE=docker.io/library/python:3.12-slim\nARG DIGEST\n"
        "FROM ${BASE} AS build\nRUN groupadd -g 5000 app && \\\n    useradd -u 5000 -g app -s /bin/sh app\n"
        "FROM build\nFROM scratch\nFROM nvidia/cuda:13.0.3-base-ubuntu24.04@sha256:" + "a" * 64 + "\n"
    )
    bases = dockerfiles.base_images(text, {"BASE": "python:3.11-slim"})
    assert [(b.ref, b.arg, b.pinned) for b in bases] == [
        ("python:3.11-slim", "BASE", False),
        ("nvidia/cuda:13.0.3-base-ubuntu24.04@sha256:" + "a" * 64, None, True),
    ]
    assert [(a.command, a.name, a.id, a.line) for a in dockerfiles.account_adds(text)] == [
        ("groupadd", "app", 5000, 5),
        ("useradd", "app", 5000, 5),
    ]
