"""The image tag is a hash of what the build sees: the files .dockerignore lets through (Docker's rules),
the Dockerfile, build arguments and platform."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infra.io.build_context import REPO_ROOT, build_hash, context_files, ignored, image_tag, parse_ignore


# Docker's documented examples (https://docs.docker.com/build/concepts/context/#dockerignore-files) and
# moby/patternmatcher semantics: last match wins, a matched parent directory excludes its children.
@pytest.mark.parametrize(
    ("rules", "path", "excluded"),
    [
        ("*/temp*", "somedir/temporary.txt", True),
        ("*/temp*", "temp", False),
        ("*/*/temp*", "somedir/subdir/temporary.txt", True),
        ("temp?", "tempa", True),
        ("temp?", "tempab", False),
        ("**/*.go", "a/b/c.go", True),
        ("**/*.go", "c.go", True),
        ("*.md\n!README.md", "README.md", False),
        ("*.md\n!README.md", "CHANGES.md", True),
        ("*.md\n!README*.md\nREADME-secret.md", "README-secret.md", True),
        ("*\n!trainer/", "trainer/config.py", False),
        ("*\n!trainer/", "infra/program.py", True),
        ("*\n!trainer/\n**/__pycache__", "trainer/tools/__pycache__/x.pyc", True),
        ("/build", "build/out.txt", True),
    ],
)
def test_ignore_patterns_follow_docker(rules: str, path: str, excluded: bool) -> None:
    assert ignored(path, parse_ignore(rules)) is excluded


def _tree(root: Path) -> None:
    (root / "images/trainer").mkdir(parents=True)
    (root / "images/trainer/Dockerfile").write_text("FROM scratch\nCOPY trainer/ /t/\n")
    (root / "images/trainer/Dockerfile.dockerignore").write_text("*\n!trainer/\n**/__pycache__\n")
    (root / "trainer").mkdir()
    (root / "trainer/a.py").write_text("a = 1\n")
    (root / "infra").mkdir()
    (root / "infra/b.py").write_text("b = 1\n")
    (root / "trainer/__pycache__").mkdir()
    (root / "trainer/__pycache__/a.cpython-311.pyc").write_bytes(b"\0")


def _hash(root: Path, **kw) -> str:
    args = {
        "context": ".",
        "dockerfile": "images/trainer/Dockerfile",
        "build_args": {},
        "platform": "linux/amd64",
    }
    return build_hash(root, **{**args, **kw})


def test_tag_changes_with_what_the_image_copies_only(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert context_files(tmp_path, ".", "images/trainer/Dockerfile") == ["trainer/a.py"]
    base = _hash(tmp_path)
    (tmp_path / "infra/b.py").write_text("b = 2\n")  # outside the context the ignore file allows
    (tmp_path / "trainer/__pycache__/a.cpython-311.pyc").write_bytes(b"\1")
    assert _hash(tmp_path) == base
    (tmp_path / "trainer/a.py").write_text("a = 2\n")
    changed = _hash(tmp_path)
    assert changed != base
    os.chmod(tmp_path / "trainer/a.py", 0o755)
    assert _hash(tmp_path) != changed
    assert _hash(tmp_path, build_args={"X": "1"}) != _hash(tmp_path)
    assert _hash(tmp_path, platform="linux/arm64") != _hash(tmp_path)
    (tmp_path / "images/trainer/Dockerfile").write_text("FROM scratch\n")
    assert _hash(tmp_path) != changed


def test_the_trainer_image_context_is_the_trainer_package() -> None:
    files = context_files(REPO_ROOT, ".", "images/trainer/Dockerfile")
    pins = ("images/trainer/requirements.txt", "images/trainer/requirements.lock")
    assert files and all(f.startswith("trainer/") or f in pins for f in files)
    assert set(pins) <= set(files)
    assert "trainer/train.py" in files
    assert not any("__pycache__" in f for f in files)
    tag = image_tag(_hash(REPO_ROOT))
    assert tag.startswith("ctx-") and len(tag) == 28


def test_the_inference_image_context_has_the_lock_it_installs() -> None:
    files = context_files(REPO_ROOT, ".", "images/inference/Dockerfile")
    assert "images/inference/requirements.lock" in files
    assert all(f.startswith(("trainer/", "inference/")) or f.startswith("images/inference/") for f in files)


def test_a_base_image_without_a_digest_is_refused_unless_the_stack_says_why(stack_config, monitors) -> None:
    """The plan refuses what the vLLM Dockerfile's build would refuse: its FROM by tag only (the stack file
    gives no digest), naming the build argument to set; with unpinned_base the build gets the reason and the
    plan warns."""
    from infra.plan.runner import run_plan
    from infra.schema.parse import parse_platform_config
    from tests.support.config_cases import assert_refused

    raw = stack_config("prod-us-train")
    del raw["images"]["builds"]["vllm"]["unpinned_base"]
    message = assert_refused(raw, "the base image 'docker.io/vllm/vllm-openai:v0.33.0'", monitors)
    assert message.startswith("aiplat:platform.images.builds.vllm.build_args.VLLM_IMAGE: ")
    assert "docker buildx imagetools inspect docker.io/vllm/vllm-openai:v0.33.0" in message

    pinned = stack_config("prod-us-train")
    del pinned["images"]["builds"]["vllm"]["unpinned_base"]
    digest = (
        "docker.io/vllm/vllm-openai:v0.33.0@sha256:" + "0" * 64
    )  # a well-formed digest: only its shape matters here
    pinned["images"]["builds"]["vllm"]["build_args"] = {"VLLM_IMAGE": digest}
    plan = run_plan("prod-us-train", parse_platform_config(pinned))
    images = [r for r in plan.resources if r.type == "docker-build:index:Image" and r.name.endswith("vllm")]
    assert [r.inputs["buildArgs"] for r in images] == [{"VLLM_IMAGE": digest}]
    assert not [f for f in plan.findings if f.rule == "image-base-unpinned"]

    shipped = run_plan("prod-us-train")
    (image,) = [
        r for r in shipped.resources if r.type == "docker-build:index:Image" and r.name.endswith("vllm")
    ]
    assert image.inputs["buildArgs"]["ALLOW_UNPINNED_BASE"].startswith(
        "the digest of vllm/vllm-openai:v0.33.0"
    )
    assert [f.field for f in shipped.findings if f.rule == "image-base-unpinned"] == [
        "aiplat:platform.images.builds.vllm.unpinned_base"
    ]
