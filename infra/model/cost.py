"""The cost model: hourly and monthly estimates per node pool and per stack, from a price table kept as data
(``infra/model/data/prices.yaml``, loaded by ``infra/io/prices.py``). Pure.

``estimate_stack(stack, cfg, prices, usage)`` is the one entry point; ``aiplat cost`` prints it and a policy
can cap ``StackCost.monthly()`` per stack. A price the table does not have is *unknown*: amounts carry the
names of what they could not price (``Money.unknown``) instead of guessing.

What is estimated: every node pool at min/desired/max as configured and as if bought On-Demand, Spot or
as a Capacity Block; the EKS control plane (standard or extended support on the given date); NAT gateways
and their data processing; interface endpoints (one network interface per endpoint per zone); load
balancers (hours only); CloudTrail data events; cross-region replication of the artifacts. Not estimated:
EBS volumes, S3 and ECR storage and requests, CloudWatch Logs, KMS, load balancer capacity units, data
transfer out to the internet, interface endpoint data processing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from infra.model.config.base import Role, Strict
from infra.model.config.compute import CapacityType
from infra.model.config.network import NatStrategy
from infra.model.config.schema import PlatformConfig

# ---------------------------------------------------------------------------------------------------------
# The price table (the schema of prices.yaml)


class Source(Strict):
    """Where prices come from: what it is, its address, when it was published (None: undated)."""

    what: str
    url: str
    published: str | None = None
    note: str = ""


class PriceEntry(Strict):
    """One price in USD, or ``usd: null`` when no source had it (the note says why)."""

    usd: Annotated[float, Field(ge=0)] | None
    source: str
    note: str = ""


class SpotEntry(Strict):
    """Spot prices per zone ID; the estimate uses the highest."""

    zones: dict[str, Annotated[float, Field(ge=0)]] = Field(min_length=1)
    source: str
    note: str = ""


class InstanceEntry(Strict):
    on_demand: PriceEntry
    spot: SpotEntry | None = None
    capacity_block: PriceEntry | None = None


class SupportEnd(Strict):
    date: dt.date
    source: str


class PriceTable(Strict):
    """``prices.yaml``: every price with its source; the sources with their dates."""

    read: str
    hours_per_month: Annotated[float, Field(gt=0)]
    sources: dict[str, Source]
    instances: dict[str, dict[str, InstanceEntry]]
    global_: dict[str, PriceEntry] = Field(alias="global")
    regional: dict[str, dict[str, PriceEntry]]
    transfer_gb: dict[str, dict[str, PriceEntry]]
    eks_standard_support_ends: dict[str, SupportEnd]

    @model_validator(mode="after")
    def _sources_known(self) -> PriceTable:
        used = [e.source for e in self.global_.values()]
        used += [e.source for r in self.regional.values() for e in r.values()]
        used += [e.source for r in self.transfer_gb.values() for e in r.values()]
        used += [e.source for e in self.eks_standard_support_ends.values()]
        for region in self.instances.values():
            for entry in region.values():
                used += [p.source for p in (entry.on_demand, entry.spot, entry.capacity_block) if p]
        unknown = sorted(set(used) - set(self.sources))
        if unknown:
            raise ValueError(f"prices name sources {unknown} that are not under 'sources'; add them")
        return self


# ---------------------------------------------------------------------------------------------------------
# Looked-up prices and amounts


class Option(StrEnum):
    """How a pool's nodes are bought."""

    on_demand = "on_demand"
    spot = "spot"
    capacity_block = "capacity_block"


CONFIGURED_OPTION = {
    CapacityType.on_demand: Option.on_demand,
    CapacityType.spot: Option.spot,
    # An ODCR bills its instances at the On-Demand rate.
    CapacityType.capacity_reservation: Option.on_demand,
    CapacityType.capacity_block: Option.capacity_block,
}


@dataclass(frozen=True)
class Price:
    """A looked-up price: what it is (``label``), per what (``unit``), USD or None (unknown), its source."""

    label: str
    unit: str
    usd: float | None
    source: str = "none"
    note: str = ""

    @property
    def known(self) -> bool:
        return self.usd is not None


@dataclass(frozen=True)
class Money:
    """USD of what could be priced, and the labels of what could not."""

    usd: float = 0.0
    unknown: tuple[str, ...] = ()

    def __add__(self, other: Money) -> Money:
        return Money(self.usd + other.usd, tuple(dict.fromkeys(self.unknown + other.unknown)))

    def times(self, k: float) -> Money:
        return Money(self.usd * k, self.unknown)

    @property
    def complete(self) -> bool:
        return not self.unknown

    @staticmethod
    def of(quantity: float, price: Price) -> Money:
        """``quantity`` x ``price``; zero of an unknown price is a known zero."""
        if quantity == 0:
            return Money()
        if price.usd is None:
            return Money(0.0, (price.label,))
        return Money(quantity * price.usd)


