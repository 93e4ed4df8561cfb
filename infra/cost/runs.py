"""What jobs cost, from their run records (pure).

``pool_price`` is what the training runtime gives every pod in ``$AIPLAT_PRICE`` (``trainer/run/cost.py``):
the runtime's pool, its instance type, capacity type and the purchase option it is billed as
(``CONFIGURED_OPTION``: an ODCR at the On-Demand rate), the node's GPUs and the node-hour price looked up in
the same price table and the same way as ``aiplat cost`` estimates the stack (``Lookup.instance``: Spot at
the highest zone price of the region), with its source. A price the table lacks is ``null`` with the reason.
A run record's ``cost.usd`` is then GPU hours x node price / node GPUs (the job's share of the nodes it
held), written by the pod when the attempt ends.

``attempt_cost`` reads one attempt's records back and ``TeamCost`` sums a team's attempts by job and by pool
and purchase option (``aiplat cost --team``): the sums are of the records' own ``cost.usd``, so the CLI shows
the number each record holds; attempts without one (no end record, no price, a team's record without a
``cost``) are listed apart, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from infra.core.facts import RegionFacts
from infra.cost.estimate import CONFIGURED_OPTION, Lookup, Option, PriceTable

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


def pool_price(cfg: PlatformConfig, table: PriceTable, pool: str, facts: RegionFacts) -> dict[str, Any]:
    """The ``$AIPLAT_PRICE`` document of ``pool``'s nodes (see the module docstring)."""
    p = cfg.node_pools[pool]
    option = CONFIGURED_OPTION[p.capacity_type]
    price = Lookup(table, cfg.region).instance(p.instance_type, option)
    source = table.sources.get(price.source)
    return {
        "pool": pool,
        "instance_type": p.instance_type,
        "capacity_type": p.capacity_type.value,
        "purchase_option": option.value,
        "region": cfg.region,
        "node_gpus": p.gpus_per_node or facts.instances[p.instance_type].gpu_count,
        "usd_per_node_hour": price.usd,
        "source": price.source,
        "source_kind": source.kind.value if source else None,
        "source_url": source.url if source else None,
        "note": price.note,
        "prices_read": table.read,
    }


# Where a run's records are (trainer/run/runrecord.py): <attempt>.start.json and <attempt>.end.json; a team's
# own code may write one <attempt>.json at its end (docs/platform/job-contract.md).
START, END = ".start.json", ".end.json"
NO_END = "no end record: still running, or it crashed or was killed before writing one"
NO_COST = (
    "its end record has no cost (code that does not write one: docs/platform/job-contract.md, "
    "'What an attempt costs')"
)


@dataclass(frozen=True)
class AttemptCost:
    """One attempt of a job, as its records say: when, how many GPU hours, where, at what price, what it cost
    (``usd`` None: ``unknown`` says why)."""

    job: str
    attempt: str
    started_utc: str | None
    ended_utc: str | None
    exit: str | None
    gpu_hours: float | None
    pool: str | None
    instance_type: str | None
    purchase_option: str | None
    region: str | None
    node_gpus: int | None
    usd_per_node_hour: float | None
    usd_per_gpu_hour: float | None
    source: str | None
    prices_read: str | None
    usd: float | None
    unknown: str | None

    @property
    def when(self) -> str:
        """The time the attempt counts at: its end, else its start."""
        return self.ended_utc or self.started_utc or ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def attempt_cost(job: str, attempt: str, start: Mapping | None, end: Mapping | None) -> AttemptCost:
    """The cost of one attempt from its start and end records (either may be missing)."""
    doc = end or start or {}
    cost = doc.get("cost") or {}
    exit_ = (end or {}).get("exit") or {}
    unknown = None
    if end is None:
        unknown = NO_END
    elif not cost:
        unknown = NO_COST
    elif cost.get("usd") is None:
        unknown = cost.get("unknown") or "no cost in the record"
    resources = doc.get("resources") or {}
    return AttemptCost(
        job=job,
        attempt=attempt,
        started_utc=(start or {}).get("started_utc") or doc.get("started_utc"),
        ended_utc=(end or {}).get("ended_utc"),
        exit=None if not exit_ else f"{exit_.get('code')} ({exit_.get('name') or '?'})",
        gpu_hours=cost.get("gpu_hours", resources.get("gpu_hours")) if end else None,
        pool=cost.get("pool"),
        instance_type=cost.get("instance_type"),
        purchase_option=cost.get("purchase_option"),
        region=cost.get("region"),
        node_gpus=cost.get("node_gpus"),
        usd_per_node_hour=cost.get("usd_per_node_hour"),
        usd_per_gpu_hour=cost.get("usd_per_gpu_hour"),
        source=cost.get("source"),
        prices_read=cost.get("prices_read"),
        usd=cost.get("usd") if unknown is None else None,
        unknown=unknown,
    )


