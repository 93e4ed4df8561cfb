"""Offline AWS facts read from the snapshot of AWS data that ``moto`` bundles (the offline plan only).

moto ships what ``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings`` returned for every
commercial region (``moto/ec2/resources``). We read those files directly instead of typing numbers in:
GPU counts, EFA support, maximum EFA interfaces, network cards and offerings are AWS's own answers.

moto is an extra of the offline plan (``pip install '.[plan]'``); ``pulumi up`` never imports this module:
there the provider's data sources answer the same questions.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any

from infra.model.facts import AvailabilityZone, InstanceFacts

# The AWS snapshot: these modules only locate the data files; nothing of moto's mocking is started.
_RESOURCES = "moto.ec2.resources"


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
    mapping is per account in most regions; where moto records one we use it, otherwise we pair the
    sorted IDs from the per-zone-ID offerings with the sorted names. Nothing here decides on zone IDs.
    """
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    names = sorted(offered_by_az(region))
    known = {z.name: z.zone_id for z in RegionsAndZonesBackend.zones.get(region, [])}
    ids = sorted({loc for _, loc in _offerings("availability-zone-id", region)})
    paired = dict(zip(names, ids, strict=False))
    return tuple(AvailabilityZone(n, known.get(n) or paired.get(n, "")) for n in names)


def get_instance_type_result(raw: dict[str, Any], region: str) -> dict[str, Any]:
    """A ``DescribeInstanceTypes`` entry in the shape of pulumi-aws ``getInstanceType`` (camelCase).

    The one mapping from AWS's API shape to the provider's: the mocks answer the data call with it, and
    ``instance_facts`` reads facts through it as the program does (``InstanceFacts.from_get_instance_type``).
    """
    net = raw.get("NetworkInfo", {})
    gpus = raw.get("GpuInfo", {})
    ebs = raw.get("EbsInfo", {})
    storage = raw.get("InstanceStorageInfo", {})
    vcpu = raw.get("VCpuInfo", {})
    return {
        "id": raw["InstanceType"],
        "instanceType": raw["InstanceType"],
        "region": region,
        "autoRecoverySupported": raw.get("AutoRecoverySupported", False),
        "bareMetal": raw.get("BareMetal", False),
        "burstablePerformanceSupported": raw.get("BurstablePerformanceSupported", False),
        "currentGeneration": raw.get("CurrentGeneration", False),
        "dedicatedHostsSupported": raw.get("DedicatedHostsSupported", False),
        "defaultCores": vcpu.get("DefaultCores", 0),
        "defaultThreadsPerCore": vcpu.get("DefaultThreadsPerCore", 0),
        "defaultVcpus": vcpu.get("DefaultVCpus", 0),
        "defaultNetworkCardIndex": net.get("DefaultNetworkCardIndex", 0),
        "ebsEncryptionSupport": ebs.get("EncryptionSupport", ""),
        "ebsNvmeSupport": ebs.get("NvmeSupport", ""),
        "ebsOptimizedSupport": ebs.get("EbsOptimizedSupport", ""),
        "efaSupported": net.get("EfaSupported", False),
        "efaMaximumInterfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0),
        "enaSupport": net.get("EnaSupport", ""),
        "enaSrdSupported": net.get("EnaSrdSupported", False),
        "encryptionInTransitSupported": net.get("EncryptionInTransitSupported", False),
        "freeTierEligible": raw.get("FreeTierEligible", False),
        "gpuses": [
            {
                "count": g.get("Count", 0),
                "manufacturer": g.get("Manufacturer", ""),
                "memorySize": g.get("MemoryInfo", {}).get("SizeInMiB", 0),
                "name": g.get("Name", ""),
            }
            for g in gpus.get("Gpus", [])
        ],
        "totalGpuMemory": gpus.get("TotalGpuMemoryInMiB", 0),
        "hibernationSupported": raw.get("HibernationSupported", False),
        "hypervisor": raw.get("Hypervisor", ""),
        "instanceDisks": [
            {"count": d.get("Count", 0), "size": d.get("SizeInGB", 0), "type": d.get("Type", "")}
            for d in storage.get("Disks", [])
        ],
        "instanceStorageSupported": raw.get("InstanceStorageSupported", False),
        "totalInstanceStorage": storage.get("TotalSizeInGB", 0),
        "ipv6Supported": net.get("Ipv6Supported", False),
        "maximumIpv4AddressesPerInterface": net.get("Ipv4AddressesPerInterface", 0),
        "maximumIpv6AddressesPerInterface": net.get("Ipv6AddressesPerInterface", 0),
        "maximumNetworkCards": net.get("MaximumNetworkCards", 1),
        "maximumNetworkInterfaces": net.get("MaximumNetworkInterfaces", 1),
        "memorySize": raw.get("MemoryInfo", {}).get("SizeInMiB", 0),
        "networkCards": [
            {
                "index": c.get("NetworkCardIndex", 0),
                "maximumInterfaces": c.get("MaximumNetworkInterfaces", 0),
                "baselineBandwidth": c.get("BaselineBandwidthInGbps", 0.0),
                "peakBandwidth": c.get("PeakBandwidthInGbps", 0.0),
                "performance": c.get("NetworkPerformance", ""),
            }
            for c in net.get("NetworkCards", [])
        ],
        "networkPerformance": net.get("NetworkPerformance", ""),
        "supportedArchitectures": raw.get("ProcessorInfo", {}).get("SupportedArchitectures", []),
        "supportedPlacementStrategies": raw.get("PlacementGroupInfo", {}).get("SupportedStrategies", []),
        "supportedRootDeviceTypes": raw.get("SupportedRootDeviceTypes", []),
        "supportedUsagesClasses": raw.get("SupportedUsageClasses", []),
        "supportedVirtualizationTypes": raw.get("SupportedVirtualizationTypes", []),
        "nitroEnclavesSupport": raw.get("NitroEnclavesSupport", ""),
        "nitroTpmSupport": raw.get("NitroTpmSupport", ""),
    }
