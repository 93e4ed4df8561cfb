"""The stack config schema.

A stack file holds data only; everything it may say is declared here, with units, defaults and what
conflicts with what. Unknown keys are rejected (see ``loader.py`` for the did-you-mean hint). Checks
that need AWS facts (is this type offered in that AZ?) live in ``infra/validation.py`` and run before
any resource is created.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra import awsdata

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors and values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class Environment(StrEnum):
    dev = "dev"
    prod = "prod"


class Role(StrEnum):
    """What the stack's region is for: ``train`` runs the DDP trainer, ``infer`` serves models."""

    train = "train"
    infer = "infer"


class CapacityType(StrEnum):
    """How a node pool buys its instances.

    ``capacity_reservation`` launches into an On-Demand Capacity Reservation (ODCR) and
    ``capacity_block`` into an EC2 Capacity Block for ML; both need ``capacity_reservation`` on the pool.
    """

    on_demand = "on_demand"
    spot = "spot"
    capacity_reservation = "capacity_reservation"
    capacity_block = "capacity_block"

    @property
    def reserved(self) -> bool:
        return self in (CapacityType.capacity_reservation, CapacityType.capacity_block)


class NatStrategy(StrEnum):
    """How private subnets reach the internet.

    ``none``: no NAT gateway (nodes reach AWS only through VPC endpoints; images from public registries
    cannot be pulled); ``single``: one NAT gateway in the first AZ (cheap, one AZ's outage cuts egress
    everywhere); ``one_per_az``: a NAT gateway per AZ (production).
    """

    none = "none"
    single = "single"
    one_per_az = "one_per_az"


class FlowLogTraffic(StrEnum):
    ALL = "ALL"
    ACCEPT = "ACCEPT"
    REJECT = "REJECT"


class Placement(StrEnum):
    """Placement of a pool's nodes.

    ``auto``: a cluster placement group for EFA pools without a capacity reservation, none otherwise;
    ``cluster``: a cluster placement group (created, or the reservation's ``placement_group`` when a
    capacity reservation is set); ``none``: no placement group.
    """

    auto = "auto"
    cluster = "cluster"
    none = "none"


class TaintEffect(StrEnum):
    NoSchedule = "NoSchedule"
    NoExecute = "NoExecute"
    PreferNoSchedule = "PreferNoSchedule"


class AccessPolicy(StrEnum):
    """EKS access policies an access entry can get (https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html)."""

    cluster_admin = "AmazonEKSClusterAdminPolicy"
    admin = "AmazonEKSAdminPolicy"
    edit = "AmazonEKSEditPolicy"
    view = "AmazonEKSViewPolicy"