def job_attempts(job: str, records: Mapping[str, Mapping]) -> list[AttemptCost]:
    """Every attempt of ``job`` from its records, by object name under ``run-records/`` (``<attempt>.start
    .json``, ``<attempt>.end.json``, or a team's ``<attempt>.json``), oldest first."""
    starts: dict[str, Mapping] = {}
    ends: dict[str, Mapping] = {}
    for name, doc in records.items():
        if name.endswith(START):
            starts[name[: -len(START)]] = doc
        elif name.endswith(END):
            ends[name[: -len(END)]] = doc
        elif name.endswith(".json") and doc.get("status") == "finished":
            ends.setdefault(name[: -len(".json")], doc)
    out = [attempt_cost(job, a, starts.get(a), ends.get(a)) for a in sorted(set(starts) | set(ends))]
    return sorted(out, key=lambda a: (a.started_utc or a.when, a.attempt))


@dataclass(frozen=True)
class Group:
    """A sum over attempts: how many, their GPU hours and USD (of those with a cost)."""

    key: tuple[str, ...]
    attempts: int
    gpu_hours: float
    usd: float
    usd_per_gpu_hour: float | None = None  # one price for the group (pool x option), else None
    sources: tuple[str, ...] = ()


def _group(key: tuple[str, ...], items: list[AttemptCost]) -> Group:
    prices = {a.usd_per_gpu_hour for a in items}
    return Group(
        key=key,
        attempts=len(items),
        gpu_hours=round(sum(a.gpu_hours or 0.0 for a in items), 6),
        usd=round(sum(a.usd or 0.0 for a in items), 6),
        usd_per_gpu_hour=next(iter(prices)) if len(prices) == 1 else None,
        sources=tuple(sorted({a.source for a in items if a.source})),
    )


@dataclass(frozen=True)
class TeamCost:
    """A team's attempts that ended (or, without an end, started) at or after ``since_utc``."""

    team: str
    since_utc: str
    attempts: tuple[AttemptCost, ...]

    @property
    def priced(self) -> list[AttemptCost]:
        return [a for a in self.attempts if a.usd is not None]

    @property
    def unknown(self) -> list[AttemptCost]:
        return [a for a in self.attempts if a.usd is None]

    @property
    def usd(self) -> float:
        return round(sum(a.usd or 0.0 for a in self.priced), 6)

    @property
    def gpu_hours(self) -> float:
        return round(sum(a.gpu_hours or 0.0 for a in self.priced), 6)

    def by(self, *fields: str) -> list[Group]:
        """The priced attempts summed by ``fields`` (e.g. ``"job"``, or ``"pool", "purchase_option"``)."""
        groups: dict[tuple[str, ...], list[AttemptCost]] = {}
        for a in self.priced:
            groups.setdefault(tuple(str(getattr(a, f) or "?") for f in fields), []).append(a)
        return [_group(k, v) for k, v in sorted(groups.items())]

    def sources(self) -> list[str]:
        return sorted({a.source for a in self.priced if a.source})


def team_cost(team: str, since_utc: str, jobs: Mapping[str, Mapping[str, Mapping]]) -> TeamCost:
    """``jobs``: job -> its records by object name; the attempts at or after ``since_utc`` (ISO, ``Z``)."""
    attempts: list[AttemptCost] = []
    for job, records in sorted(jobs.items()):
        attempts += [a for a in job_attempts(job, records) if a.when >= since_utc]
    return TeamCost(team, since_utc, tuple(attempts))


def price_drift(attempts: Iterable[AttemptCost], table: PriceTable) -> list[str]:
    """One line per pool, type and option whose records were priced at a node-hour price other than the
    table's now (a table refreshed after the runtime was deployed). The sums keep the records' prices: what
    the attempts were priced at when they ran."""
    out: dict[tuple, str] = {}
    for a in attempts:
        if a.usd_per_node_hour is None or a.purchase_option not in set(Option) or not a.region:
            continue
        now = Lookup(table, a.region).instance(a.instance_type or "", Option(a.purchase_option))
        key = (a.pool, a.instance_type, a.purchase_option, a.usd_per_node_hour)
        if now.usd is not None and now.usd != a.usd_per_node_hour and key not in out:
            out[key] = (
                f"{a.pool} ({a.instance_type} {a.purchase_option}): records priced at "
                f"{a.usd_per_node_hour:.4f}/node-h (table of {a.prices_read}); the table now says "
                f"{now.usd:.4f}/node-h"
            )
    return list(out.values())
