"""Config of the optional FSx for Lustre shared file system (``cluster_services.fsx``, off by default).

One PERSISTENT file system in the training pool's zone, encrypted under the stack's data key, linked to the
datasets bucket by a data repository association (DRA), mounted into the training pods through a static
PersistentVolume of the FSx CSI driver. Field shapes are checked here; what depends on several fields, the
pools or the AWS facts (capacity for the deployment type, throughput tier, zone, bucket) are rules
(``infra/fsx/rules.py``), each with the AWS page that says so.

Sources: CreateFileSystem and CreateDataRepositoryAssociation in the Amazon FSx API reference (botocore's
``fsx/2018-03-01`` service model bundled with the venv's botocore: shapes ``WeeklyTime``, ``Namespace``,
``Megabytes``, ``EventType``, ``LustreAccessAuditLogLevel``); the FSx CSI driver chart from
kubernetes-sigs/aws-fsx-csi-driver at tag ``helm-chart-aws-fsx-csi-driver-1.17.0``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator

from infra.core.charts import ChartPin
from infra.core.config import Strict, check_log_retention


class LustreDeploymentType(StrEnum):
    """FSx for Lustre deployment types this platform creates: the persistent ones only. Scratch file
    systems cannot be encrypted under a customer managed key (``KmsKeyId``: "Amazon FSx for Lustre
    PERSISTENT_1 and PERSISTENT_2 deployment types only") and lose data when a file server fails."""

    PERSISTENT_1 = "PERSISTENT_1"
    PERSISTENT_2 = "PERSISTENT_2"


class LustreEvent(StrEnum):
    """Data repository events (``EventType``): what automatic import or export propagates."""

    NEW = "NEW"
    CHANGED = "CHANGED"
    DELETED = "DELETED"


class LustreLogLevel(StrEnum):
    """``LogConfiguration.Level``: which data repository events FSx logs to CloudWatch Logs."""

    DISABLED = "DISABLED"
    WARN_ONLY = "WARN_ONLY"
    ERROR_ONLY = "ERROR_ONLY"
    WARN_ERROR = "WARN_ERROR"


# ``WeeklyTime`` (d:HH:MM, d 1-7 from Monday), with the colon the API documents.
_WEEKLY_TIME = r"^[1-7]:([01]\d|2[0-3]):([0-5]\d)$"
# Mount paths in the pods: absolute, plain path characters, never '/' itself.
_MOUNT_PATH = r"^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$"
# The file system directory a DRA links: leading '/', printable characters (``Namespace``: 1-4096).
_FILE_SYSTEM_PATH = r"^/([A-Za-z0-9._-]+/?)*$"
# An S3 key prefix inside the datasets bucket: relative, no empty segments.
_KEY_PREFIX = r"^([A-Za-z0-9!_.*'()-]+/)*[A-Za-z0-9!_.*'()-]+/?$"


class FsxCsiDriverConfig(ChartPin):
    """The FSx for Lustre CSI driver (node plugin only: static PersistentVolumes need no controller and no
    AWS permissions; the node plugin mounts ``<dnsname>@tcp:/<mountname>``).

    The chart, not the EKS add-on ``aws-fsx-csi-driver``: the add-on's builds per Kubernetes minor cannot be
    read offline (no DescribeAddonVersions here, none recorded in infra/cluster/data/addon_builds.json), and
    AWS's "Deploy the FSx for Lustre driver" sets it up with an IAM role (Pod Identity) that static volumes
    do not need (https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html).
    """

    repo: str = Field(
        "https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
        description="Chart repository (docs/install.md of the driver).",
    )
    chart: str = Field("aws-fsx-csi-driver", description="Chart name.")
    version: str = Field(
        "1.17.0",
        description="Default: kubernetes-sigs/aws-fsx-csi-driver charts/aws-fsx-csi-driver/Chart.yaml 1.17.0 "
        "(app 1.9.0, image public.ecr.aws/fsx-csi-driver/aws-fsx-csi-driver:v1.9.0; tag "
        "helm-chart-aws-fsx-csi-driver-1.17.0, commit 5b22712, 2026-04-21). Values: infra/fsx/documents.py.",
    )


class FsxConfig(Strict):
    """An FSx for Lustre file system beside the datasets bucket, for the training pods (off by default).

    Created in the training pool's zone (``training.runtime.pool``), encrypted under the stack's data key,
    linked to ``s3://<datasets bucket>/<data_repository_prefix>`` at ``file_system_path``, and mounted at
    ``mount_path`` in every training pod. Only on train stacks with the S3 backend.
    """

    enabled: bool = Field(False, description="Create the file system and mount it in the training pods.")
    deployment_type: LustreDeploymentType = Field(
        LustreDeploymentType.PERSISTENT_2,
        description="PERSISTENT_2 (SSD, 125/250/500/1000 MB/s/TiB) or PERSISTENT_1 (SSD, 50/100/200). "
        "Scratch types are not offered: they cannot use the stack's KMS key.",
    )
    storage_capacity_gib: Annotated[int, Field(ge=1200, le=2147483647)] = Field(
        1200,
        description="Storage capacity (GiB): 1200, 2400 or a multiple of 2400 (SSD; rule "
        "fsx-storage-capacity).",
    )
    per_unit_storage_throughput: int = Field(
        125,
        description="Throughput per TiB of storage (MB/s/TiB): PERSISTENT_2 125, 250, 500 or 1000; "
        "PERSISTENT_1 50, 100 or 200 (rule fsx-throughput-tier).",
    )
    file_system_type_version: Literal["2.12", "2.15"] = Field(
        "2.15",
        description="Lustre version. 2.10 is not offered: PERSISTENT_2 refuses it and data repository "
        "associations need 2.12 or later.",
    )
    availability_zone: str | None = Field(
        None,
        description="Zone of the file system (one subnet): one of the training pool's zones; default the "
        "pool's zone when it has exactly one (EFA pools always do).",
    )
    data_repository_prefix: Annotated[str, Field(pattern=_KEY_PREFIX)] | None = Field(
        None,
        description="Key prefix in the datasets bucket the file system links to (e.g. 'shards'); "
        "unset: the whole bucket.",
    )
    file_system_path: Annotated[str, Field(pattern=_FILE_SYSTEM_PATH, max_length=4096)] = Field(
        "/datasets",
        description="Directory on the file system linked to the bucket prefix (leading '/'). '/' links the "
        "whole file system and allows no second association.",
    )
    import_events: list[LustreEvent] = Field(
        default_factory=lambda: [LustreEvent.NEW, LustreEvent.CHANGED, LustreEvent.DELETED],
        description="Automatic import: bucket changes that reach the file system ([] = none; new "
        "objects then appear only after an import task).",
    )
    export_events: list[LustreEvent] = Field(
        default_factory=list,
        description="Automatic export: file system changes written back to the bucket. Default none: the "
        "datasets bucket stays read-only to the cluster, as the trainer's IAM role has it.",
    )
    import_metadata_on_create: bool = Field(
        True, description="Import the listing of the linked prefix when the association is created."
    )
    imported_file_chunk_size_mib: Annotated[int, Field(ge=1, le=512000)] | None = Field(
        None, description="Stripe size of imported files (MiB, 1-512000); default FSx's 1024."
    )
    weekly_maintenance_start_time: Annotated[str, Field(pattern=_WEEKLY_TIME)] | None = Field(
        None, description="Weekly maintenance start, 'd:HH:MM' UTC (d: 1 = Monday); default: FSx picks."
    )
    log_level: LustreLogLevel = Field(
        LustreLogLevel.WARN_ERROR,
        description="Data repository events logged to the stack's FSx log group (/aws/fsx/<stack>), "
        "encrypted under the logs key; DISABLED: no log group.",
    )
    log_retention_days: int = Field(90, description="Retention of the FSx log group (days).")
    mount_path: Annotated[str, Field(pattern=_MOUNT_PATH, max_length=512)] = Field(
        "/fsx", description="Where the file system is mounted in the training pods."
    )
    read_only: bool = Field(
        True,
        description="Mount it read-only in the training pods (imported files belong to root, and without "
        "export_events nothing written there reaches S3).",
    )
    runs_read_datasets: bool = Field(
        True,
        description="Runs whose dataset lies under data_repository_prefix read it from the mount "
        "(data.source = <mount_path><file_system_path>/...) instead of downloading it from S3.",
    )
    csi_driver: FsxCsiDriverConfig = Field(default_factory=lambda: FsxCsiDriverConfig())

    @field_validator("import_events", "export_events")
    @classmethod
    def _unique_events(cls, v: list[LustreEvent]) -> list[LustreEvent]:
        if len(set(v)) != len(v):
            raise ValueError(f"{[str(e) for e in v]} names an event twice; name each once")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)

    @field_validator("mount_path")
    @classmethod
    def _mount_path(cls, v: str) -> str:
        if ".." in v.split("/") or re.search(r"//", v):
            raise ValueError(f"{v!r} must be a plain absolute path (no '..', no '//')")
        return v

    @field_validator("file_system_path")
    @classmethod
    def _fs_path(cls, v: str) -> str:
        if "//" in v or ".." in v.split("/"):
            raise ValueError(f"{v!r} must be a plain path on the file system, e.g. '/datasets'")
        return v

    @property
    def repository_prefix(self) -> str:
        """The linked key prefix without slashes at either end ('' = the whole bucket)."""
        return (self.data_repository_prefix or "").strip("/")

    @property
    def directory(self) -> str:
        """``file_system_path`` without a trailing slash ('' for the root)."""
        return self.file_system_path.rstrip("/")
