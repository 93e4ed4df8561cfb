"""The stack config schema.

A stack file holds data only; everything it may say is declared here and in the section modules beside
this one (``network``, ``compute``, ``storage``, ``security``, ``services``, ``monitoring``, ``training``,
``inference``, ``fsx``; shared pieces in ``base`` and ``charts``), with units, defaults and what conflicts
with what.
Unknown keys are rejected (``parse.py`` adds the did-you-mean hint). Checks that need AWS facts
(is this type offered in that AZ?) are rules (each capability's ``rules.py``) and run before any resource is
created.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.cluster.config import AccessEntryConfig, AccessPolicy, AddonVersions, ClusterConfig, SupportType
from infra.core.config import (
    LOG_RETENTION_DAYS,
    NAME_RE,
    REGION_PATTERN,
    Environment,
    KubernetesAccess,
    Role,
    Strict,
)
from infra.core.naming import StackNames
from infra.fsx.config import FsxConfig
from infra.inference.config import InferenceConfig
from infra.karpenter.config import KarpenterConfig
from infra.logs.config import LogsConfig
from infra.mirror.config import ImageCacheConfig
from infra.monitoring.config import BUDGET_RETENTION_S, MonitoringConfig, duration_seconds
from infra.network.config import (
    DEFAULT_INTERFACE_ENDPOINTS,
    NAT_FREE_ENDPOINTS,
    FlowLogsConfig,
    FlowLogTraffic,
    NatStrategy,
    NetworkConfig,
)
from infra.opencost.config import OpenCostConfig
from infra.pools.config import (
    CapacityReservationConfig,
    CapacityType,
    NodePoolConfig,
    Placement,
    TaintConfig,
    TaintEffect,
    check_pool_name,
)
from infra.queueing.config import (
    RESERVED_TEAM_NAMES,
    TEAM_SERVICE_ACCOUNT,
    QueueingConfig,
    TeamConfig,
    check_team_names,
    check_teams_config,
)
from infra.services.config import (
    NAMESPACE_PATTERN,
    CertManagerConfig,
    EfaDevicePluginConfig,
    LoadBalancerControllerConfig,
    MetricsServerConfig,
    NvidiaDevicePluginConfig,
    StorageClassConfig,
)
from infra.storage.config.security import AuditConfig, ObjectLockMode, SecurityConfig, TlsVersion, TrailMode
from infra.storage.config.storage import (
    BucketPurpose,
    LifecycleConfig,
    MinioConfig,
    MinioMode,
    PodAccessConfig,
    RegistryConfig,
    StorageBackend,
    StorageConfig,
)
from infra.training.config import (
    BandwidthCheckConfig,
    ImageBuild,
    ImagesConfig,
    RunConfig,
    RuntimeConfig,
    TrainerChartConfig,
    TrainingConfig,
)

__all__ = [
    "DEFAULT_INTERFACE_ENDPOINTS",
    "LOG_RETENTION_DAYS",
    "NAME_RE",
    "NAT_FREE_ENDPOINTS",
    "AccessEntryConfig",
    "AccessPolicy",
    "AddonVersions",
    "AuditConfig",
    "BandwidthCheckConfig",
    "BucketPurpose",
    "CapacityReservationConfig",
    "CapacityType",
    "ClusterConfig",
    "ClusterServicesConfig",
    "Environment",
    "FlowLogTraffic",
    "FlowLogsConfig",
    "InferenceConfig",
    "KubernetesAccess",
    "ImageBuild",
    "ImagesConfig",
    "LifecycleConfig",
    "MinioConfig",
    "MinioMode",
    "NatStrategy",
    "NetworkConfig",
    "NodePoolConfig",
    "ObjectLockMode",
    "Placement",
    "PlatformConfig",
    "PodAccessConfig",
    "RegistryConfig",
    "Role",
    "RunConfig",
    "RuntimeConfig",
    "SecurityConfig",
    "StorageBackend",
    "StorageConfig",
    "Strict",
    "SupportType",
    "TaintConfig",
    "TaintEffect",
    "TlsVersion",
    "TrailMode",
    "Tags",
    "TrainerChartConfig",
    "TrainingConfig",
]


class Tags(Strict):
    """Cost-allocation tags, applied to every taggable resource through the provider's default tags."""

    CostCenter: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        description="Cost center billed for the stack (a cost-allocation tag)."
    )
    Project: Annotated[str, Field(min_length=1, max_length=256)] = Field(description="Project name tag.")
    Owner: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        description="Team or person to contact about the resources."
    )
    Environment: Annotated[Environment, Field(description="Must equal the stack's environment.")]
    Workload: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        description="What runs here, e.g. 'training' or 'inference'."
    )
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


