"""Every config field is documented in the reference the schema generates (docs/reference/config.md,
kept current by tests/infra/cli/test_docs.py)."""

from __future__ import annotations

from pathlib import Path

from infra.cli.main import main
from infra.schema.reference import config_reference


def test_every_field_has_a_meaning() -> None:
    rows = [line for line in config_reference().splitlines() if line.startswith("| `")]
    undocumented = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("|  |")]
    assert rows and undocumented == []


def test_check_flags_a_stale_file(tmp_path: Path, capsys) -> None:
    stale = tmp_path / "config.md"
    stale.write_text(config_reference().replace("NAT gateways", "NAT"))
    assert main(["config-reference", "--check", str(stale)]) == 1
    assert "is stale; fix: run" in capsys.readouterr().err
    assert main(["config-reference", "--write", str(stale)]) == 0
    assert main(["config-reference", "--check", str(stale)]) == 0
