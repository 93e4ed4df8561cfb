"""examples/byo-llama: its requirements repeat the repository's pins (one pin per library, the versions
the tests run), and its Dockerfile builds on the platform trainer image's base by digest, installs those
requirements, verifies the EFA installer as the trainer image does and runs as a numeric non-root user."""

from __future__ import annotations

import re
import tomllib

from infra.io.build_context import context_files
from tests.conftest import REPO

EXAMPLE = REPO / "examples/byo-llama"
TRAINER_DOCKERFILE = REPO / "images/trainer/Dockerfile"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^\s;]+)$")


def _pins(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = PIN.match(line)
        assert m, f"not an exact pin: {line!r}"
        name = m[1].lower().replace("_", "-")
        assert name not in out, f"{name} pinned twice"
        out[name] = m[3]
    return out


def _repository_pins() -> dict[str, str]:
    """Every pin of pyproject.toml's extras (trainer, dev, inference, ...): the versions the tests run."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    out: dict[str, str] = {}
    for deps in extras.values():
        for name, version in _pins([d for d in deps if "==" in d]).items():
            assert out.get(name, version) == version, f"{name}: two pins in pyproject.toml"
            out[name] = version
    return out


def test_requirements_repeat_the_repositorys_pins() -> None:
    example = _pins((EXAMPLE / "requirements.txt").read_text().splitlines())
    repo = _repository_pins()
    # what train.py imports besides the standard library, the format transformers writes the model in, and
    # what the checkpoint helper (trainer.checkpoint.job) saves to S3 with
    assert {"torch", "transformers", "safetensors", "boto3", "s3torchconnector"} <= set(example)
    for name, version in example.items():
        assert name in repo, (
            f"{name} is not pinned in pyproject.toml: pin it there first (one pin per library)"
        )
        assert version == repo[name], f"{name}: {version} here, {repo[name]} in pyproject.toml"


def _arg(text: str, name: str) -> str:
    [value] = re.findall(rf"^ARG {name}=(\S+)$", text, flags=re.M)
    return value


def test_the_dockerfile_pins_its_base_and_installs_the_requirements() -> None:
    text = (EXAMPLE / "Dockerfile").read_text()
    base = _arg(text, "BASE_IMAGE")
    assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), base
    # the same base and digest as the platform's trainer image (one source for the digest), and torch from
    # the same index: PyPI, whose torch Linux wheel is the CUDA build that base pairs with
    # (tests/trainer/test_pins.py checks the pair against the trainer's lock)
    trainer = TRAINER_DOCKERFILE.read_text()
    assert base == _arg(trainer, "BASE_IMAGE")
    for dockerfile in (text, trainer):
        assert "--index-url" not in dockerfile and "TORCH_INDEX_URL" not in dockerfile
    assert "FROM ${BASE_IMAGE}" in text and "must be pinned by digest" in text
    assert "COPY examples/byo-llama/requirements.txt /app/requirements.txt" in text
    assert "pip install --no-cache-dir -r /app/requirements.txt" in text and "pip check" in text
    installs = [i.strip(" \\") for i in re.findall(r"pip install [^&\n]*", text)]
    assert installs == ["pip install --no-cache-dir -r /app/requirements.txt"]  # torch with the rest


def test_the_dockerfile_verifies_efa_and_runs_as_non_root() -> None:
    text = (EXAMPLE / "Dockerfile").read_text()
    trainer = TRAINER_DOCKERFILE.read_text()
    for arg in ("EFA_INSTALLER_VERSION", "EFA_KEY_FINGERPRINT"):
        assert _arg(text, arg) == _arg(trainer, arg)
    assert re.search(r"gpg .*--verify .*\.sig", text) and "VALIDSIG" in text and "--check-signatures" in text
    users = re.findall(r"^USER (\S+)$", text, flags=re.M)
    # the pods run with runAsNonRoot: the kubelet can only verify a numeric user
    assert users and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", users[-1]), users


def test_the_image_ships_the_checkpoint_helper_from_the_repository_root_context() -> None:
    """train.py imports the platform's checkpoint helper (trainer.checkpoint.job); the image copies the
    trainer package beside it, and the build context (the repository root through the Dockerfile's own
    .dockerignore) holds exactly what the COPY lines name."""
    text = (EXAMPLE / "Dockerfile").read_text()
    copies = re.findall(r"^COPY (?:--chown=\S+ )?(\S+) (\S+)$", text, flags=re.M)
    assert ("trainer/", "/app/trainer/") in copies
    assert ("examples/byo-llama/train.py", "/app/train.py") in copies
    files = context_files(REPO, ".", "examples/byo-llama/Dockerfile")
    assert "trainer/checkpoint/job.py" in files and "trainer/checkpoint/checkpointer.py" in files
    assert all(any(f == src or f.startswith(src) for src, _ in copies) for f in files), files
    for src, _ in copies:
        assert any(f == src or f.startswith(src) for f in files), f"{src} is not in the build context"
