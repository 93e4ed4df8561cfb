"""``aiplat prices refresh``: the price table's instance prices from AWS's own APIs (read-only).

- On-Demand and Capacity Block prices: the AWS Price List API, ``pricing:GetProducts`` on its us-east-1
  endpoint, service ``AmazonEC2``, one product per region and instance type: Linux, shared tenancy, no
  pre-installed software, ``capacitystatus`` Used, ``marketoption`` OnDemand (the filters Karpenter's
  pricing updater uses) or CapacityBlock (recorded only where the API lists such a product).
  https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html
- Spot prices: EC2 ``DescribeSpotPriceHistory`` in the region for ``Linux/UNIX (Amazon VPC)``, the latest
  price per zone, recorded per zone ID (the account's mapping from ``DescribeAvailabilityZones``).
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html

Every price written names its API source and the day it was read; what the APIs do not list keeps the
table's entry as it was.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from infra.cost.estimate import InstanceEntry, PriceEntry, PriceTable, Source, SpotEntry

# The Price List API answers from these endpoints only; us-east-1 serves every region's prices.
# https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html
PRICING_REGION = "us-east-1"
PRICE_LIST = "aws-price-list"
SPOT_HISTORY = "aws-spot-price-history"
SPOT_PRODUCT = "Linux/UNIX (Amazon VPC)"

API_SOURCES = {
    PRICE_LIST: Source(
        what="AWS Price List API, pricing:GetProducts (us-east-1 endpoint), AmazonEC2: Linux, shared "
        "tenancy, no pre-installed software, capacitystatus Used, marketoption OnDemand or CapacityBlock",
        url="https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html",
        kind="aws-api",
    ),
    SPOT_HISTORY: Source(
        what="EC2 DescribeSpotPriceHistory, Linux/UNIX (Amazon VPC), the latest price per zone ID",
        url="https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html",
        kind="aws-api",
    ),
}


def _term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


def product_filters(region: str, instance_type: str, market: str) -> list[dict[str, str]]:
    """GetProducts filters for one Linux, shared-tenancy instance price (``market``: OnDemand or
    CapacityBlock)."""
    return [
        _term("regionCode", region),
        _term("instanceType", instance_type),
        _term("operatingSystem", "Linux"),
        _term("tenancy", "Shared"),
        _term("preInstalledSw", "NA"),
        _term("capacitystatus", "Used"),
        _term("marketoption", market),
    ]


def hourly_usd(price_list: Iterable[str]) -> list[float]:
    """The distinct non-zero USD prices per hour in GetProducts' ``PriceList`` (JSON documents)."""
    found: set[float] = set()
    for doc in price_list:
        product = json.loads(doc)
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD") or 0)
                if usd > 0 and str(dim.get("unit", "Hrs")).lower().startswith("hr"):
                    found.add(usd)
    return sorted(found)


def read_product_price(pricing: Any, region: str, instance_type: str, market: str) -> float | None:
    """One price per hour from the Price List, or None when it lists no such product. Several distinct
    prices for one filter set mean the filters are not specific enough: refused, not guessed."""
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=product_filters(region, instance_type, market)
    )
    prices = hourly_usd(doc for page in pages for doc in page["PriceList"])
    if len(prices) > 1:
        raise ValueError(f"{instance_type} {market} in {region}: the Price List has several prices {prices}")
    return prices[0] if prices else None


def read_spot_prices(ec2: Any, instance_type: str, now: dt.datetime) -> dict[str, float]:
    """The latest Spot price per zone ID of ``instance_type`` in ``ec2``'s region."""
    ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=[instance_type], ProductDescriptions=[SPOT_PRODUCT], StartTime=now
    )
    latest: dict[str, tuple[Any, float]] = {}
    for page in pages:
        for p in page["SpotPriceHistory"]:
            zone = p.get("AvailabilityZoneId") or ids.get(p["AvailabilityZone"], p["AvailabilityZone"])
            if zone not in latest or p["Timestamp"] > latest[zone][0]:
                latest[zone] = (p["Timestamp"], float(p["SpotPrice"]))
    return {zone: usd for zone, (_, usd) in sorted(latest.items())}


def refresh_instances(
    table: PriceTable,
    wanted: Mapping[str, Iterable[str]],
    clients: Callable[[str, str], Any],
    *,
    now: dt.datetime | None = None,
) -> PriceTable:
    """``table`` with the instance prices of ``wanted`` (region -> instance types) read from the APIs.

    A price the APIs list replaces the entry's, with its API source and today's date; one they do not list
    (no Capacity Block product, no Spot history) leaves the entry as it was."""
    now = now or dt.datetime.now(dt.UTC)
    day = now.date().isoformat()
    pricing = clients("pricing", PRICING_REGION)
    instances = {r: dict(ts) for r, ts in table.instances.items()}
    for region, types in sorted(wanted.items()):
        ec2 = clients("ec2", region)
        for itype in sorted(set(types)):
            old = instances.setdefault(region, {}).get(itype)
            on_demand = read_product_price(pricing, region, itype, "OnDemand")
            block = read_product_price(pricing, region, itype, "CapacityBlock")
            spot = read_spot_prices(ec2, itype, now)
            od_entry = (
                PriceEntry(usd=on_demand, source=PRICE_LIST, read=day)
                if on_demand is not None
                else old.on_demand
                if old
                else PriceEntry(usd=None, source="none", note=f"the Price List had no product on {day}")
            )
            instances[region][itype] = InstanceEntry(
                on_demand=od_entry,
                spot=SpotEntry(zones=spot, source=SPOT_HISTORY, read=day) if spot else old and old.spot,
                capacity_block=(
                    PriceEntry(usd=block, source=PRICE_LIST, read=day)
                    if block is not None
                    else old and old.capacity_block
                ),
            )
    return table.model_copy(
        update={"instances": instances, "sources": {**table.sources, **API_SOURCES}, "read": day}
    )
