"""Offline AWS facts read from the snapshot of AWS data that ``moto`` bundles (the offline plan only).

moto ships what ``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings`` returned for every
commercial region (``moto/ec2/resources``). We read those files directly instead of typing numbers in:
GPU counts, EFA support, maximum EFA interfaces, network cards and offerings are AWS's own answers.

moto is an extra of the offline plan (``pip install '.[plan]'``); ``pulumi up`` never imports this module:
there the provider's data sources answer the same questions.

``offline_aws(region)`` is what the offline plan and ``aiplat cost`` read: a refreshed facts file for the
region when ``aiplat facts refresh`` wrote one (``infra/io/facts_file.py``), else this snapshot; its
``label`` names the data and its date for the messages of fact-based refusals.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from typing import Any

from infra.core.facts import AvailabilityZone, InstanceFacts, RegionFacts, get_instance_type_result

# The mapping from DescribeInstanceTypes to the provider's shape is pure and shared with `aiplat preflight`;
# the mocks answer getInstanceType through it.
from infra.io.facts_file import FactsFile, read_facts_file
from infra.karpenter.gpu_offers import karpenter_patterns
from infra.schema.platform import PlatformConfig

# The AWS snapshot: these modules only locate the data files; nothing of moto's mocking is started.
_RESOURCES = "moto.ec2.resources"

# When each moto release's snapshot was built: the date of its data files in the release's wheel
# (moto-5.2.5-py3-none-any.whl: 2026-10-27). moto refreshes these files from AWS once a month (its
# "chore: update EC2 Instance Offerings/Types" commits, https://github.com/getmoto/moto), so the data is
# from that month or the one before. A moto version not listed here has its date shown as unknown.
SNAPSHOT_BUILT = {"5.2.5": "2026-10-27"}


def snapshot_label(region: str) -> str:
    """Which data answered, for messages: moto's version, the snapshot's date, how to get fresher facts."""
    version = metadata.version("moto")
    built = SNAPSHOT_BUILT.get(version)
    when = f"built {built}" if built else "date unknown (not in infra/io/snapshot.py SNAPSHOT_BUILT)"
    refresh = f"aiplat facts refresh --region {region}"
    return f"moto {version}'s bundled AWS snapshot, {when}; current facts: {refresh}"


def region_missing(region: str) -> str:
    """Why the offline data cannot answer for ``region`` and the step that records it, in one line."""
    version = metadata.version("moto")
    built = SNAPSHOT_BUILT.get(version, "date unknown")
    return (
        f"no offline AWS facts of {region!r}: moto {version}'s bundled snapshot (built {built}) lacks the "
        f"region; fix: record them with `aiplat facts refresh --region {region}` (read-only EC2 calls with "
        "your AWS credentials), then plan again"
    )


def _resource(*parts: str) -> Any:
    path = resources.files(_RESOURCES)
    for part in parts:  # Traversable.joinpath takes one part at a time on Python 3.11
        path = path.joinpath(part)
    return path


def _load_gz_json(*parts: str) -> Any:
    path = _resource(*parts)
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@cache
def _instance_types_raw() -> dict[str, dict[str, Any]]:
    return _load_gz_json("instance_types.json.gz")


@cache
def regions_with_offerings() -> tuple[str, ...]:
    """Regions for which the snapshot has instance type offerings."""
    folder = _resource("instance_type_offerings", "region")
    return tuple(
        sorted(p.name.removesuffix(".json.gz") for p in folder.iterdir() if p.name.endswith(".json.gz"))
    )


def instance_type_names() -> tuple[str, ...]:
    return tuple(sorted(_instance_types_raw()))


def describe_instance_type(instance_type: str) -> dict[str, Any] | None:
    """The raw ``DescribeInstanceTypes`` entry."""
    return _instance_types_raw().get(instance_type)


def instance_facts(instance_type: str, region: str = "us-east-1") -> InstanceFacts | None:
    """Facts for one instance type (read as the program reads them), or None if AWS has no such type."""
    raw = describe_instance_type(instance_type)
    return InstanceFacts.from_get_instance_type(get_instance_type_result(raw, region)) if raw else None


@cache
def _offerings(location_type: str, region: str) -> tuple[tuple[str, str], ...]:
    if region not in regions_with_offerings():
        return ()
    rows = _load_gz_json("instance_type_offerings", location_type, f"{region}.json.gz")
    return tuple((r["InstanceType"], r["Location"]) for r in rows)


def offered_in_region(region: str) -> frozenset[str]:
    """Instance types offered anywhere in the region."""
    return frozenset(t for t, _ in _offerings("region", region))


def offered_by_az(region: str) -> dict[str, frozenset[str]]:
    """Availability zone name -> instance types offered there."""
    out: dict[str, set[str]] = {}
    for itype, az in _offerings("availability-zone", region):
        out.setdefault(az, set()).add(itype)
    return {az: frozenset(types) for az, types in sorted(out.items())}


def azs_offering(region: str, instance_type: str) -> tuple[str, ...]:
    """Availability zones of the region where the instance type is offered."""
    return tuple(az for az, types in offered_by_az(region).items() if instance_type in types)


@cache
def availability_zones(region: str) -> tuple[AvailabilityZone, ...]:
    """The region's availability zones.

    Names come from the per-AZ offerings (every AZ offers some instance type). The name -> zone ID
    mapping is per account in most regions; where moto records one we use it (with its zone type),
    otherwise we pair the sorted IDs from the per-zone-ID offerings with the sorted names. The rule
    'control-plane-zones' goes by these IDs offline; under ``pulumi up`` the provider gives the account's.
    """
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    names = sorted(offered_by_az(region))
    moto_zones = {z.name: z for z in RegionsAndZonesBackend.zones.get(region, [])}
    ids = sorted({loc for _, loc in _offerings("availability-zone-id", region)})
    paired = dict(zip(names, ids, strict=False))
    return tuple(
        AvailabilityZone(
            n,
            moto_zones[n].zone_id if n in moto_zones else paired.get(n, ""),
            moto_zones[n].zone_type if n in moto_zones else "availability-zone",
        )
        for n in names
    )


@dataclass(frozen=True)
class OfflineAws:
    """The offline answers for one region: its refreshed facts file when there is one, else moto's snapshot.

    The same questions the provider's data sources answer under ``pulumi up`` (zones, offerings per region
    and per zone, instance type facts), from one of the two sources, named by ``label``."""

    region: str
    file: FactsFile | None = None

    @property
    def label(self) -> str:
        return self.file.label if self.file else snapshot_label(self.region)

    @property
    def has_region(self) -> bool:
        """Whether this data knows the region at all (a facts file does; moto's snapshot may not)."""
        return self.file is not None or self.region in regions_with_offerings()

    def availability_zones(self) -> tuple[AvailabilityZone, ...]:
        return self.file.zones if self.file else availability_zones(self.region)

    def describe_instance_type(self, instance_type: str) -> dict[str, Any] | None:
        if self.file:
            raw = self.file.instance_types.get(instance_type)
            return dict(raw) if raw is not None else None
        return describe_instance_type(instance_type)

    def instance_type_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.file.instance_types)) if self.file else instance_type_names()

    def offered_in_region(self) -> frozenset[str]:
        return self.file.region_offerings if self.file else offered_in_region(self.region)

    def offered_by_az(self) -> dict[str, frozenset[str]]:
        if self.file:
            return dict(sorted(self.file.zone_offerings.items()))
        return offered_by_az(self.region)

    def instance_facts(self, instance_type: str) -> InstanceFacts | None:
        raw = self.describe_instance_type(instance_type)
        return (
            InstanceFacts.from_get_instance_type(get_instance_type_result(raw, self.region)) if raw else None
        )


