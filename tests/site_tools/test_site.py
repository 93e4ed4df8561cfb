"""The built docs site browses offline: ``mkdocs build --strict`` with the project's mkdocs.yml gives pages
that load no script or stylesheet from another host, link to ``.html`` files that exist (so ``file://``
works), and carry the pinned mermaid the diagrams need; the pin refuses any tarball but the locked one."""

from __future__ import annotations

import html
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "site-tools"))
import fetch_mermaid  # noqa: E402  (site-tools/ is a folder of scripts, not a package)

MERMAID_URI = "assets/javascripts/mermaid.min.js"


class Refs(HTMLParser):
    """Every script src, stylesheet href and anchor href of one page, and the text of its mermaid blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.stylesheets: list[str] = []
        self.links: list[str] = []
        self.mermaid: list[str] = []
        self._in_mermaid = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"] or "")
        elif tag == "link" and a.get("href") and "stylesheet" in (a.get("rel") or ""):
            self.stylesheets.append(a["href"] or "")
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        elif tag in ("pre", "div") and "mermaid" in (a.get("class") or "").split():
            self._in_mermaid = True
            self.mermaid.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("pre", "div"):
            self._in_mermaid = False

    def handle_data(self, data: str) -> None:
        if self._in_mermaid:
            self.mermaid[-1] += data


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stderr
    return out


def pages(site: Path) -> dict[Path, Refs]:
    out = {}
    for page in site.rglob("*.html"):
        refs = Refs()
        refs.feed(page.read_text())
        out[page] = refs
    return out


def external(url: str) -> bool:
    return bool(urlsplit(url).scheme) or url.startswith("//")


@pytest.mark.slow
def test_no_page_loads_a_script_or_stylesheet_from_another_host(site: Path) -> None:
    found = {
        str(page.relative_to(site)): [u for u in refs.scripts + refs.stylesheets if external(u)]
        for page, refs in pages(site).items()
    }
    assert len(found) > 50
    assert {page: urls for page, urls in found.items() if urls} == {}


@pytest.mark.slow
def test_links_are_html_files_that_exist(site: Path) -> None:
    """use_directory_urls: false: a link to a directory would show a directory listing from file://."""
    bad = []
    for page, refs in pages(site).items():
        if page.name == "404.html":
            continue  # what a web server answers for any missing path: its links are absolute (site_url)
        for href in refs.links:
            if external(href) or href.startswith("#"):
                continue
            path = urlsplit(href).path
            target = (page.parent / path).resolve()
            if not path.endswith(".html") or not target.is_file():
                bad.append((str(page.relative_to(site)), href))
    assert bad == []


@pytest.mark.slow
def test_diagrams_get_the_pinned_mermaid(site: Path) -> None:
    version, _ = fetch_mermaid.pinned()
    served = site / MERMAID_URI
    assert served.read_bytes() == fetch_mermaid.target(version).read_bytes()
    # the IIFE build: it defines the global that material looks for before it would load a CDN copy
    assert b'globalThis["mermaid"]' in served.read_bytes()
    with_diagrams = {page: refs for page, refs in pages(site).items() if refs.mermaid}
    assert with_diagrams, "no page has a diagram"
    for page, refs in with_diagrams.items():
        loaded = [(page.parent / s).resolve() for s in refs.scripts if not external(s)]
        assert served.resolve() in loaded, page
        for text in refs.mermaid:
            # what mermaid reads: entities left in the text would show as `&lt;stack&gt;`
            assert "&lt;" not in text and "&gt;" not in text and "&amp;" not in text, (page, text[:80])


@pytest.mark.slow
def test_runbook_index_shows_no_template(site: Path) -> None:
    text = html.unescape((site / "runbooks" / "index.html").read_text())
    assert "GPU <gpu> on <node> is at <value> C" in re.sub(r"</?code>", "", text)
    assert "{{" not in text


def _tarball(member: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_fetch_writes_the_file_only_for_the_locked_tarball(tmp_path: Path) -> None:
    tarball = _tarball(fetch_mermaid.MEMBER, b"globalThis.mermaid = 1;")
    dest = tmp_path / "mermaid.min.js"
    with pytest.raises(SystemExit, match="integrity .* differs from package-lock.json"):
        fetch_mermaid.extract(tarball, fetch_mermaid.integrity_of(b"another tarball"), dest)
    assert not dest.exists()
    fetch_mermaid.extract(tarball, fetch_mermaid.integrity_of(tarball), dest)
    assert dest.read_bytes() == b"globalThis.mermaid = 1;"


def test_the_lock_pins_one_mermaid_with_integrity() -> None:
    lock = json.loads((REPO / "site-tools" / "package-lock.json").read_text())
    version, integrity = fetch_mermaid.pinned()
    assert lock["packages"][""]["dependencies"]["mermaid"] == version  # package.json pins it exactly
    assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==", integrity)
