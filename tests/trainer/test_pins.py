"""One pin per library: images/trainer/requirements.txt is what the image installs and what the test
environment runs (pyproject's ``trainer`` extra repeats it); this fails when they drift apart."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from trainer.tools.commands import REPO

PINS = REPO / "images/trainer/requirements.txt"
DOCKERFILE = REPO / "images/trainer/Dockerfile"
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def pins() -> dict[str, Requirement]:
    """``{name: requirement}``; every pin exact (==) and documented by a comment with a date above it."""
    out: dict[str, Requirement] = {}
    comments: list[str] = []
    for line in PINS.read_text().splitlines():
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            comments.append(text)
            continue
        req = Requirement(text)
        [spec] = list(req.specifier)
        assert spec.operator == "==", f"{text}: pin an exact version"
        assert comments and DATE.search(" ".join(comments)), f"{text}: say where it comes from and when"
        out[req.name.lower()] = req
        comments = []
    return out


def test_trainer_extra_repeats_the_pin_file() -> None:
    """pyproject's ``trainer`` extra (what the test environment installs) is the pin file, line for line."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "trainer"
    ]
    assert [str(Requirement(r)) for r in extra] == [str(r) for r in pins().values()]
    assert {"torch", "numpy", "prometheus-client", "s3torchconnector", "boto3", "safetensors"} <= set(pins())


def check_installed(name: str, req: Requirement) -> None:
    """Fail unless the installed distribution ``name`` satisfies the pin ``req``."""
    try:
        installed = Version(version(name))
    except PackageNotFoundError:
        pytest.fail(f"{name} is pinned in {PINS.name} but not installed: pip install -e '.[trainer]'")
    # The CPU wheel is "2.13.0+cpu": the local label names the build, the version is the pin's.
    assert Version(installed.public) in req.specifier, f"{name}: test env has {installed}, pin is {req}"


@pytest.mark.parametrize("name", sorted(pins()))
def test_test_environment_runs_the_pinned_version(name: str) -> None:
    check_installed(name, pins()[name])


def test_dockerfile_installs_exactly_the_pin_file() -> None:
    text = DOCKERFILE.read_text()
    run_lines = " ".join(re.findall(r"^RUN .*?(?<!\\)$", text, flags=re.S | re.M)).replace("\\\n", " ")
    assert "COPY images/trainer/requirements.txt images/trainer/requirements.lock /opt/trainer/" in text
    # everything but torch from the lock generated from the pin file, every file checked against its hash
    # (tests/trainer/test_lock.py checks the lock against the pins)
    assert (
        "pip install --no-cache-dir --require-hashes --no-deps -r /opt/trainer/requirements.lock" in run_lines
    )
    assert "&& pip check" in run_lines
    # torch (CUDA build) comes from the PyTorch index with the version taken from the pin file itself.
    assert """"$(grep -E '^torch==' /opt/trainer/requirements.txt)\"""" in run_lines
    # No library is pinned a second time in the Dockerfile (or installed from the base image).
    scan = text.replace("'^torch=='", "")  # the grep pattern above is not a pin
    for name in pins():
        assert not re.search(rf"\b{re.escape(name)}\s*(\[[^\]]*\])?\s*[=<>~!]=", scan, flags=re.I), name
    assert not re.search(r"(FROM|BASE_IMAGE=)\s*pytorch/pytorch", text)  # no torch from a base image
    # The CUDA runtime of the base image matches the torch build's: 13.0 <-> cu130.
    cuda = re.search(r"ARG BASE_IMAGE=nvidia/cuda:(\d+)\.(\d+)\.\d+-\S*runtime\S*@sha256:[0-9a-f]{64}", text)
    index = re.search(r"ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cu(\d+)", text)
    assert cuda and index, "base image must be an nvidia/cuda runtime image, torch from the PyTorch index"
    assert f"{cuda.group(1)}{cuda.group(2)}" == index.group(1)


def test_a_drifted_pin_is_caught() -> None:
    """Control: the check above fails for a pin the environment does not have, and for one not installed."""
    req = Requirement(f"torch=={Version(version('torch')).major}.0.0")
    assert Version(Version(version("torch")).public) not in req.specifier
    with pytest.raises(AssertionError, match="torch: test env has"):
        check_installed("torch", req)
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        check_installed("aiplat-no-such-dist", Requirement("aiplat-no-such-dist==1.0"))
