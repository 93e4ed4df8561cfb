"""Load the price table (``infra/model/data/prices.yaml``, package data) for ``aiplat cost``."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

from infra.model.config.parse import parse_model
from infra.model.cost import PriceTable

PRICES = ("infra.model.data", "prices.yaml")


@cache
def load_price_table() -> PriceTable:
    """The validated price table shipped with the package (every price with its source)."""
    package, name = PRICES
    raw = yaml.safe_load(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    return parse_model(raw, PriceTable, "prices.yaml")