class Tags(Strict):
    """Cost-allocation tags, applied to every taggable resource through the provider's default tags."""

    CostCenter: Annotated[str, Field(min_length=1, max_length=256)]
    Project: Annotated[str, Field(min_length=1, max_length=256)]
    Owner: Annotated[str, Field(min_length=1, max_length=256)]
    Environment: Environment
    Workload: Annotated[str, Field(min_length=1, max_length=256)]
    extra: dict[str, str] = Field(default_factory=dict, description="More tags, key -> value.")

    @field_validator("extra")
    @classmethod
    def _no_reserved(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key.lower().startswith("aws:"):
                raise ValueError(f"tag key {key!r} uses the reserved 'aws:' prefix; pick another key")
        return v

    def as_dict(self) -> dict[str, str]:
        base = {
            "CostCenter": self.CostCenter,
            "Project": self.Project,
            "Owner": self.Owner,
            "Environment": self.Environment.value,
            "Workload": self.Workload,
        }
        return {**base, **self.extra}


# What a private GPU cluster needs without internet: image pulls (ECR api/dkr), IRSA/pod identity
# (sts, eks-auth), node bootstrap (ec2, eks), logs, load balancers, Session Manager.
# https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html
DEFAULT_INTERFACE_ENDPOINTS = (
    "ecr.api",
    "ecr.dkr",
    "sts",
    "ec2",
    "eks",
    "eks-auth",
    "logs",
    "elasticloadbalancing",
    "ssm",
    "ssmmessages",
    "ec2messages",
)
NAT_FREE_ENDPOINTS = ("ecr.api", "ecr.dkr", "sts", "ec2")
# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class FlowLogsConfig(Strict):
    """VPC flow logs to a CloudWatch log group encrypted with the stack's logs key."""

    enabled: bool = Field(True, description="Record flow logs for the whole VPC.")
    traffic_type: FlowLogTraffic = Field(FlowLogTraffic.ALL, description="ALL, ACCEPT or REJECT.")
    retention_days: int = Field(
        90, description="Days CloudWatch keeps the records (CloudWatch's allowed values)."
    )
    aggregation_interval_s: int = Field(600, description="60 or 600 seconds per record.")

    @field_validator("retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            close = min(LOG_RETENTION_DAYS, key=lambda d: abs(d - v))
            raise ValueError(f"{v} is not a CloudWatch Logs retention period; use e.g. {close}")
        return v

    @field_validator("aggregation_interval_s")
    @classmethod
    def _interval(cls, v: int) -> int:
        if v not in (60, 600):
            raise ValueError(f"{v} is not 60 or 600; VPC flow logs aggregate per 60 or 600 seconds")
        return v


class NetworkConfig(Strict):
    """The stack's VPC."""

    vpc_cidr: str = Field("10.0.0.0/16", description="IPv4 CIDR of the VPC, /16 to /20.")
    az_count: Annotated[int, Field(ge=1, le=6)] = Field(
        3, description="How many availability zones the VPC spans (EKS needs subnets in at least two)."
    )
    availability_zones: list[str] = Field(
        default_factory=list,
        description="The VPC's zones by name; empty = the region's first az_count zones. When set, its "
        "length must equal az_count. Name a zone here to pin an EFA pool to it.",
    )
    nat: NatStrategy = Field(NatStrategy.one_per_az, description="NAT gateways: none, single, one_per_az.")
    interface_endpoints: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INTERFACE_ENDPOINTS),
        description="AWS services reached through interface VPC endpoints (service short names, e.g. "
        "'ecr.api'); S3 always gets a gateway endpoint. With nat: none, ECR (api, dkr), STS and EC2 "
        "are needed.",
    )
    flow_logs: FlowLogsConfig = Field(default_factory=lambda: FlowLogsConfig())

    @field_validator("interface_endpoints")
    @classmethod
    def _endpoints(cls, v: list[str]) -> list[str]:
        for svc in v:
            if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", svc):
                raise ValueError(f"{svc!r} is not an AWS service short name like 'ecr.api'")
            if svc == "s3":
                raise ValueError("'s3' gets a gateway endpoint already; remove it from interface_endpoints")
        if len(set(v)) != len(v):
            raise ValueError("interface_endpoints lists a service twice; list each once")
        return v

    @model_validator(mode="after")
    def _zones(self) -> NetworkConfig:
        if self.availability_zones and len(self.availability_zones) != self.az_count:
            raise ValueError(
                f"availability_zones names {len(self.availability_zones)} zones but az_count is "
                f"{self.az_count}; make them agree"
            )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError("availability_zones names a zone twice; name each once")
        if self.nat is NatStrategy.none:
            missing = [s for s in NAT_FREE_ENDPOINTS if s not in self.interface_endpoints]
            if missing:
                raise ValueError(
                    f"nat is 'none' but interface_endpoints lacks {missing}; nodes could not pull images "
                    "or join the cluster. Add them, or set nat: single"
                )
        return self

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"{v!r} is not an IPv4 CIDR block ({exc}); use e.g. '10.0.0.0/16'") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{v!r} has prefix /{net.prefixlen}; a GPU VPC needs /16 to /20")
        if not net.is_private:
            raise ValueError(f"{v!r} is not a private (RFC 1918) range; use e.g. '10.0.0.0/16'")
        return v


class TaintConfig(Strict):
    """One taint; the key is the dict key."""

    value: str = Field("true", description="Taint value.")
    effect: TaintEffect = Field(
        TaintEffect.NoSchedule, description="NoSchedule, NoExecute or PreferNoSchedule."
    )


