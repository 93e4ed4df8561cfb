"""Config of object storage (S3 or MinIO), pod access and the container registry."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.core import s3names
from infra.core.config import CPU_QUANTITY, REGION_PATTERN, StorageBackend, Strict
from infra.core.teams import TEAM_REPOSITORIES
from infra.core.trainjobs import quantity_mib


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
_MEMORY = r"^[1-9][0-9]*(Mi|Gi)$"


class MinioRequests(Strict):
    """What the scheduler reserves for each MinIO pod."""

    cpu: Annotated[str, Field(pattern=CPU_QUANTITY)] = Field(
        "500m", description="CPU request per pod (Kubernetes quantity, e.g. '500m' or '2')."
    )
    memory: Annotated[str, Field(pattern=_MEMORY)] = Field(
        "2Gi",
        description="Memory request per pod (Mi or Gi). The plan refuses requests that do not fit on the "
        "pools that run MinIO (rule minio-fits-system-pools).",
    )


class MinioLimits(Strict):
    """Limits of each MinIO pod. MinIO sizes its concurrent-request pool from its memory limit."""

    memory: Annotated[str, Field(pattern=_MEMORY)] | None = Field(
        None,
        description="Memory limit per pod, at least requests.memory; unset: equal to it. MinIO admits 90% of "
        "it divided by (1 MiB + 32 KiB) x drives + 2 MiB per request: 2Gi and 4 drives, about 300 concurrent "
        "requests.",
    )
    cpu: Annotated[str, Field(pattern=CPU_QUANTITY)] | None = Field(
        None, description="CPU limit per pod; unset: none (erasure coding bursts would be throttled)."
    )


class MinioResources(Strict):
    """Requests and limits of each MinIO pod, replacing the chart's default.

    Chart 5.4.0 requests 16Gi per pod (``resources.requests.memory: 16Gi``, helm/minio/values.yaml at
    minio/minio 43a740296, "update helm release v5.4.0"): 4 pods would want 64 GiB, more than a system pool
    of two m6i.2xlarge offers. The defaults here fit beside the cluster services on two m6i.xlarge: 2Gi
    (request = limit, so the scheduler's count is what the pod may use) and half a CPU. MinIO reads its
    cgroup memory limit and sizes its request pool from it (cmd/handler-api.go and availableMemory at
    RELEASE.2024-12-18T13-15-44Z, the chart's image), so a larger store raises both together.
    """

    requests: MinioRequests = Field(default_factory=lambda: MinioRequests())
    limits: MinioLimits = Field(default_factory=lambda: MinioLimits())

    @property
    def memory_limit(self) -> str:
        """The memory limit: limits.memory, or the request when unset."""
        return self.limits.memory or self.requests.memory

    @model_validator(mode="after")
    def _limit_covers_request(self) -> MinioResources:
        limit = self.limits.memory
        if limit is not None and quantity_mib(limit) < quantity_mib(self.requests.memory):
            raise ValueError(
                f"limits.memory {self.limits.memory} is below requests.memory {self.requests.memory}; "
                "Kubernetes refuses a limit below the request: raise the limit or lower the request"
            )
        return self


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
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")] = Field(
        "minio", description="Namespace of the MinIO release."
    )
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
    resources: MinioResources = Field(
        default_factory=lambda: MinioResources(),
        description="Requests and limits per MinIO pod (replacing the chart's 16Gi memory request).",
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

    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")] = Field(
        description="Kubernetes namespace of the workload."
    )
    service_account: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")] = Field(
        description="Kubernetes service account the workload's pods run as."
    )
    prefix: Annotated[str, Field(pattern=r"^([a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*)?$")] = Field(
        description="Key prefix (no leading/trailing '/'); '' means the whole bucket."
    )


# Published models live under this prefix of the artifacts bucket (trainer/release/manifest.py:
# release/<model>/
# <version>/); only it replicates to the inference regions, only the publisher writes it, inference reads it.
RELEASE_PREFIX = "release"


def in_release(prefix: str) -> bool:
    return prefix == RELEASE_PREFIX or prefix.startswith(RELEASE_PREFIX + "/")


# What a job wants published it writes as a Hugging Face folder under this part of its owner's prefix of the
# checkpoints bucket: <team>/outputs/<job>/model/ (AIPLAT_OUTPUT_URI of the job contract), and the bundled
# trainer's converter (python -m trainer.export.hf) under <trainer prefix>/outputs/. The publisher reads these
# prefixes only, never a checkpoint.
OUTPUTS_PREFIX = "outputs"


def outputs_prefix(owner_prefix: str) -> str:
    """``<owner prefix>/outputs``: where a team's (or the trainer's) jobs leave folders to publish."""
    return f"{owner_prefix.strip('/')}/{OUTPUTS_PREFIX}"


def _trainer_access() -> PodAccessConfig:
    return PodAccessConfig(namespace="training", service_account="trainer", prefix="trainer")


# The publisher runs as its own job in its own namespace, so no TrainJob (whose runtime patches could name
# any service account of its namespace) can run with the publisher's role; its IAM role trusts only this
# service account (IRSA), and the admission policy aiplat-publisher-identity keeps the account there.
PUBLISHER_NAMESPACE = "release-publisher"
PUBLISHER_ROLE = "publisher"  # the role's purpose in its account-wide name (names.role_name)


def _publisher_access() -> PodAccessConfig:
    return PodAccessConfig(namespace=PUBLISHER_NAMESPACE, service_account="publisher", prefix=RELEASE_PREFIX)


def _inference_access() -> PodAccessConfig:
    return PodAccessConfig(namespace="inference", service_account="inference", prefix=RELEASE_PREFIX)


class StorageConfig(Strict):
    """Object storage, pod access and cross-region replication."""

    backend: StorageBackend = Field(
        StorageBackend.s3, description="s3 (buckets, IRSA) or minio (MinIO in the cluster)."
    )
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
    trainer: PodAccessConfig = Field(
        default_factory=_trainer_access,
        description="The trainer's service account and its prefix in the datasets, checkpoints and "
        "artifacts buckets (never release/): platform runs read s3://<datasets bucket>/<prefix>/<dataset>.",
    )
    publisher: PodAccessConfig = Field(
        default_factory=_publisher_access,
        description="The service account that publishes models (python -m trainer.release.publish): reads "
        "the "
        f"Hugging Face folders under <trainer prefix>/{OUTPUTS_PREFIX}/ of the checkpoints bucket and under "
        f"<team>/{OUTPUTS_PREFIX}/ of each team with teams.<team>.releases (never a checkpoint), writes "
        "release/ in the artifacts bucket (the only role the bucket policy lets write there, create-only) "
        f"and signs the manifests. Its own namespace ({PUBLISHER_NAMESPACE!r}), never the trainer's.",
    )
    inference: PodAccessConfig = Field(
        default_factory=_inference_access,
        description="The inference service account: reads release/ (or a prefix under it) only.",
    )
    minio: MinioConfig | None = Field(None, description="Required with backend: minio, refused otherwise.")

    def trainer_dataset_key(self, dataset: str) -> str:
        """The key prefix of a platform run's ``dataset`` in the datasets bucket: under the trainer's
        prefix, the only one of that bucket its role reads (the teams' are ``<team>/``)."""
        return "/".join(p for p in (self.trainer.prefix.strip("/"), dataset.strip("/")) if p)

    @field_validator("replicate_to")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for region in v:
            if not REGION_PATTERN.fullmatch(region):
                raise ValueError(f"{region!r} is not an AWS region name; use an inference stack's region")
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a region twice; list each region once")
        return v

    @model_validator(mode="after")
    def _release_prefix(self) -> StorageConfig:
        if not self.trainer.prefix or in_release(self.trainer.prefix):
            raise ValueError(
                f"trainer.prefix {self.trainer.prefix!r} would let training jobs write {RELEASE_PREFIX}/, "
                "which replicates to production inference; use a prefix of its own, e.g. 'trainer'"
            )
        if self.publisher.namespace == self.trainer.namespace:
            raise ValueError(
                f"publisher.namespace {self.publisher.namespace!r} is the trainer's: a training job there "
                f"could run as the publisher and write {RELEASE_PREFIX}/; use a namespace of its own, e.g. "
                f"{PUBLISHER_NAMESPACE!r}"
            )
        for who in ("publisher", "inference"):
            prefix = getattr(self, who).prefix
            if not in_release(prefix):
                raise ValueError(
                    f"{who}.prefix {prefix!r} is outside {RELEASE_PREFIX}/; published models live there "
                    f"only, use {RELEASE_PREFIX!r}"
                )
        return self

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

    @field_validator("repositories")
    @classmethod
    def _not_the_teams(cls, v: list[str]) -> list[str]:
        if TEAM_REPOSITORIES in v:
            raise ValueError(
                f"{TEAM_REPOSITORIES!r} is where the teams' repositories live "
                f"('<name_prefix>-<environment>/{TEAM_REPOSITORIES}/<team>/...'); name the repository "
                "otherwise"
            )
        return v