class ClusterServicesConfig(Strict):
    """Cluster services: namespaces and identities, device plugins, storage (the default StorageClass and
    the optional FSx for Lustre file system), load balancers, metrics, certificates and node autoscaling,
    applied through the cluster's Kubernetes provider."""

    kubernetes_access: KubernetesAccess = Field(
        KubernetesAccess.in_vpc,
        description="How pulumi up reaches the Kubernetes API: in_vpc, public_cidrs or skip (see "
        "KubernetesAccess).",
    )
    monitoring_namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "monitoring", description="Namespace of the monitoring stack (node and GPU exporters, Prometheus)."
    )
    storage_class: StorageClassConfig = Field(default_factory=lambda: StorageClassConfig())
    nvidia_device_plugin: NvidiaDevicePluginConfig = Field(default_factory=lambda: NvidiaDevicePluginConfig())
    efa_device_plugin: EfaDevicePluginConfig = Field(default_factory=lambda: EfaDevicePluginConfig())
    load_balancer_controller: LoadBalancerControllerConfig = Field(
        default_factory=lambda: LoadBalancerControllerConfig()
    )
    metrics_server: MetricsServerConfig = Field(default_factory=lambda: MetricsServerConfig())
    cert_manager: CertManagerConfig = Field(default_factory=lambda: CertManagerConfig())
    karpenter: KarpenterConfig = Field(default_factory=lambda: KarpenterConfig())
    fsx: FsxConfig = Field(
        default_factory=lambda: FsxConfig(),
        description="Optional FSx for Lustre file system linked to the datasets bucket, mounted in the "
        "training pods (off by default).",
    )