class CapacityReservationConfig(Strict):
    """A reservation the pool launches into. Copy the values from `aws ec2 describe-capacity-reservations`."""

    id: Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")] = Field(
        description="e.g. 'cr-0123456789abcdef0'."
    )
    availability_zone: str = Field(description="The reservation's zone; the pool must run there.")
    placement_group: str | None = Field(
        None,
        description="Name of the cluster placement group the reservation was made in, if any; the pool "
        "launches into it (it is not created here).",
    )


class NodePoolConfig(Strict):
    """One managed node group. Pools are keyed by name in the stack file, so URNs stay stable."""

    instance_type: str = Field(description="EC2 instance type, e.g. 'p5.48xlarge'.")
    min_size: Annotated[int, Field(ge=0)] = 0
    desired_size: Annotated[int, Field(ge=0)] = 1
    max_size: Annotated[int, Field(ge=1)] = 1
    capacity_type: CapacityType = CapacityType.on_demand
    gpu: bool = Field(True, description="GPU pool (NVIDIA AMI, GPU taint) or CPU system pool.")
    gpus_per_node: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="GPUs you expect per node; checked against the type's AWS facts (unset: not checked).",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes node labels.")
    taints: dict[str, TaintConfig] = Field(
        default_factory=dict,
        description="Extra taints keyed by taint key; GPU pools always get nvidia.com/gpu=true:NoSchedule.",
    )
    efa: bool = Field(
        False,
        description="Attach EFA interfaces (all the type supports unless efa_interfaces says fewer). "
        "Needs an EFA type and exactly one zone in availability_zones.",
    )
    efa_interfaces: Annotated[int, Field(ge=1)] | None = Field(
        None, description="How many EFA interfaces (default: the type's maximum). Only with efa: true."
    )
    availability_zones: list[str] = Field(
        default_factory=list,
        description="Zones the pool's nodes run in; empty = every VPC zone that offers the type. "
        "EFA pools and pools in a cluster placement group need exactly one.",
    )
    placement: Placement = Field(Placement.auto, description="auto, cluster or none; see Placement.")
    capacity_reservation: CapacityReservationConfig | None = Field(
        None,
        description="The ODCR or Capacity Block to launch into; needs capacity_type capacity_reservation "
        "or capacity_block.",
    )
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = Field(
        100, description="Root EBS volume (gp3, encrypted with the stack's EBS key) in GiB."
    )

    @model_validator(mode="after")
    def _efa_and_capacity(self) -> NodePoolConfig:
        if self.efa_interfaces is not None and not self.efa:
            raise ValueError(
                f"efa_interfaces is {self.efa_interfaces} but efa is false; set efa: true or drop it"
            )
        if self.capacity_type.reserved and self.capacity_reservation is None:
            raise ValueError(
                f"capacity_type {self.capacity_type.value} needs capacity_reservation "
                "(id and availability_zone)"
            )
        if self.capacity_reservation is not None and not self.capacity_type.reserved:
            raise ValueError(
                f"capacity_reservation is set but capacity_type is {self.capacity_type.value}; "
                "set capacity_type to capacity_reservation or capacity_block"
            )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError("availability_zones names a zone twice; name each once")
        return self

    @property
    def placement_group_wanted(self) -> bool:
        """Whether the pool's nodes go into a cluster placement group."""
        if self.placement is Placement.auto:
            return self.efa and self.capacity_reservation is None
        return self.placement is Placement.cluster

    @model_validator(mode="after")
    def _sizes(self) -> NodePoolConfig:
        if self.min_size > self.max_size:
            raise ValueError(
                f"min_size {self.min_size} is greater than max_size {self.max_size}; "
                "make min_size <= max_size"
            )
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"desired_size {self.desired_size} is outside min_size..max_size "
                f"({self.min_size}..{self.max_size}); set it within that range"
            )
        return self

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if awsdata.instance_facts(v) is None:
            import difflib

            close = difflib.get_close_matches(v, awsdata.instance_type_names(), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"{v!r} is not an EC2 instance type{hint}")
        return v


