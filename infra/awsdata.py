"""Offline AWS facts read from the snapshot of AWS data that ``moto`` bundles.

moto ships what ``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings`` returned for every
commercial region (``moto/ec2/resources``). We read those files directly instead of typing numbers in:
GPU counts, EFA support, maximum EFA interfaces, network cards and offerings are AWS's own answers.

Region names come from botocore's endpoint data, the same list the AWS CLI uses.

This module has no Pulumi in it. The offline plan's mocks use it to answer provider data calls, and the
pure validation code uses the same dataclasses for facts that, under a real ``pulumi up``, come from the
AWS API through the provider's data sources.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

# The AWS snapshot: these modules only locate the data files; nothing of moto's mocking is started.
_RESOURCES = "moto.ec2.resources"


@dataclass(frozen=True)
class NetworkCard:
    """One network card of an instance type (``NetworkInfo.NetworkCards[]``)."""

    index: int
    maximum_network_interfaces: int
    baseline_bandwidth_gbps: float
    interface_types: tuple[str, ...]


@dataclass(frozen=True)
class InstanceFacts:
    """What AWS says about an instance type, reduced to what the platform decides on."""

    instance_type: str
    vcpus: int
    memory_mib: int
    gpu_count: int
    gpu_name: str | None
    gpu_manufacturer: str | None
    gpu_memory_mib: int
    efa_supported: bool
    max_efa_interfaces: int
    max_network_cards: int
    max_network_interfaces: int
    network_cards: tuple[NetworkCard, ...]
    instance_store_disks: int
    instance_store_disk_gb: int
    instance_store_total_gb: int
    supported_placement_strategies: tuple[str, ...]
    architectures: tuple[str, ...]

    @property
    def has_gpus(self) -> bool:
        return self.gpu_count > 0

    @property
    def has_instance_store(self) -> bool:
        return self.instance_store_disks > 0

    @classmethod
    def from_describe(cls, raw: dict[str, Any]) -> InstanceFacts:
        """Build from one ``DescribeInstanceTypes`` entry (AWS's PascalCase shape)."""
        gpus = raw.get("GpuInfo", {}).get("Gpus", [])
        net = raw.get("NetworkInfo", {})
        storage = raw.get("InstanceStorageInfo", {})
        disks = storage.get("Disks", [])
        return cls(
            instance_type=raw["InstanceType"],
            vcpus=int(raw.get("VCpuInfo", {}).get("DefaultVCpus", 0)),
            memory_mib=int(raw.get("MemoryInfo", {}).get("SizeInMiB", 0)),
            gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
            gpu_name=gpus[0].get("Name") if gpus else None,
            gpu_manufacturer=gpus[0].get("Manufacturer") if gpus else None,
            gpu_memory_mib=int(gpus[0].get("MemoryInfo", {}).get("SizeInMiB", 0)) if gpus else 0,
            efa_supported=bool(net.get("EfaSupported", False)),
            max_efa_interfaces=int(net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)),
            max_network_cards=int(net.get("MaximumNetworkCards", 1)),
            max_network_interfaces=int(net.get("MaximumNetworkInterfaces", 1)),
            network_cards=tuple(
                NetworkCard(
                    index=int(c.get("NetworkCardIndex", 0)),
                    maximum_network_interfaces=int(c.get("MaximumNetworkInterfaces", 1)),
                    baseline_bandwidth_gbps=float(c.get("BaselineBandwidthInGbps", 0.0)),
                    interface_types=tuple(c.get("InterfaceTypes", ())),
                )
                for c in net.get("NetworkCards", [])
            ),
            instance_store_disks=sum(int(d.get("Count", 0)) for d in disks),
            instance_store_disk_gb=int(disks[0].get("SizeInGB", 0)) if disks else 0,
            instance_store_total_gb=int(storage.get("TotalSizeInGB", 0)),
            supported_placement_strategies=tuple(
                raw.get("PlacementGroupInfo", {}).get("SupportedStrategies", ())
            ),
            architectures=tuple(raw.get("ProcessorInfo", {}).get("SupportedArchitectures", ())),
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
def regions() -> tuple[str, ...]:
    """Commercial AWS regions that have EC2, from botocore's endpoint data."""
    import botocore.session

    return tuple(sorted(botocore.session.get_session().get_available_regions("ec2")))


@cache
def regions_with_offerings() -> tuple[str, ...]:
    """Regions for which the snapshot has instance type offerings."""
    folder = _resource("instance_type_offerings", "region")
    return tuple(
        sorted(p.name.removesuffix(".json.gz") for p in folder.iterdir() if p.name.endswith(".json.gz"))
    )


@cache
def opt_in_regions() -> frozenset[str]:
    """Regions an account must opt in to before use (ap-east-1, me-south-1, ...).

    AWS enables the regions launched before March 2019 by default; moto keeps that list.
    """
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    default_on = set(RegionsAndZonesBackend.regions_opt_in_not_required)
    return frozenset(r for r in regions() if r not in default_on)


def instance_type_names() -> tuple[str, ...]:
    return tuple(sorted(_instance_types_raw()))


def instance_facts(instance_type: str) -> InstanceFacts | None:
    """Facts for one instance type, or None if AWS has no such type."""
    raw = _instance_types_raw().get(instance_type)
    return InstanceFacts.from_describe(raw) if raw else None


def describe_instance_type(instance_type: str) -> dict[str, Any] | None:
    """The raw ``DescribeInstanceTypes`` entry."""
    return _instance_types_raw().get(instance_type)


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


@dataclass(frozen=True)
class AvailabilityZone:
    name: str
    zone_id: str


@cache
def availability_zones(region: str) -> tuple[AvailabilityZone, ...]:
    """The region's availability zones.

    Names come from the per-AZ offerings (every AZ offers some instance type). The name -> zone ID
    mapping is per account in most regions; where moto records one we use it, otherwise we pair the
    sorted IDs from the per-zone-ID offerings with the sorted names. Nothing here decides on zone IDs.
    """
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    names = sorted(offered_by_az(region))
    known = {z.name: z.zone_id for z in RegionsAndZonesBackend.zones.get(region, [])}
    ids = sorted({loc for _, loc in _offerings("availability-zone-id", region)})
    paired = dict(zip(names, ids, strict=False))
    return tuple(AvailabilityZone(n, known.get(n) or paired.get(n, "")) for n in names)
