"""The docs site's generated pages are what the code generates (``aiplat docs --check``), and each one says
what its source says: every command, every exit code, every policy rule, every alert."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from infra.cli import docs
from infra.cli.common import EXIT_CODES
from infra.cli.main import COMMANDS, main, parser
from infra.core.instance_types import TABLE

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"


def test_generated_pages_are_current() -> None:
    assert docs.stale_pages(DOCS, parser()) == [], "stale: run `.venv/bin/aiplat docs --write`"


def test_check_names_a_stale_page_and_write_fixes_it(tmp_path: Path, capsys) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "reference" / "cli.md"
    page.write_text(page.read_text().replace("--stacks-dir", "--stack-dir"))
    assert main(["docs", "--check", "--docs-dir", str(tmp_path / "docs")]) == 1
    assert f"{page} is stale; fix: run `aiplat docs --write`" in capsys.readouterr().err
    assert main(["docs", "--write", "--docs-dir", str(tmp_path / "docs")]) == 0
    assert main(["docs", "--check", "--docs-dir", str(tmp_path / "docs")]) == 0


def test_cli_page_has_every_command_and_its_flags() -> None:
    page = docs.cli_reference(parser())
    commands = docs._subcommands(parser())
    assert len(commands) == len(COMMANDS)
    for sub in docs._walk(parser()):
        assert f"## {sub.prog}\n" in page
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, (sub.prog, flag)
    assert "## aiplat train render\n" in page  # nested sub-commands too


def test_exit_code_page_has_every_code() -> None:
    page = docs.exit_codes_reference()
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in page


def test_instance_type_page_has_every_row_of_the_table() -> None:
    page = docs.instance_types_reference()
    for row in TABLE.values():
        assert f"| {row.name} | {row.gpus} | {row.gpu_model} |" in page
        assert f"| {row.efa_interfaces} |" in page
    assert "[479 GB/s at 8 GiB](https://github.com/aws-samples/" in page  # p5.48xlarge's published figure


def test_runbook_index_links_every_alert() -> None:
    page = docs.runbook_index()
    for path in (REPO / "infra" / "monitoring" / "rules").glob("*.yaml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert f"| [{rule['alert']}]({rule['alert']}.md) | {rule['labels']['severity']} |" in page


def test_runbook_index_shows_summaries_without_templates() -> None:
    """Alertmanager's template fields become `<label>` placeholders (code spans: a bare <node> is HTML)."""
    page = docs.runbook_index()
    assert "{{" not in page
    assert "| GPU `<gpu>` on `<node>` is at `<value>` C |" in page
    assert docs.alert_summary("{{ $value | humanizePercentage }} of {{$labels.namespace}}") == (
        "`<value>` of `<namespace>`"
    )
    with pytest.raises(ValueError, match="a template field other than"):
        docs.alert_summary("{{ range $alerts }}x{{ end }}")