def offline_aws(region: str) -> OfflineAws:
    """The region's offline AWS data: the refreshed facts file (``aiplat facts refresh``) if one covers the
    region, else moto's snapshot."""
    return OfflineAws(region, read_facts_file(region))


def region_facts(cfg: PlatformConfig) -> RegionFacts:
    """The facts the program gathers for ``cfg`` (``infra/io/provider_facts.py:gather_facts``), read from the
    offline data directly (``offline_aws``: a refreshed facts file or the snapshot): ordinary zones,
    offerings per zone of the pools' types and of every type of the Karpenter pools' families (``g5.*``),
    and those types' facts. For pure estimates outside the program (``aiplat cost``: which types a
    Karpenter pool may launch) and for tests."""
    region = cfg.region
    data = offline_aws(region)
    zones = tuple(z for z in data.availability_zones() if z.zone_type == "availability-zone")
    by_az = data.offered_by_az()
    types = {p.instance_type for p in cfg.node_pools.values()}
    patterns = karpenter_patterns(cfg)
    offerings: dict[str, frozenset[str]] = {}
    for z in zones:
        here = by_az.get(z.name, frozenset())
        offerings[z.name] = frozenset(
            t for t in here if t in types or any(fnmatch.fnmatchcase(t, p) for p in patterns)
        )
    offered = {t for ts in offerings.values() for t in ts}
    instances = {t: f for t in sorted(offered) if (f := data.instance_facts(t)) is not None}
    return RegionFacts(
        region=region,
        zones=zones,
        offerings=offerings,
        instances=instances,
        region_types=data.offered_in_region() if not types <= offered else frozenset(),
        source=data.label,
    )
