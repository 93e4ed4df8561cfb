"""The rule reference of the docs site (``docs/reference/policies.md``), generated from the rules themselves
(``aiplat docs --write`` regenerates it; a test keeps it current)."""

from __future__ import annotations

import json


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """One table row per rule, grouped by module, then the config each rule takes."""
    from aiplat_policies.pack import rules

    rows = [
        "| rule | kind | severity | level | what it enforces, and why | unknown at preview | doc |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rules(), key=lambda r: (r.module, r.name)):
        rows.append(
            f"| `{r.name}` | {r.kind} | {r.severity.value} | {r.enforcement.value} | {_cell(r.description)} "
            f"| {_cell(r.unknowns)} | [link]({r.doc}) |"
        )
    config = ["", "### Config (`--policy-pack-config`, defaults)", ""]
    for r in rules():
        for key, schema in r.config.items():
            default = json.dumps(schema.get("default"), separators=(", ", ": "))
            config.append(f"- `{r.name}.{key}`: {_cell(schema.get('description', ''))} Default: `{default}`")
    return "\n".join([f"{len(rows) - 2} rules.", "", *rows, *config])
