"""What AWS says about a region, its instance types and the account, as plain data.

The program fetches these facts through the AWS provider's data sources (``infra/io/provider_facts.py``);
the offline plan answers the same data sources from the AWS snapshot bundled in moto
(``infra/io/snapshot.py``). Both end in the types below, so the rules never know which source answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NetworkCard:
    """One network card of an instance type."""

    index: int
    maximum_network_interfaces: int
    baseline_bandwidth_gbps: float
    # Interface types the card accepts ('interface', 'efa', 'efa-only'); empty when the source does not say
    # (the provider's getInstanceType does not expose them).
    interface_types: tuple[str, ...] = ()


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

    @property
    def efa_interface_limit(self) -> int:
        """How many EFA interfaces the type takes: one per network card, at most AWS's EFA maximum
        (32 on p5.48xlarge, 16 on p5en.48xlarge, 4 on p4d.24xlarge, 1 on g5.48xlarge; 0 without EFA).

        https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
        """
        if not self.efa_supported:
            return 0
        return max(1, min(self.max_efa_interfaces, self.max_network_cards))

    @classmethod
    def from_get_instance_type(cls, r: Mapping[str, Any]) -> InstanceFacts:
        """Build from the result of the provider's ``aws:ec2/getInstanceType`` data source (camelCase keys).

        The one mapping from AWS's answer to our facts: under ``pulumi up`` the provider returns this shape,
        offline the snapshot is converted to it (``infra/io/snapshot.py``).
        """
        gpus = list(r.get("gpuses") or [])
        disks = list(r.get("instanceDisks") or [])
        return cls(
            instance_type=str(r["instanceType"]),
            vcpus=int(r.get("defaultVcpus") or 0),
            memory_mib=int(r.get("memorySize") or 0),
            gpu_count=sum(int(g.get("count") or 0) for g in gpus),
            gpu_name=gpus[0].get("name") if gpus else None,
            gpu_manufacturer=gpus[0].get("manufacturer") if gpus else None,
            gpu_memory_mib=int(gpus[0].get("memorySize") or 0) if gpus else 0,
            efa_supported=bool(r.get("efaSupported")),
            max_efa_interfaces=int(r.get("efaMaximumInterfaces") or 0),
            max_network_cards=int(r.get("maximumNetworkCards") or 1),
            max_network_interfaces=int(r.get("maximumNetworkInterfaces") or 1),
            network_cards=tuple(
                NetworkCard(
                    index=int(c.get("index") or 0),
                    maximum_network_interfaces=int(c.get("maximumInterfaces") or 0),
                    baseline_bandwidth_gbps=float(c.get("baselineBandwidth") or 0.0),
                )
                for c in (r.get("networkCards") or [])
            ),
            instance_store_disks=sum(int(d.get("count") or 0) for d in disks),
            instance_store_disk_gb=int(disks[0].get("size") or 0) if disks else 0,
            instance_store_total_gb=int(r.get("totalInstanceStorage") or 0),
            supported_placement_strategies=tuple(r.get("supportedPlacementStrategies") or ()),
            architectures=tuple(r.get("supportedArchitectures") or ()),
        )


@dataclass(frozen=True)
class AvailabilityZone:
    """One zone: its name (per account) and its ID (the same physical zone in every account)."""

    name: str
    zone_id: str


@dataclass(frozen=True)
class RegionFacts:
    """What AWS says about the stack's region, limited to what the config refers to."""

    region: str
    zones: tuple[AvailabilityZone, ...]
    # availability zone name -> instance types (of those the config names) offered there
    offerings: Mapping[str, frozenset[str]]
    instances: Mapping[str, InstanceFacts]
    # every instance type offered in the region; only fetched when a named type is not offered
    region_types: frozenset[str] = frozenset()

    def azs_offering(self, instance_type: str) -> tuple[str, ...]:
        return tuple(az for az, types in sorted(self.offerings.items()) if instance_type in types)

    @property
    def zone_names(self) -> tuple[str, ...]:
        return tuple(z.name for z in self.zones)


@dataclass(frozen=True)
class AccountFacts:
    """The account and partition the stack deploys into (ARNs and key policies need them)."""

    account_id: str
    partition: str
