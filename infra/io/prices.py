"""Load and write the price table (``infra/cost/data/prices.yaml``, package data) for ``aiplat cost``."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from infra.cost.estimate import PriceTable
from infra.schema.parse import parse_model

PRICES = ("infra.cost.data", "prices.yaml")


def price_table_path() -> Path:
    """The shipped table's file (in this checkout, or the installed package)."""
    package, name = PRICES
    return Path(str(resources.files(package).joinpath(name)))


@cache
def load_price_table() -> PriceTable:
    """The validated price table shipped with the package (every price with its source)."""
    package, name = PRICES
    raw = yaml.safe_load(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    return parse_model(raw, PriceTable, "prices.yaml")


def write_price_table(table: PriceTable, path: Path) -> None:
    """Write ``table`` to ``path`` as YAML, keeping the comment block at the top of the file it replaces
    (what the table is and how it is kept); defaults (empty notes, no date) are left out."""
    header = ""
    if path.exists():
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        header = "".join(line for line in _leading_comments(lines))
    data = table.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    body = yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(header + ("\n" if header else "") + body, encoding="utf-8")
    tmp.replace(path)


def _leading_comments(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if not line.startswith("#") and line.strip():
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out
