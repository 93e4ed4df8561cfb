"""The cost model: hourly and monthly estimates per node pool and per stack, from a price table kept as data
(``infra/model/data/prices.yaml``, loaded by ``infra/io/prices.py``). Pure.

``estimate_stack(stack, cfg, prices, usage)`` is the one entry point; ``aiplat cost`` prints it and a policy
can cap ``StackCost.monthly()`` per stack. A price the table does not have is *unknown*: amounts carry the
names of what they could not price (``Money.unknown``) instead of guessing.

What is estimated: every node pool at min/desired/max as configured and as if bought On-Demand, Spot or
as a Capacity Block; every Karpenter GPU pool at min/desired/max GPUs on its candidate types (the
NodePool's types: ``gpu_offer`` on the region's facts; see ``KarpenterPoolCost``); the EKS control plane
(standard or extended support on the given date); NAT gateways and their data processing; interface
endpoints (one network interface per endpoint per zone); load balancers (hours only); CloudTrail data
events; cross-region replication of the artifacts; the FSx for Lustre file system's provisioned storage
(GB-month at its deployment type and throughput tier). Not estimated:
EBS volumes, S3 and ECR storage and requests, CloudWatch Logs, KMS, load balancer capacity units, data
transfer out to the internet, interface endpoint data processing.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from infra.model.config.base import Role, Strict
from infra.model.config.compute import CapacityType
from infra.model.config.network import NatStrategy
from infra.model.config.schema import PlatformConfig
from infra.model.config.services import CapacityKind
from infra.model.eks import CALENDAR, in_standard_support
from infra.model.facts import RegionFacts
from infra.model.gpu_offers import gpu_offer
from infra.model.trainjobs import quantity_mib

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


class PriceTable(Strict):
    """``prices.yaml``: every price with its source; the sources with their dates."""

    read: str
    hours_per_month: Annotated[float, Field(gt=0)]
    sources: dict[str, Source]
    instances: dict[str, dict[str, InstanceEntry]]
    global_: dict[str, PriceEntry] = Field(alias="global")
    regional: dict[str, dict[str, PriceEntry]]
    transfer_gb: dict[str, dict[str, PriceEntry]]

    @model_validator(mode="after")
    def _sources_known(self) -> PriceTable:
        used = [e.source for e in self.global_.values()]
        used += [e.source for r in self.regional.values() for e in r.values()]
        used += [e.source for r in self.transfer_gb.values() for e in r.values()]
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


KARPENTER_OPTION = {CapacityKind.on_demand: Option.on_demand, CapacityKind.spot: Option.spot}


@dataclass(frozen=True)
class Candidate:
    """One instance type a Karpenter pool may launch, its GPUs, vCPUs and memory, and its price per
    node-hour per option."""

    instance_type: str
    gpus: int
    prices: Mapping[Option, Price]
    vcpus: int = 0
    memory_mib: int = 0


@dataclass(frozen=True)
class PodRequests:
    """What one replica asks of its node besides the GPU: CPU in millicores, memory in MiB."""

    cpu_m: int
    memory_mib: int

    def fit(self, c: Candidate) -> bool:
        """Whether the type's capacity holds the requests (necessary, not sufficient: the kubelet reserves
        some and the DaemonSets take theirs, so a type just above them may still be too small)."""
        return c.vcpus * 1000 >= self.cpu_m and c.memory_mib >= self.memory_mib


@dataclass(frozen=True)
class KarpenterPoolCost:
    """One Karpenter GPU pool. It has no node counts: Karpenter launches nodes for pending pods, choosing
    among ``candidates`` (the NodePool's instance types) and the allowed capacity types, up to ``gpu_limit``
    GPUs. So the sizes are GPU counts:

    - ``min`` and ``desired``: the GPUs that are always requested (one per replica of the inference
      Deployment at ``inference.replicas.min``, on an infer stack whose ``inference.node_pools`` lists the
      pool first among Karpenter pools; 0 otherwise), each replica on its own node of the cheapest
      candidate with a known price whose capacity holds the replica's CPU and memory requests (the pods
      spread over zones; Karpenter picks the cheapest type that fits,
      https://karpenter.sh/v1.14/concepts/scheduling/). Nothing better says what ``desired`` is (the HPA
      follows load), so it equals ``min``.
    - ``max``: ``gpu_limit`` GPUs at the highest price per GPU among the candidates with a known price.

    Prices are those of the allowed capacity types (``capacity_types``): with both, the cheapest of the
    On-Demand and Spot prices at min/desired (Karpenter prefers Spot) and the dearest at max (it falls back
    to On-Demand when Spot has no capacity). Candidates without a price are never guessed: at max they make
    the amount carry an unknown (an unpriced type may cost more per GPU); at min the note says the estimate
    compares only the priced ones.
    """

    pool: str
    capacity_types: tuple[CapacityKind, ...]
    gpus: Mapping[str, int]  # min / desired / max
    candidates: tuple[Candidate, ...]
    region: str
    # the replica's requests: min/desired only consider types that can hold one (None: any type)
    pod: PodRequests | None = None

    @property
    def label(self) -> str:
        return f"karpenter.{self.pool}"

    def options(self, option: Option | None = None) -> tuple[Option, ...]:
        """The options priced: the pool's capacity types, or only ``option`` when it is one of On-Demand and
        Spot (Karpenter NodePools here buy no Capacity Blocks: that option leaves the pool as configured)."""
        if option in (Option.on_demand, Option.spot):
            return (option,)
        return tuple(KARPENTER_OPTION[k] for k in self.capacity_types)

    def _priced(self, options: tuple[Option, ...]) -> list[tuple[Candidate, Price]]:
        return [(c, c.prices[o]) for c in self.candidates for o in options if c.prices[o].known]

    def _unpriced(self, options: tuple[Option, ...]) -> list[str]:
        return [c.instance_type for c in self.candidates if not any(c.prices[o].known for o in options)]

    def _what(self, options: tuple[Option, ...]) -> str:
        return f"{' or '.join(o.value.replace('_', '-') for o in options)}, {self.region}"

    def cheapest(self, option: Option | None = None) -> tuple[Candidate, Price] | None:
        """The candidate with the lowest known price per node-hour that holds a replica's requests (ties:
        the first by name)."""
        pod = self.pod
        priced = [cp for cp in self._priced(self.options(option)) if pod is None or pod.fit(cp[0])]
        return min(priced, key=lambda cp: (cp[1].usd, cp[0].instance_type)) if priced else None

    def dearest_per_gpu(self, option: Option | None = None) -> tuple[Candidate, Price] | None:
        """The candidate with the highest known price per GPU-hour (ties: the first by name)."""
        priced = self._priced(self.options(option))
        return (
            min(priced, key=lambda cp: (-(cp[1].usd or 0) / cp[0].gpus, cp[0].instance_type))
            if priced
            else None
        )

    def hourly(self, size: str = "desired", option: Option | None = None) -> Money:
        gpus = self.gpus[size]
        if gpus == 0:
            return Money()
        options = self.options(option)
        if not self.candidates:
            return Money(0.0, (f"{self.label}: no candidate instance types known ({self.region})",))
        unpriced = self._unpriced(options)
        none_priced = Money(
            0.0, (f"{self.label}: none of its {len(self.candidates)} types priced ({self._what(options)})",)
        )
        if size == "max":
            pick = self.dearest_per_gpu(option)
            if pick is None:
                return none_priced
            candidate, price = pick
            amount = Money(gpus * (price.usd or 0.0) / candidate.gpus)
            if unpriced:
                amount = amount + Money(
                    0.0,
                    (
                        f"{self.label}: {len(unpriced)} of {len(self.candidates)} types unpriced "
                        f"({self._what(options)})",
                    ),
                )
            return amount
        pick = self.cheapest(option)
        if pick is None:
            return none_priced
        candidate, price = pick
        return Money(math.ceil(gpus / candidate.gpus) * (price.usd or 0.0))

    def prices(self) -> list[Price]:
        """The prices the estimate used (the cheapest and the dearest per GPU of each option)."""
        out: list[Price] = []
        for option in self.options():
            for pick in (self.cheapest(option), self.dearest_per_gpu(option)):
                if pick is not None:
                    out.append(pick[1])
        return out

    def notes(self) -> list[str]:
        unpriced = self._unpriced(self.options())
        if not unpriced:
            return []
        return [
            f"{self.label}: no price for {', '.join(unpriced)} ({self._what(self.options())}); min/desired "
            "use the cheapest priced type, max the dearest priced per GPU (an unpriced type may cost more: "
            "'+?')"
        ]


def cpu_millicores(quantity: str) -> int:
    """``3`` -> 3000, ``2.5`` -> 2500, ``500m`` -> 500 (the CPU quantities the inference section takes)."""
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return round(float(quantity) * 1000)


def pod_requests(cfg: PlatformConfig) -> PodRequests | None:
    """The inference replica's CPU and memory requests (None without an inference section)."""
    if cfg.inference is None:
        return None
    r = cfg.inference.resources
    return PodRequests(cpu_millicores(r.cpu), quantity_mib(r.memory))


