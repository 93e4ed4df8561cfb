"""A site directory with only what the inference image has: the repo's ``inference`` and ``trainer``
packages and the distributions of images/inference/requirements.txt with everything they require.

``python -S`` (no site-packages) with ``PYTHONPATH`` set to it runs the fetch tool as the image would: any
import of another installed distribution (torch, safetensors, numpy: the image has none), or of another repo
package (``infra``), fails. The fetch tests run the tool that way, so a dependency missing from the pin file
fails the test suite, not the first deployment.
"""

from __future__ import annotations

import importlib.metadata as md
import re
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "images/inference/requirements.txt"
OWN = ("inference", "trainer")  # what the Dockerfile copies from the repo


def pins(path: Path = REQUIREMENTS) -> dict[str, str]:
    """``{canonical name: version}`` of a requirements file that holds only ``name==version`` lines."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!_-]+)", line)
            if not m:
                raise ValueError(f"{path}: {line!r} is not name==version")
            out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require (as installed here; markers for this Python)."""
    env = dict(default_environment())
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for spec in md.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def build_site(dest: Path, requirements: Path = REQUIREMENTS) -> Path:
    """Symlink into ``dest`` every top-level file and folder of the required distributions (packages,
    modules, extension modules, ``*.dist-info``, bundled ``*.libs``) and the repo's own packages."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in sorted(closure(set(pins(requirements)))):
        dist = md.distribution(name)
        for top in sorted({f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}):
            src = Path(str(dist.locate_file(top)))
            if src.exists() and not (dest / top).exists():
                (dest / top).symlink_to(src)
    for pkg in OWN:
        (dest / pkg).symlink_to(REPO / pkg)
    return dest
