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
LOCK = REPO / "images/trainer/requirements.lock"
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
    # everything, torch included, from the lock generated from the pin file, every file checked against its
    # hash (tests/trainer/test_lock.py checks the lock against the pins): one pip install, no other index
    installs = [i.strip() for i in re.findall(r"pip install [^&]*", run_lines)]
    assert installs == [
        "pip install --no-cache-dir --require-hashes --no-deps -r /opt/trainer/requirements.lock"
    ]
    assert "&& pip check" in run_lines
    assert "--index-url" not in text and "--extra-index-url" not in text and "TORCH_INDEX_URL" not in text
    # No library is pinned a second time in the Dockerfile (or installed from the base image).
    for name in pins():
        assert not re.search(rf"\b{re.escape(name)}\s*(\[[^\]]*\])?\s*[=<>~!]=", text, flags=re.I), name
    assert not re.search(r"(FROM|BASE_IMAGE=)\s*pytorch/pytorch", text)  # no torch from a base image


def base_image_cuda(dockerfile: str) -> str:
    """The CUDA (major.minor) of the Dockerfile's nvidia/cuda runtime base image, pinned by digest."""
    cuda = re.search(
        r"ARG BASE_IMAGE=nvidia/cuda:(\d+\.\d+)\.\d+-\S*runtime\S*@sha256:[0-9a-f]{64}", dockerfile
    )
    assert cuda, "the base image must be an nvidia/cuda runtime image pinned by digest"
    return cuda.group(1)


def locked_cuda(lock: str) -> str:
    """The CUDA (major.minor) of the torch build the lock installs: its cuda-toolkit (only torch needs it)."""
    toolkit = re.search(
        r"^cuda-toolkit==(\d+\.\d+)\.\S*(?: \\\s+--hash=sha256:[0-9a-f]{64})+\s+# via torch$", lock, re.M
    )
    assert toolkit, "requirements.lock has no cuda-toolkit for torch: is torch's CUDA build locked?"
    return toolkit.group(1)


def test_the_base_images_cuda_is_the_locked_torchs() -> None:
    """PyPI's torch 2.13.0 Linux wheel is a CUDA 13.0 build (cuda-toolkit 13.0.3.0): the CUDA runtime image
    the trainer builds on must be the same major.minor."""
    base, locked = base_image_cuda(DOCKERFILE.read_text()), locked_cuda(LOCK.read_text())
    assert base == locked, f"base image CUDA {base}, the locked torch's cuda-toolkit {locked}: pick a pair"


def test_a_lock_with_another_cuda_is_caught() -> None:
    """Control: a cuda-toolkit 12.x in the lock does not pair with the CUDA 13.0 base image."""
    other = re.sub(r"^cuda-toolkit==\S+", "cuda-toolkit==12.9.1", LOCK.read_text(), flags=re.M)
    assert locked_cuda(other) == "12.9" != base_image_cuda(DOCKERFILE.read_text())


def test_a_drifted_pin_is_caught() -> None:
    """Control: the check above fails for a pin the environment does not have, and for one not installed."""
    req = Requirement(f"torch=={Version(version('torch')).major}.0.0")
    assert Version(Version(version("torch")).public) not in req.specifier
    with pytest.raises(AssertionError, match="torch: test env has"):
        check_installed("torch", req)
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        check_installed("aiplat-no-such-dist", Requirement("aiplat-no-such-dist==1.0"))