def karpenter_gpus(cfg: PlatformConfig, pool: str) -> int:
    """GPUs the pool always carries: the inference Deployment's minimum replicas (one GPU each) when the
    pool is the first Karpenter pool in ``inference.node_pools``; else 0 (nodes come and go with jobs)."""
    if cfg.inference is None:
        return 0
    karpenter = cfg.cluster_services.karpenter.node_pools
    first = next((p for p in cfg.inference.node_pools if p in karpenter), None)
    return cfg.inference.replicas.min if first == pool else 0


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
    karpenter: tuple[KarpenterPoolCost, ...] = field(default=())

    def fixed_hourly(self) -> Money:
        return total(i.hourly(self.hours_per_month) for i in self.items)

    def hourly(self, size: str = "desired", option: Option | None = None) -> Money:
        """The stack per hour at ``size``: pools as configured (or all bought as ``option``) plus the rest."""
        return (
            total(p.hourly(size, option) for p in self.pools)
            + total(k.hourly(size, option) for k in self.karpenter)
            + self.fixed_hourly()
        )

    def monthly(self, size: str = "desired", option: Option | None = None) -> Money:
        return self.hourly(size, option).times(self.hours_per_month)

    def prices(self) -> list[Price]:
        """Every price the estimate looked up, once each."""
        seen: dict[str, Price] = {}
        for p in self.pools:
            for price in p.prices.values():
                seen.setdefault(price.label, price)
        for k in self.karpenter:
            for price in k.prices():
                seen.setdefault(price.label, price)
        for i in self.items:
            seen.setdefault(i.price.label, i.price)
        return list(seen.values())


