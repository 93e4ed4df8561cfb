"""Install the one mermaid file the docs site serves (``dist/mermaid.min.js``), pinned by package-lock.json.

The docs theme (mkdocs-material 9.8.2) loads mermaid from a CDN unless a ``mermaid`` global already exists
(its bundle: ``typeof mermaid == "undefined" ? <load from the CDN> : use it``; squidfunk/mkdocs-material
src/templates/assets/javascripts/components/content/mermaid/index.ts, docs/reference/diagrams.md "Custom
version"). The site lists ``assets/javascripts/mermaid.min.js`` in ``extra_javascript`` and ``hooks.py``
adds this file there at build time, so diagrams render offline and from ``file://``.

``npm pack`` fetches the package's tarball from the npm registry (npm's own configuration, no install of the
dependency tree: the IIFE build is self-contained); its sha512 must equal the ``integrity`` npm recorded
in package-lock.json, else nothing is written. The file goes to ``<sys.prefix>/share/aiplat-docs/`` of the
Python that runs this (the project's ``.venv``), where ``hooks.py`` looks.

    .venv/bin/python site-tools/fetch_mermaid.py      # what `make docs` runs
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "package-lock.json"
# The IIFE build: one file that defines the global ``mermaid`` (the ESM build loads chunks).
MEMBER = "package/dist/mermaid.min.js"


def pinned(lock: Path = LOCK) -> tuple[str, str]:
    """``(version, integrity)`` of mermaid as package-lock.json pins it."""
    entry = json.loads(lock.read_text())["packages"]["node_modules/mermaid"]
    return entry["version"], entry["integrity"]


def target(version: str, prefix: Path | None = None) -> Path:
    """Where the file for ``version`` lives: under the running (or given) environment's prefix."""
    return Path(prefix or sys.prefix) / "share" / "aiplat-docs" / f"mermaid-{version}.min.js"


def integrity_of(data: bytes) -> str:
    """A Subresource Integrity string (``sha512-<base64>``), as npm writes it into the lock."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def extract(tarball: bytes, expected: str, dest: Path) -> None:
    """Write ``MEMBER`` of ``tarball`` to ``dest`` once the tarball's integrity equals ``expected``."""
    got = integrity_of(tarball)
    if got != expected:
        raise SystemExit(
            f"error: mermaid tarball integrity {got} differs from package-lock.json's {expected}; "
            "fix: do not use this download (a changed registry answer or a proxy); regenerate the lock only "
            "deliberately (npm install --package-lock-only in site-tools/)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pkg.tgz"
        path.write_bytes(tarball)
        with tarfile.open(path) as tar:
            member = tar.extractfile(MEMBER)
            if member is None:
                raise SystemExit(f"error: {MEMBER} is not in the mermaid package")
            data = member.read()
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(dest)


def npm_pack(version: str) -> bytes:
    """The tarball of mermaid ``version`` as ``npm pack`` downloads it."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            "error: npm not found (it fetches the pinned mermaid for the docs site); "
            "fix: apt-get install -y npm, or install Node.js with npm"
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [npm, "pack", f"mermaid@{version}", "--json", "--ignore-scripts", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        if out.returncode != 0:
            raise SystemExit(f"error: npm pack mermaid@{version} failed: {out.stderr.strip()}")
        filename = json.loads(out.stdout)[0]["filename"]
        return (Path(tmp) / filename).read_bytes()


def main() -> int:
    version, integrity = pinned()
    dest = target(version)
    if dest.is_file():
        print(f"{dest} present (mermaid {version})")
        return 0
    extract(npm_pack(version), integrity, dest)
    print(f"wrote {dest} (mermaid {version}, tarball {integrity})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