class PlatformConfig(Strict):
    """Everything one stack (one region, one environment) declares: the ``aiplat:platform`` key."""

    environment: Environment = Field(
        description="dev or prod; prod turns on deletion protection of data, keys and the cluster."
    )
    role: Role = Field(
        description="train (the DDP trainer, owns buckets and images) or infer (serves models)."
    )
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
    cluster_services: ClusterServicesConfig = Field(default_factory=lambda: ClusterServicesConfig())
    monitoring: MonitoringConfig = Field(default_factory=lambda: MonitoringConfig())
    logs: LogsConfig = Field(default_factory=lambda: LogsConfig())
    opencost: OpenCostConfig = Field(default_factory=lambda: OpenCostConfig())
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    image_cache: ImageCacheConfig = Field(
        default_factory=lambda: ImageCacheConfig(),
        description="ECR pull through cache rules of the stack's region: the charts' images come from them "
        "by digest (infra/mirror/digests.py, docs/how-to/image-cache.md).",
    )
    training: TrainingConfig | None = Field(
        None, description="Training on the cluster (train stacks): Kubeflow Trainer, runtime, runs."
    )
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    inference: InferenceConfig | None = Field(
        None, description="Infer stacks: the model server, its autoscaling and HTTPS (None: nothing served)."
    )
    teams: dict[str, TeamConfig] = Field(
        default_factory=dict,
        description="Train stacks: the teams that share the GPUs through Kueue, keyed by team name (a DNS "
        "label): namespace, queue, GPU quota per pool, IAM role (docs/platform/queueing.md). "
        "Empty: no Kueue.",
    )
    queueing: QueueingConfig = Field(
        default_factory=lambda: QueueingConfig(),
        description="Kueue (installed when teams are declared): chart, priority classes, cohort, "
        "all-or-nothing admission, topology-aware scheduling, KueueViz.",
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        # The shape only; whether AWS has the region is the rule 'region-known' (infra/stack/regions.py).
        if not REGION_PATTERN.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region name; use e.g. 'us-east-1'")
        return v

    @field_validator("node_pools")
    @classmethod
    def _pool_names(cls, v: dict[str, NodePoolConfig]) -> dict[str, NodePoolConfig]:
        for name in v:
            check_pool_name(name)
        return v

    @field_validator("teams")
    @classmethod
    def _team_names(cls, v: dict[str, TeamConfig]) -> dict[str, TeamConfig]:
        return check_team_names(v)

    @model_validator(mode="after")
    def _teams(self) -> PlatformConfig:
        if not self.teams:
            for name, run in self.training.runs.items() if self.training else ():
                if run.team is not None:
                    raise ValueError(
                        f"training.runs.{name}.team is {run.team!r} but the stack declares no teams; "
                        "declare it under teams or drop it"
                    )
            return self
        if self.role != Role.train or self.training is None:
            raise ValueError(
                "teams is set on a stack without training; teams queue TrainJobs on train stacks, remove it"
            )
        if self.storage.backend != StorageBackend.s3:
            raise ValueError(
                "teams need storage.backend s3 (each team's pods get an IAM role on its own bucket "
                "prefixes); use the s3 backend or remove teams"
            )
        if self.storage.trainer.service_account != TEAM_SERVICE_ACCOUNT:
            raise ValueError(
                f"storage.trainer.service_account is {self.storage.trainer.service_account!r}, but the "
                "training runtime's pods run as it in the team namespaces too, where the account is "
                f"{TEAM_SERVICE_ACCOUNT!r}; set it to {TEAM_SERVICE_ACCOUNT!r} or remove teams"
            )
        reserved = {
            self.storage.trainer.namespace,
            self.storage.publisher.namespace,
            self.cluster_services.monitoring_namespace,
            self.queueing.kueue.namespace,
            self.training.operator.namespace,
            "default",
            "kube-system",
            "kube-public",
            "kube-node-lease",
        }
        # A team's IAM role reaches '<team>/' of the datasets and checkpoints buckets: a team named after a
        # platform prefix would reach the platform's keys there (the trainer's datasets and checkpoints,
        # the publisher's releases, the FSx-linked datasets).
        prefixes = [
            self.storage.trainer.prefix,
            self.storage.publisher.prefix,
            self.storage.inference.prefix,
            self.cluster_services.fsx.repository_prefix,
        ]
        reserved_names = set(RESERVED_TEAM_NAMES) | {
            p.strip("/").split("/")[0] for p in prefixes if p.strip("/")
        }
        check_teams_config(
            self.teams, self.queueing, reserved_namespaces=reserved, reserved_names=reserved_names
        )
        receivers = self.monitoring.alertmanager.receivers
        retention = self.monitoring.prometheus.retention
        budgeted = sorted(name for name, team in self.teams.items() if team.budget is not None)
        if budgeted and not self.monitoring.enabled:
            raise ValueError(
                f"teams.{budgeted[0]}.budget needs monitoring.enabled: true (the spend, its alerts and the "
                "budget hold read Prometheus); enable monitoring or remove the budget"
            )
        if budgeted and duration_seconds(retention) < BUDGET_RETENTION_S:
            raise ValueError(
                f"teams.{budgeted[0]}.budget needs monitoring.prometheus.retention of at least 32d (the "
                f"month-to-date spend reads 31 days back); it is {retention}: raise it to 32d or more"
            )
        for name, team in self.teams.items():
            if team.receiver is not None and team.receiver not in receivers:
                raise ValueError(
                    f"teams.{name}.receiver is {team.receiver!r}, which is not a key of "
                    f"monitoring.alertmanager.receivers {sorted(receivers)}; declare it there or drop it"
                )
        for name, run in self.training.runs.items():
            if run.team is None or run.team not in self.teams:
                raise ValueError(
                    f"training.runs.{name}.team is {run.team!r}; with teams declared every run is queued: "
                    f"set it to one of {sorted(self.teams)}"
                )
            if run.priority is not None and run.priority not in self.queueing.priority_classes:
                raise ValueError(
                    f"training.runs.{name}.priority is {run.priority!r}; use one of "
                    f"{sorted(self.queueing.priority_classes)} (queueing.priority_classes)"
                )
            allowed = self.teams[run.team].allowed_priorities(self.queueing.default_priority)
            if run.priority is not None and run.priority not in allowed:
                raise ValueError(
                    f"training.runs.{name}.priority is {run.priority!r}, which team {run.team!r} may not use "
                    f"(teams.{run.team}.priority_classes: {allowed}); pick one of them or list it there"
                )
        return self

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
        if self.role == Role.infer and (self.images.builds or self.training is not None):
            raise ValueError(
                "images.builds or training is set on an infer stack; images are built and pushed by the "
                "train stack that owns the registry (they replicate to the inference regions), remove them"
            )
        if self.role == Role.train and self.inference is not None:
            raise ValueError(
                "inference is set on a train stack; models are served from the infer stacks (role: infer), "
                "remove it here"
            )
        if self.region in self.storage.replicate_to:
            raise ValueError(f"storage.replicate_to includes the stack's own region {self.region}; remove it")
        return self

    @property
    def protected(self) -> bool:
        """``security.protect``, or on for prod and off for dev when unset."""
        if self.security.protect is not None:
            return self.security.protect
        return self.environment is Environment.prod

    @property
    def cluster_deletion_protection(self) -> bool:
        """``cluster.deletion_protection``, or on for prod and off for dev when unset."""
        if self.cluster.deletion_protection is not None:
            return self.cluster.deletion_protection
        return self.environment is Environment.prod

    @property
    def names(self) -> StackNames:
        """The stack's name prefixes (``infra/core/naming.py``)."""
        return StackNames(self.name_prefix, self.environment.value, self.role.value, self.region)

    def bucket_name(self, purpose: BucketPurpose) -> str:
        """The name of this stack's ``purpose`` bucket: ``storage.bucket_names`` or the derived one."""
        return self.storage.bucket_name(purpose, self.name_prefix, self.environment.value, self.region)
