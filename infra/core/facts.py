"""What AWS says about a region, its instance types and the account, as plain data.

The program fetches these facts through the AWS provider's data sources (``infra/io/provider_facts.py``);
the offline plan answers the same data sources from the AWS snapshot bundled in moto
(``infra/io/snapshot.py``: a refreshed facts file or moto's snapshot). Both end in the types below; the
rules judge them alike, and ``RegionFacts.source`` names the data in the messages of fact-based refusals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    # How the type can be bought: 'on-demand', 'spot', 'capacity-block' (DescribeInstanceTypes
    # SupportedUsageClasses). Empty when the source does not say.
    usage_classes: tuple[str, ...] = ()
    # Private IPv4 addresses per network interface (NetworkInfo.Ipv4AddressesPerInterface): with the VPC
    # CNI it sets how many pods a node takes, and so the memory the kubelet reserves. 0: the source does
    # not say.
    ipv4_addresses_per_interface: int = 0

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
            usage_classes=tuple(r.get("supportedUsagesClasses") or ()),
            ipv4_addresses_per_interface=int(r.get("maximumIpv4AddressesPerInterface") or 0),
        )

    @classmethod
    def from_describe_instance_types(cls, raw: Mapping[str, Any]) -> InstanceFacts:
        """Build from one entry of EC2 ``DescribeInstanceTypes`` (boto3, PascalCase), through the same
        mapping as the provider's answer."""
        return cls.from_get_instance_type(get_instance_type_result(raw, ""))


def get_instance_type_result(raw: Mapping[str, Any], region: str) -> dict[str, Any]:
    """A ``DescribeInstanceTypes`` entry in the shape of pulumi-aws ``getInstanceType`` (camelCase).

    The one mapping from AWS's API shape to the provider's: the offline mocks answer the data call with it,
    the snapshot and ``aiplat preflight`` (boto3) read facts through it as the program does
    (``InstanceFacts.from_get_instance_type``).
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


@dataclass(frozen=True)
class AvailabilityZone:
    """One zone: its name (per account) and its ID (the same physical zone in every account).

    ``zone_type`` is ``availability-zone``, ``local-zone`` or ``wavelength-zone`` (DescribeAvailabilityZones
    ``ZoneType``); the program asks only for ordinary availability zones.
    """

    name: str
    zone_id: str
    zone_type: str = "availability-zone"


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
    # True when the offerings were read per zone ID and mapped to this account's zone names (``aiplat
    # preflight``); the offline snapshot only guesses the name -> ID pairing, so messages leave IDs out.
    by_zone_id: bool = False
    # Which data answered and its date ("moto 5.2.5's bundled AWS snapshot (built ...)", a refreshed facts
    # file, the provider), named by every refusal on these facts; "" where the caller says it elsewhere.
    source: str = ""
    # Facts of the region's GPU types, fetched only when a GPU pool names a type not offered: the
    # suggestions for such a pool are types with GPUs.
    suggestions: Mapping[str, InstanceFacts] = field(default_factory=dict)
    # The CIDRs of the region's S3 prefix list (com.amazonaws.<region>.s3): where the S3 gateway endpoint
    # routes, what the workload pods' HTTPS egress policy names (a NetworkPolicy cannot name a prefix list).
    s3_prefix_list_cidrs: tuple[str, ...] = ()

    def azs_offering(self, instance_type: str) -> tuple[str, ...]:
        return tuple(az for az, types in sorted(self.offerings.items()) if instance_type in types)

    @property
    def zone_names(self) -> tuple[str, ...]:
        return tuple(z.name for z in self.zones)

    def zone_label(self, name: str) -> str:
        """``us-east-1a (use1-az6)`` when the zone ID is this account's, else the name alone."""
        zone_id = self.zone_id(name)
        return f"{name} ({zone_id})" if self.by_zone_id and zone_id else name

    def zone_id(self, name: str) -> str:
        """The zone ID of the zone called ``name`` in this account ('' if unknown)."""
        return next((z.zone_id for z in self.zones if z.name == name), "")


@dataclass(frozen=True)
class AccountFacts:
    """The account and partition the stack deploys into (ARNs and key policies need them)."""

    account_id: str
    partition: str


# ---------------------------------------------------------------------------------------------------------
# Live account facts for ``aiplat preflight``: read with boto3 (``infra/io/aws_live.py``), judged by the
# preflight rules (``infra/preflight/rules.py``). A fact that could not be read is an ``Unreadable`` naming
# the API call and AWS's error, so a rule can say "not checked" with the permission to grant.


@dataclass(frozen=True)
class Unreadable:
    """A call that did not answer: which API, and the error AWS (or the client) gave."""

    api: str
    error: str

    def __str__(self) -> str:
        return f"{self.api}: {self.error}"


@dataclass(frozen=True)
class CallerIdentity:
    """``sts:GetCallerIdentity``: who the credentials are."""

    account: str
    arn: str


