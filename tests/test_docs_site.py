"""The docs site against the tree: the architecture page's layout table names what exists and every part of
the tree, the README stays a page or two, and every page is in the site's nav."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
# Packages whose row must name every module they hold (the rows a newcomer looks a file up in).
COMPLETE = (
    "infra/io/",
    "infra/ops/",
    "infra/plan/",
    "infra/review/",
    "infra/core/",
    "infra/resources/",
    "infra/stack/",
    "infra/schema/",
    "infra/keys/",
    "infra/storage/",
    "infra/network/",
    "infra/audit/",
    "infra/pools/",
    "infra/cluster/",
    "infra/pod_storage/",
    "infra/karpenter/",
    "infra/services/",
    "infra/fsx/",
    "infra/queueing/",
    "infra/training/",
    "infra/monitoring/",
    "infra/logs/",
    "infra/inference/",
    "infra/preflight/",
    "infra/cost/",
    "infra/opencost/",
)


def layout() -> dict[str, str]:
    """Each path of the layout table's first column -> that row's description."""
    rows = {}
    for line in ARCHITECTURE.read_text().splitlines():
        m = re.match(r"^\| (`[^|]+`) \| (.+) \|$", line)
        if m:
            for path in re.findall(r"`([^`]+)`", m.group(1)):
                rows[path] = m.group(2)
    return rows


def tracked_top_level() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {line.split("/")[0] + ("/" if "/" in line else "") for line in out.splitlines()}


def test_every_path_in_the_layout_exists() -> None:
    rows = layout()
    assert len(rows) > 20
    missing = [path for path in rows if not (REPO / path.rstrip("/")).exists()]
    assert missing == []


def test_the_layout_covers_the_tree() -> None:
    rows = layout()
    covered = {p.split("/")[0] + ("/" if "/" in p else "") for p in rows}
    top = {p for p in tracked_top_level() if p.endswith("/")} | {"Makefile", "pyproject.toml", "mkdocs.yml"}
    assert top - covered == set()
    infra = {
        f"infra/{p.name}/" if p.is_dir() else f"infra/{p.name}"
        for p in (REPO / "infra").iterdir()
        if p.name not in {"__init__.py", "__pycache__"}
    }
    named = {p for p in rows if p.startswith("infra/")}
    assert infra - named == set()


@pytest.mark.parametrize("package", COMPLETE)
def test_complete_rows_name_every_module(package: str) -> None:
    text = layout()[package]
    modules = {p.name for p in (REPO / package).glob("*.py") if p.name != "__init__.py"}
    named = set(re.findall(r"`([\w/]+\.py)(?::\w+)?`", text))
    assert modules - named == set(), f"{package}: modules the layout table does not name"
    assert {m for m in named if "/" not in m} - modules == set(), f"{package}: names no such module"


def test_readme_is_a_page_or_two() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


def test_every_page_is_in_the_nav() -> None:
    """Every Markdown page under docs/ is reachable from the site's navigation (mkdocs.yml)."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()