def total(amounts: Iterable[Money]) -> Money:
    out = Money()
    for a in amounts:
        out = out + a
    return out


class Lookup:
    """Prices for one region out of the table, each labelled; missing entries are unknown prices."""

    def __init__(self, table: PriceTable, region: str) -> None:
        self.table, self.region = table, region

    def _price(self, label: str, unit: str, entry: PriceEntry | None) -> Price:
        if entry is None:
            return Price(label, unit, None, "none", "not in the price table")
        return Price(label, unit, entry.usd, entry.source, entry.note)

    def instance(self, instance_type: str, option: Option) -> Price:
        label = f"{instance_type} {option.value.replace('_', ' ')}, {self.region}"
        entry = self.table.instances.get(self.region, {}).get(instance_type)
        if option is Option.on_demand:
            return self._price(label, "node-hour", entry.on_demand if entry else None)
        if option is Option.capacity_block:
            return self._price(label, "node-hour", entry.capacity_block if entry else None)
        spot = entry.spot if entry else None
        if spot is None:
            return Price(label, "node-hour", None, "none", "not in the price table")
        zone, usd = max(spot.zones.items(), key=lambda kv: kv[1])
        note = f"highest of {len(spot.zones)} zones ({zone})" + (f"; {spot.note}" if spot.note else "")
        return Price(label, "node-hour", usd, spot.source, note)

    def regional(self, item: str, label: str, unit: str) -> Price:
        return self._price(
            f"{label}, {self.region}", unit, self.table.regional.get(self.region, {}).get(item)
        )

    def global_(self, item: str, label: str, unit: str) -> Price:
        return self._price(label, unit, self.table.global_.get(item))

    def transfer(self, destination: str) -> Price:
        entry = self.table.transfer_gb.get(self.region, {}).get(destination)
        return self._price(f"data transfer {self.region} -> {destination}", "GB", entry)


# ---------------------------------------------------------------------------------------------------------
# The estimate

SIZES = ("min", "desired", "max")


@dataclass(frozen=True)
class Usage:
    """What the estimate cannot read from the config. ``load_balancers`` None: one per infer stack (the
    inference endpoint), none on train stacks."""

    on: dt.date
    artifact_gb_per_month: float = 0.0
    nat_gb_per_month: float = 0.0
    load_balancers: int | None = None
    cloudtrail_data_events_per_month: float = 0.0


@dataclass(frozen=True)
class PoolCost:
    """One node pool: its node counts, the price per node-hour of each way to buy it."""

    pool: str
    instance_type: str
    capacity_type: CapacityType
    nodes: Mapping[str, int]  # min / desired / max
    prices: Mapping[Option, Price]

    @property
    def configured(self) -> Option:
        return CONFIGURED_OPTION[self.capacity_type]

    def billed_nodes(self, size: str, option: Option) -> int:
        """Nodes billed at ``size``: a Capacity Block, and the configured ODCR, bill every reserved
        instance (``max_size``) whether it runs or not."""
        reserved = option is Option.capacity_block or (
            option is self.configured and self.capacity_type is CapacityType.capacity_reservation
        )
        return self.nodes["max"] if reserved else self.nodes[size]

    def hourly(self, size: str = "desired", option: Option | None = None) -> Money:
        option = option or self.configured
        return Money.of(self.billed_nodes(size, option), self.prices[option])


@dataclass(frozen=True)
class LineItem:
    """A cost beside the pools: ``quantity`` x ``price``. Hourly items (per hour) are also shown per month,
    monthly items (GB or events per month) also per hour."""

    name: str
    quantity: float
    price: Price
    per_month: bool = False  # the quantity is per month (GB, events), not per hour
    scale: float = 1.0  # the price's unit per quantity unit (events per 100,000)

    def monthly(self, hours_per_month: float) -> Money:
        amount = Money.of(self.quantity / self.scale, self.price)
        return amount if self.per_month else amount.times(hours_per_month)

    def hourly(self, hours_per_month: float) -> Money:
        return self.monthly(hours_per_month).times(1 / hours_per_month)