def eks_support(cfg: PlatformConfig, on: dt.date) -> tuple[str, str]:
    """('standard' | 'extended' | 'unknown', why) for the cluster's Kubernetes version on ``on``, from the
    EKS version calendar the rules and the policy pack use (``infra.model.eks``)."""
    version = cfg.cluster.kubernetes_version
    entry = CALENDAR.get(version)
    if entry is None:
        return "unknown", f"no standard-support end date for Kubernetes {version} in infra/model/eks.py"
    end = entry.standard_until.isoformat()
    if in_standard_support(version, on):
        return "standard", f"Kubernetes {version} is in standard support until {end}"
    return "extended", f"Kubernetes {version} left standard support on {end}"


def nat_gateways(cfg: PlatformConfig) -> int:
    return {NatStrategy.none: 0, NatStrategy.single: 1, NatStrategy.one_per_az: cfg.network.az_count}[
        cfg.network.nat
    ]


def estimate_karpenter(
    cfg: PlatformConfig, look: Lookup, facts: RegionFacts | None
) -> tuple[KarpenterPoolCost, ...]:
    """Each Karpenter pool with its candidate types (none when ``facts`` is None) and their prices."""
    out = []
    for name, pool in sorted(cfg.cluster_services.karpenter.node_pools.items()):
        types = gpu_offer(cfg, facts, pool).instance_types if facts is not None else ()
        candidates = tuple(
            Candidate(
                t,
                facts.instances[t].gpu_count,
                {o: look.instance(t, o) for o in (Option.on_demand, Option.spot)},
                vcpus=facts.instances[t].vcpus,
                memory_mib=facts.instances[t].memory_mib,
            )
            for t in types
            if facts is not None
        )
        gpus = karpenter_gpus(cfg, name)
        out.append(
            KarpenterPoolCost(
                pool=name,
                capacity_types=tuple(pool.capacity_types),
                gpus={"min": gpus, "desired": gpus, "max": pool.gpu_limit},
                candidates=candidates,
                region=cfg.region,
                pod=pod_requests(cfg) if gpus else None,
            )
        )
    return tuple(out)


def estimate_stack(
    stack: str, cfg: PlatformConfig, table: PriceTable, usage: Usage, facts: RegionFacts | None = None
) -> StackCost:
    """The estimate of one stack (see the module docstring for what it covers). ``facts``: the region's
    facts that name the Karpenter pools' candidate types (``gpu_offer``); without them those pools are
    unknown amounts."""
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
    support, why = eks_support(cfg, usage.on)
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
    fsx = cfg.cluster_services.fsx
    if fsx.enabled:
        # FSx for Lustre bills provisioned storage per GB-month, the rate set by the throughput tier.
        tier = f"{fsx.deployment_type.value} {fsx.per_unit_storage_throughput} MB/s/TiB"
        items.append(
            LineItem(
                f"FSx for Lustre ({fsx.storage_capacity_gib} GiB, {tier})",
                fsx.storage_capacity_gib,
                look.regional(
                    f"fsx_lustre_{fsx.deployment_type.value.lower()}_{fsx.per_unit_storage_throughput}_gb_month",
                    f"FSx for Lustre {tier}",
                    "GB-month",
                ),
                per_month=True,
            )
        )
    karpenter = estimate_karpenter(cfg, look, facts)
    notes = [f"EKS: {why}"]
    for k in karpenter:
        notes += k.notes()
    if cfg.storage.replicate_to and not usage.artifact_gb_per_month:
        notes.append("replication priced at 0 GB/month: pass the artifact volume to price it")
    if nats and not usage.nat_gb_per_month:
        notes.append("NAT data processing priced at 0 GB/month: pass the volume to price it")
    return StackCost(
        stack, cfg.region, table.hours_per_month, pools, tuple(items), tuple(notes), karpenter=karpenter
    )