class AddonVersions(Strict):
    """EKS managed add-on versions, pinned here and nowhere else.

    Check them against the cluster version with
    `aws eks describe-addon-versions --kubernetes-version <v> --addon-name <name>` before upgrading.
    """

    vpc_cni: str = Field("v1.19.5-eksbuild.1", description="vpc-cni; EFA-only interfaces need a recent one.")
    coredns: str = Field("v1.12.1-eksbuild.2", description="coredns")
    kube_proxy: str = Field(
        "v1.33.0-eksbuild.2", description="kube-proxy; match the Kubernetes minor version."
    )
    aws_ebs_csi_driver: str = Field("v1.44.0-eksbuild.1", description="aws-ebs-csi-driver")
    eks_pod_identity_agent: str = Field("v1.3.7-eksbuild.2", description="eks-pod-identity-agent")
    eks_node_monitoring_agent: str = Field(
        "v1.3.0-eksbuild.2", description="eks-node-monitoring-agent: node health for GPU auto repair."
    )

    @field_validator("*")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", v):
            raise ValueError(f"{v!r} is not an EKS add-on version like 'v1.19.5-eksbuild.1'")
        return v

    def by_addon_name(self) -> dict[str, str]:
        """EKS add-on name -> version."""
        return {name.replace("_", "-"): version for name, version in self.model_dump().items()}


class AccessEntryConfig(Strict):
    """Cluster access for an IAM principal (EKS access entries, API authentication mode)."""

    principal_arn: Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")] = (
        Field(description="IAM role or user ARN.")
    )
    policy: AccessPolicy = Field(AccessPolicy.view, description="EKS access policy (cluster_admin ... view).")
    namespaces: list[str] = Field(
        default_factory=list, description="Limit the policy to these namespaces; empty = cluster."
    )


class ClusterConfig(Strict):
    """The EKS cluster."""

    kubernetes_version: Annotated[str, Field(pattern=r"^1\.\d{2}$")] = Field(
        "1.33", description="e.g. '1.33'."
    )
    endpoint_public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty = private endpoint only.",
    )
    addons: AddonVersions = Field(default_factory=lambda: AddonVersions())
    access_entries: dict[str, AccessEntryConfig] = Field(
        default_factory=dict, description="Access entries keyed by a short name."
    )
    log_retention_days: int = Field(90, description="Retention of the control-plane log group (days).")

    @field_validator("endpoint_public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for c in v:
            try:
                net = ipaddress.IPv4Network(c, strict=True)
            except ValueError as exc:
                raise ValueError(f"{c!r} is not an IPv4 CIDR ({exc})") from None
            if net.prefixlen == 0:
                raise ValueError(
                    f"{c!r} opens the API endpoint to the internet; "
                    "list your VPN/office CIDRs or leave it empty"
                )
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"{v} is not a CloudWatch Logs retention period; use e.g. 90")
        return v


def _pool_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(
            f"pool name {name!r} must be 2-32 characters of lower-case letters, digits and '-', "
            "starting with a letter"
        )
    return name


class PlatformConfig(Strict):
    """Everything one stack (one region, one environment) declares: the ``aiplat:platform`` key."""

    environment: Environment
    role: Role
    region: str = Field(description="AWS region, e.g. 'us-east-1'.")
    name_prefix: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,18}[a-z0-9]$")] = Field(
        "aiplat", description="Prefix of physical resource names (3-20 characters)."
    )
    tags: Tags
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    cluster: ClusterConfig = Field(default_factory=lambda: ClusterConfig())
    node_pools: dict[str, NodePoolConfig] = Field(default_factory=dict)

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if v not in awsdata.regions():
            import difflib

            close = difflib.get_close_matches(v, awsdata.regions(), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"{v!r} is not an AWS region{hint}")
        return v

    @field_validator("node_pools")
    @classmethod
    def _pool_names(cls, v: dict[str, NodePoolConfig]) -> dict[str, NodePoolConfig]:
        for name in v:
            _pool_name(name)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> PlatformConfig:
        if self.tags.Environment != self.environment:
            raise ValueError(
                f"tags.Environment is {self.tags.Environment.value!r} but environment is "
                f"{self.environment.value!r}; make them equal"
            )
        return self