@dataclass(frozen=True)
class ReservationFacts:
    """One EC2 capacity reservation (``DescribeCapacityReservations``): an ODCR or a Capacity Block."""

    id: str
    instance_type: str
    availability_zone: str
    availability_zone_id: str
    state: str  # active | scheduled | pending | expired | cancelled | ...
    reservation_type: str  # 'default' (ODCR) | 'capacity-block'
    total_instances: int
    available_instances: int
    instance_match_criteria: str  # open | targeted
    platform: str  # 'Linux/UNIX', ...
    placement_group_arn: str | None = None
    start_date: str | None = None
    end_date: str | None = None


@dataclass(frozen=True)
class AddonVersion:
    """One version EKS lists for an add-on and a Kubernetes version (``DescribeAddonVersions``)."""

    version: str
    default: bool = False


@dataclass(frozen=True)
class ClusterEndpointFacts:
    """The deployed EKS cluster's API endpoint (``DescribeCluster``) and whether it answered from here."""

    name: str
    status: str
    endpoint: str
    public_access: bool
    private_access: bool
    public_access_cidrs: tuple[str, ...]
    reachable: bool
    reach_error: str = ""


@dataclass(frozen=True)
class BackendFacts:
    """The Pulumi state backend every stack shares, and whether it answered."""

    url: str
    reachable: bool
    detail: str = ""
    checked: bool = True  # False for backends preflight cannot check (Pulumi Cloud, gs://, azblob://)


@dataclass(frozen=True)
class SecretsProviderFacts:
    """The Pulumi secrets provider (an ``awskms://`` key or a passphrase) and whether it is usable."""

    provider: str
    usable: bool
    detail: str = ""
    checked: bool = True  # False for providers preflight cannot check (Pulumi Cloud's default, gcpkms...)


@dataclass(frozen=True)
class DnsRecordFacts:
    """One record set of a Route 53 zone at one name: its type, set identifier (routing policies) and
    alias target (its DNS name), as ListResourceRecordSets returns them."""

    type: str
    set_identifier: str = ""
    alias_target: str = ""


@dataclass(frozen=True)
class GlobalDnsFacts:
    """The hosted zone of the global inference endpoint, as Route 53 and public DNS see it.

    ``zone_name`` None: Route 53 does not know the zone ID. ``delegated_to``: the name servers public DNS
    names for the zone's domain (the parent's NS delegation), or Unreadable when DNS did not answer;
    ``records``: the record sets already at the global name."""

    zone_id: str
    zone_name: str | None
    private: bool = False
    name_servers: tuple[str, ...] = ()
    delegated_to: tuple[str, ...] | Unreadable = ()
    records: tuple[DnsRecordFacts, ...] = ()


@dataclass(frozen=True)
class LiveFacts:
    """What the account says about one stack's region, read before ``pulumi up``.

    ``region_usable`` is False when the region is not enabled or its STS endpoint refused the
    credentials; the regional facts are then not read (``None``/empty) and the rules on them do not run.
    ``reservations`` maps a reservation ID to its facts, or None when EC2 does not know it;
    ``cluster`` is None before the cluster exists.
    """

    region: str
    identity: CallerIdentity | Unreadable
    region_opt_status: str | Unreadable | None = (
        None  # ENABLED | ENABLED_BY_DEFAULT | ENABLING | DISABLED ...
    )
    regional_identity: CallerIdentity | Unreadable | None = None
    quotas: Mapping[str, float | Unreadable] = field(default_factory=dict)  # quota code -> vCPUs
    reservations: Mapping[str, ReservationFacts | Unreadable | None] = field(default_factory=dict)
    addon_versions: Mapping[str, tuple[AddonVersion, ...] | Unreadable] = field(default_factory=dict)
    autoscaling_role: bool | Unreadable | None = None  # AWSServiceRoleForAutoScaling exists
    cluster: ClusterEndpointFacts | Unreadable | None = None
    # infer stacks with inference.global_endpoint: its zone, delegation and the records at its name
    global_dns: GlobalDnsFacts | Unreadable | None = None
    # '<repository>@<digest>' of each image of the copy area the stack's charts run -> whether the
    # stack's ECR registry holds it (ecr:DescribeImages), or why it could not be read
    copied_images: Mapping[str, bool | Unreadable] = field(default_factory=dict)

    @property
    def credentials_work(self) -> bool:
        """sts:GetCallerIdentity answered: the account-wide facts were read."""
        return isinstance(self.identity, CallerIdentity)

    @property
    def region_usable(self) -> bool:
        enabled = self.region_opt_status in (None, "ENABLED", "ENABLED_BY_DEFAULT") or isinstance(
            self.region_opt_status, Unreadable
        )
        return isinstance(self.regional_identity, CallerIdentity) and enabled
