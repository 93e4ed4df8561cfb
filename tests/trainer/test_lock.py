"""images/trainer/requirements.lock: generated from the one pin file, every file hashed, the whole closure
of what the image installs (torch and its CUDA libraries included, all from PyPI, with --require-hashes
--no-deps)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "images/trainer/requirements.txt"
LOCK = REPO / "images/trainer/requirements.lock"


def _requirements(path: Path) -> dict[str, Requirement]:
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line.split(" --hash", 1)[0])
            out[canonicalize_name(req.name)] = req
    return out


def _hashes(path: Path) -> dict[str, list[str]]:
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return {
        canonicalize_name(Requirement(line.split(" --hash", 1)[0]).name): re.findall(
            r"--hash=sha256:([0-9a-f]{64})", line
        )
        for line in text.splitlines()
        if line and not line.startswith("#") and not line.startswith(" ")
    }


def test_every_pin_is_locked_at_its_version() -> None:
    pins, lock = _requirements(PINS), _requirements(LOCK)
    assert "torch" in pins  # torch too: the image installs nothing outside the lock
    for name, pin in pins.items():
        assert name in lock, f"{name} is pinned in {PINS.name} but missing from {LOCK.name}: regenerate it"
        assert str(lock[name].specifier) == str(pin.specifier), f"{name}: lock {lock[name]}, pin {pin}"
        assert lock[name].extras <= pin.extras or not lock[name].extras


def test_every_locked_package_is_exact_and_hashed() -> None:
    for name, req in _requirements(LOCK).items():
        (spec,) = req.specifier
        assert spec.operator == "==", f"{name}: {req} is not an exact pin"
    for name, hashes in _hashes(LOCK).items():
        assert hashes, f"{name} has no --hash in {LOCK.name}"


def test_the_lock_is_the_whole_closure() -> None:
    """Every dependency of a locked package (on the image's Linux, Python 3.12) is locked: with --no-deps
    nothing else is installed. Read from the installed metadata of the same versions (the test environment
    runs the pins: tests/trainer/test_pins.py); torch's CPU wheel there ("2.13.0+cpu") is another build than
    the lock's, so its CUDA dependencies are proved by the image's pip check, not here."""
    lock = _requirements(LOCK)
    env = default_environment() | {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "python_version": "3.12",
    }
    missing = []
    for name, req in lock.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not in the test environment (a transitive pin): its own deps are checked by pip check
        if dist.version != str(next(iter(req.specifier)).version):
            continue
        for dep in map(Requirement, dist.requires or []):
            extras = req.extras or {""}
            if dep.marker and not any(dep.marker.evaluate(env | {"extra": e}) for e in extras):
                continue
            dep_name = canonicalize_name(dep.name)
            if dep_name not in lock:
                missing.append(f"{name} needs {dep}")
    assert not missing, missing
