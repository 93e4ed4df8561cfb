"""MkDocs hook (mkdocs.yml ``hooks``): the pinned mermaid joins the site's files at build time.

mkdocs.yml lists ``assets/javascripts/mermaid.min.js`` in ``extra_javascript``; this hook adds that file
from where ``fetch_mermaid.py`` installed it (``<sys.prefix>/share/aiplat-docs/``), so it is not committed
and ``mkdocs build`` and ``mkdocs serve`` both serve it. A build without it stops with the fix.
https://www.mkdocs.org/user-guide/configuration/#hooks ;
https://www.mkdocs.org/dev-guide/api/#mkdocs.structure.files.File.generated
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_mermaid  # noqa: E402  (beside this file, not a package)

MERMAID_URI = "assets/javascripts/mermaid.min.js"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    if MERMAID_URI not in config.extra_javascript:
        raise PluginError(f"mkdocs.yml: extra_javascript must list {MERMAID_URI} (the bundled mermaid)")
    version, _ = fetch_mermaid.pinned()
    source = fetch_mermaid.target(version)
    if not source.is_file():
        raise PluginError(
            f"mermaid {version} for the diagrams is not installed ({source} missing); "
            "fix: run `make docs` (or .venv/bin/python site-tools/fetch_mermaid.py)"
        )
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(source)))
    return files
