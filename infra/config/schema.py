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

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from infra import awsdata
from infra.lib import s3names

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


class StorageBackend(StrEnum):
    """Where datasets, checkpoints and artifacts live.

    ``s3``: S3 buckets (SSE-KMS, versioned, TLS only) plus IRSA roles for the pods.
    ``minio``: the MinIO Helm chart in the cluster, for deployments that do not want S3. Trainer and
    inference reach either through the same S3 settings (endpoint, region, credentials from the environment).
    """

    s3 = "s3"
    minio = "minio"


class BucketPurpose(StrEnum):
    """The buckets a stack owns, one per purpose."""

    datasets = "datasets"
    checkpoints = "checkpoints"
    artifacts = "artifacts"
    access_logs = "access-logs"


def _bucket_name(v: str) -> str:
    problems = s3names.project_problems(v)
    if problems:
        raise ValueError(f"bucket name {v!r} {' and '.join(problems)}; use e.g. {s3names.suggest(v)!r}")
    return v


BucketName = Annotated[str, AfterValidator(_bucket_name)]


class LifecycleConfig(Strict):
    """S3 lifecycle rules; every value is a number of days.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-transition-general-considerations.html
    """

    abort_incomplete_multipart_days: Annotated[int, Field(ge=1, le=365)] = Field(
        7, description="Days after which unfinished multipart uploads are aborted (every bucket)."
    )
    checkpoint_noncurrent_ia_days: Annotated[int, Field(le=3650)] = Field(
        30,
        description="Days after a checkpoint version becomes noncurrent before it moves to STANDARD_IA "
        "(S3 requires at least 30).",
    )
    checkpoint_noncurrent_expire_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        90,
        description="Days after which noncurrent checkpoint versions are deleted "
        "(more than checkpoint_noncurrent_ia_days).",
    )
    noncurrent_expire_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        365, description="Days after which noncurrent versions in datasets and artifacts are deleted."
    )
    access_log_expire_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        365, description="Days access-log objects are kept."
    )

    @field_validator("checkpoint_noncurrent_ia_days")
    @classmethod
    def _ia_minimum(cls, v: int) -> int:
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-transition-general-considerations.html
        if v < 30:
            raise ValueError(
                f"{v} days is too early: S3 moves noncurrent versions to STANDARD_IA after 30 days "
                "at the earliest; use 30 or more"
            )
        return v

    @model_validator(mode="after")
    def _order(self) -> LifecycleConfig:
        if self.checkpoint_noncurrent_expire_days <= self.checkpoint_noncurrent_ia_days:
            raise ValueError(
                f"checkpoint_noncurrent_expire_days {self.checkpoint_noncurrent_expire_days} is not after "
                f"checkpoint_noncurrent_ia_days {self.checkpoint_noncurrent_ia_days}; make it larger"
            )
        return self


class MinioMode(StrEnum):
    """``standalone``: one pod, one volume. ``distributed``: erasure coded over ``replicas`` pods (>= 4)."""

    standalone = "standalone"
    distributed = "distributed"


_QUANTITY = re.compile(r"^[1-9][0-9]*(Mi|Gi|Ti|Pi)$")


class MinioConfig(Strict):
    """The MinIO chart (https://charts.min.io/, chart ``minio``), only with ``backend: minio``."""

    storage_size: str = Field(
        description="Size of each MinIO volume as a Kubernetes quantity, e.g. '500Gi'. Required: there is no "
        "safe default for a data store."
    )
    chart_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        "5.4.0", description="Pinned version of the MinIO Helm chart."
    )
    chart_repo: str = Field("https://charts.min.io/", description="Helm repository of the chart.")
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")] = "minio"
    mode: MinioMode = Field(
        MinioMode.distributed, description="standalone (1 pod) or distributed (erasure coded)."
    )
    replicas: Annotated[int, Field(ge=1, le=32)] = Field(4, description="Pods in distributed mode (>= 4).")
    storage_class: str | None = Field(
        None, description="StorageClass of the volumes; the cluster default if unset."
    )
    tls_issuer: str = Field(
        "aiplat-ca",
        description="cert-manager ClusterIssuer that signs MinIO's TLS certificate "
        "(cert-manager must be installed in the cluster).",
    )

    @field_validator("storage_size")
    @classmethod
    def _size(cls, v: str) -> str:
        if not _QUANTITY.match(v):
            raise ValueError(
                f"{v!r} is not a storage quantity; use a whole number with Mi, Gi, Ti or Pi, e.g. '500Gi'"
            )
        return v

    @model_validator(mode="after")
    def _replicas(self) -> MinioConfig:
        if self.mode == MinioMode.distributed and self.replicas < 4:
            raise ValueError(
                f"replicas is {self.replicas} but distributed mode needs at least 4; "
                "set replicas >= 4 or mode: standalone"
            )
        return self