@dataclass(frozen=True)
class StackCost:
    stack: str
    region: str
    hours_per_month: float
    pools: tuple[PoolCost, ...]
    items: tuple[LineItem, ...]
    notes: tuple[str, ...] = field(default=())

    def fixed_hourly(self) -> Money:
        return total(i.hourly(self.hours_per_month) for i in self.items)

    def hourly(self, size: str = "desired", option: Option | None = None) -> Money:
        """The stack per hour at ``size``: pools as configured (or all bought as ``option``) plus the rest."""
        return total(p.hourly(size, option) for p in self.pools) + self.fixed_hourly()

    def monthly(self, size: str = "desired", option: Option | None = None) -> Money:
        return self.hourly(size, option).times(self.hours_per_month)

    def prices(self) -> list[Price]:
        """Every price the estimate looked up, once each."""
        seen: dict[str, Price] = {}
        for p in self.pools:
            for price in p.prices.values():
                seen.setdefault(price.label, price)
        for i in self.items:
            seen.setdefault(i.price.label, i.price)
        return list(seen.values())


def eks_support(cfg: PlatformConfig, table: PriceTable, on: dt.date) -> tuple[str, str]:
    """('standard' | 'extended' | 'unknown', why) for the cluster's Kubernetes version on ``on``."""
    version = cfg.cluster.kubernetes_version
    end = table.eks_standard_support_ends.get(version)
    if end is None:
        return "unknown", f"no standard-support end date for Kubernetes {version} in the price table"
    if on >= end.date:
        return "extended", f"Kubernetes {version} left standard support on {end.date.isoformat()}"
    return "standard", f"Kubernetes {version} is in standard support until {end.date.isoformat()}"


def nat_gateways(cfg: PlatformConfig) -> int:
    return {NatStrategy.none: 0, NatStrategy.single: 1, NatStrategy.one_per_az: cfg.network.az_count}[
        cfg.network.nat
    ]


def estimate_stack(stack: str, cfg: PlatformConfig, table: PriceTable, usage: Usage) -> StackCost:
    """The estimate of one stack (see the module docstring for what it covers)."""
    look = Lookup(table, cfg.region)
    pools = tuple(
        PoolCost(
            pool=name,
            instance_type=pool.instance_type,
            capacity_type=pool.capacity_type,
            nodes={"min": pool.min_size, "desired": pool.desired_size, "max": pool.max_size},
            prices={o: look.instance(pool.instance_type, o) for o in Option},
        )
        for name, pool in sorted(cfg.node_pools.items())
    )
    support, why = eks_support(cfg, table, usage.on)
    eks_price = (
        look.global_(f"eks_cluster_hour_{support}", f"EKS cluster, {support} support", "cluster-hour")
        if support != "unknown"
        else Price("EKS cluster, support level unknown", "cluster-hour", None, "none", why)
    )
    items = [LineItem("EKS control plane", 1, eks_price)]
    nats = nat_gateways(cfg)
    if nats:
        items.append(LineItem("NAT gateways", nats, look.regional("nat_gateway_hour", "NAT gateway", "hour")))
        items.append(
            LineItem(
                "NAT data processing (GB/month)",
                usage.nat_gb_per_month,
                look.regional("nat_gateway_gb", "NAT gateway data processing", "GB"),
                per_month=True,
            )
        )
    services, zones = len(cfg.network.interface_endpoints), cfg.network.az_count
    endpoints = services * zones
    if endpoints:
        items.append(
            LineItem(
                f"interface endpoints ({services} services x {zones} zones)",
                endpoints,
                look.regional("interface_endpoint_az_hour", "interface endpoint", "endpoint-zone-hour"),
            )
        )
    lbs = usage.load_balancers if usage.load_balancers is not None else int(cfg.role is Role.infer)
    if lbs:
        items.append(
            LineItem(
                "application load balancers",
                lbs,
                look.regional("alb_hour", "application load balancer", "hour"),
            )
        )
    if usage.cloudtrail_data_events_per_month:
        items.append(
            LineItem(
                "CloudTrail data events (per month)",
                usage.cloudtrail_data_events_per_month,
                look.global_("cloudtrail_data_events_per_100k", "CloudTrail data events", "100,000 events"),
                per_month=True,
                scale=100_000,
            )
        )
    for destination in cfg.storage.replicate_to:
        items.append(
            LineItem(
                f"artifact replication to {destination} (GB/month)",
                usage.artifact_gb_per_month,
                look.transfer(destination),
                per_month=True,
            )
        )
    notes = [f"EKS: {why}"]
    if cfg.storage.replicate_to and not usage.artifact_gb_per_month:
        notes.append("replication priced at 0 GB/month: pass the artifact volume to price it")
    if nats and not usage.nat_gb_per_month:
        notes.append("NAT data processing priced at 0 GB/month: pass the volume to price it")
    return StackCost(stack, cfg.region, table.hours_per_month, pools, tuple(items), tuple(notes))