class PodAccessConfig(Strict):
    """Which Kubernetes service account gets a pod role, and the key prefix it may use."""

    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    service_account: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")]
    prefix: Annotated[str, Field(pattern=r"^([a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*)?$")] = Field(
        description="Key prefix (no leading/trailing '/'); '' means the whole bucket."
    )


def _trainer_access() -> PodAccessConfig:
    return PodAccessConfig(namespace="training", service_account="trainer", prefix="trainer")


def _inference_access() -> PodAccessConfig:
    return PodAccessConfig(namespace="inference", service_account="inference", prefix="trainer")


class StorageConfig(Strict):
    """Object storage, pod access and cross-region replication."""

    backend: StorageBackend = StorageBackend.s3
    bucket_names: dict[BucketPurpose, BucketName] = Field(
        default_factory=dict,
        description="Override of a bucket's name. Default '<name_prefix>-<environment>-<region>-<purpose>' "
        "(no account id, so a second account needs overrides or another name_prefix).",
    )
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    replicate_to: list[str] = Field(
        default_factory=list,
        description="Train stacks only: inference regions (regions of this project's infer stacks) "
        "that get a replica of the artifacts bucket, under a key of their own, and of the ECR images.",
    )
    source_stack: str | None = Field(
        None,
        description="Infer stacks only: the train stack whose artifacts replicate here "
        "(read via StackReference, so all stacks must share one state backend).",
    )
    trainer: PodAccessConfig = Field(default_factory=_trainer_access)
    inference: PodAccessConfig = Field(default_factory=_inference_access)
    minio: MinioConfig | None = Field(None, description="Required with backend: minio, refused otherwise.")

    @field_validator("replicate_to")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for region in v:
            if region not in awsdata.regions():
                raise ValueError(f"{region!r} is not an AWS region; use an inference stack's region")
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a region twice; list each region once")
        return v

    @model_validator(mode="after")
    def _backend(self) -> StorageConfig:
        if self.backend == StorageBackend.minio and self.minio is None:
            raise ValueError(
                "backend is 'minio' but there is no minio section; "
                "add storage.minio with at least storage_size, e.g. '500Gi'"
            )
        if self.backend == StorageBackend.s3 and self.minio is not None:
            raise ValueError(
                "minio section given but backend is 's3'; remove storage.minio or set backend: minio"
            )
        if self.backend == StorageBackend.minio and self.replicate_to:
            raise ValueError(
                "replicate_to needs backend 's3' (S3 replication); remove replicate_to or use s3"
            )
        return self

    def bucket_name(self, purpose: BucketPurpose, prefix: str, environment: str, region: str) -> str:
        """The configured or derived name of a bucket of this stack."""
        return self.bucket_names.get(purpose) or s3names.default_bucket_name(
            prefix, environment, region, purpose.value
        )


class RegistryConfig(Strict):
    """ECR repositories of train stacks (images replicate to storage.replicate_to)."""

    repositories: list[Annotated[str, Field(pattern=r"^[a-z0-9]+([._-][a-z0-9]+)*$")]] = Field(
        default_factory=lambda: ["trainer", "inference"],
        description="Repository names under '<name_prefix>/<environment>/'.",
    )
    untagged_expire_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        14, description="Days after which untagged images are expired."
    )
    keep_images: Annotated[int, Field(ge=1, le=10000)] = Field(
        100, description="How many images per repository the lifecycle policy keeps."
    )


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
    storage: StorageConfig = Field(default_factory=StorageConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)

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
        if self.role == Role.infer and self.storage.replicate_to:
            raise ValueError(
                "storage.replicate_to is set on an infer stack; replication is configured on the "
                "train stack that owns the artifacts, remove it here"
            )
        if self.role == Role.train and self.storage.source_stack:
            raise ValueError(
                "storage.source_stack is set on a train stack; only infer stacks read a train "
                "stack's outputs, remove it"
            )
        if self.region in self.storage.replicate_to:
            raise ValueError(f"storage.replicate_to includes the stack's own region {self.region}; remove it")
        return self

    def resource_prefix(self) -> str:
        """``<name_prefix>-<environment>``: prefix of physical names shared by a stack's components."""
        return f"{self.name_prefix}-{self.environment.value}"
