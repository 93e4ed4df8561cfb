"""Karpenter's config section (``cluster_services.karpenter``): the chart pin and its NodePools."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from infra.core.charts import ChartPin
from infra.core.config import NAME_RE, Strict

# Karpenter duration fields (karpenter.sh_nodepools.yaml v1.14.1: consolidateAfter, expireAfter).
_KARPENTER_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"


# disruption.budgets[].nodes (same CRD): a count or a percentage.
_KARPENTER_BUDGET = r"^((100|[0-9]{1,2})%|[0-9]+)$"


class ConsolidationPolicy(StrEnum):
    """Karpenter ``disruption.consolidationPolicy`` (karpenter.sh/v1 NodePool, v1.14.1)."""

    WhenEmpty = "WhenEmpty"
    WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
    Balanced = "Balanced"


class CapacityKind(StrEnum):
    """Karpenter ``karpenter.sh/capacity-type`` values."""

    on_demand = "on-demand"
    spot = "spot"


class Architecture(StrEnum):
    """Kubernetes ``kubernetes.io/arch`` values (images must exist for each one allowed)."""

    amd64 = "amd64"
    arm64 = "arm64"


class KarpenterPoolConfig(Strict):
    """One Karpenter GPU NodePool. Its instance types are chosen at plan time from AWS's offerings in the
    VPC's zones: every type of ``instance_families`` that is offered there, has NVIDIA GPUs, one of
    ``architectures`` and at most ``max_gpus_per_node`` GPUs. A family the region lacks is left out, so a
    region short of one family still gets capacity from the others."""

    instance_families: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]] = Field(
        min_length=1,
        description="GPU instance families Karpenter may launch (e.g. g6e, g6, g5, g4dn); the AL2023 "
        "NVIDIA AMI must support them.",
    )
    architectures: list[Architecture] = Field(
        default_factory=lambda: [Architecture.amd64],
        min_length=1,
        description="CPU architectures allowed (arm64 types such as g5g need multi-arch images).",
    )
    capacity_types: list[CapacityKind] = Field(
        default_factory=lambda: [CapacityKind.on_demand],
        min_length=1,
        description="on-demand and/or spot (Karpenter prefers spot when both are allowed).",
    )
    max_gpus_per_node: Annotated[int, Field(ge=1, le=16)] = Field(
        8, description="Largest GPU count of a type the pool may launch."
    )
    gpu_limit: Annotated[int, Field(ge=1, le=100000)] = Field(
        16, description="NodePool limit on nvidia.com/gpu: Karpenter launches no node past it."
    )
    consolidation_policy: ConsolidationPolicy = Field(
        ConsolidationPolicy.WhenEmpty,
        description="WhenEmpty (only empty nodes go: no inference pod is evicted to repack), "
        "WhenEmptyOrUnderutilized or Balanced.",
    )
    consolidate_after: Annotated[str, Field(pattern=_KARPENTER_DURATION)] = Field(
        "10m", description="How long a node must be consolidatable before Karpenter acts ('Never' to stop)."
    )
    disruption_budget_nodes: Annotated[str, Field(pattern=_KARPENTER_BUDGET)] = Field(
        "10%", description="Most nodes (count or percentage) Karpenter may disrupt at once."
    )
    expire_after: Annotated[str, Field(pattern=_KARPENTER_DURATION)] = Field(
        "720h", description="Nodes are replaced after this long (picks up new AMIs); 'Never' to keep them."
    )
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = Field(
        100, description="Root EBS volume (gp3, encrypted with the stack's EBS key) in GiB."
    )

    @field_validator("instance_families", "architectures", "capacity_types")
    @classmethod
    def _unique(cls, v: list) -> list:
        if len(set(v)) != len(v):
            raise ValueError(f"{[str(x) for x in v]} names an entry twice; name each once")
        return v


class KarpenterConfig(ChartPin):
    """Karpenter: node autoscaling for the inference and dev GPU pools (training pools with EFA and
    placement groups stay managed node groups). Installed when ``node_pools`` is not empty.

    https://karpenter.sh/docs/ (v1.14); IAM and the interruption queue follow the release's
    getting-started CloudFormation template.
    """

    repo: str = Field(
        "oci://public.ecr.aws/karpenter",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("karpenter", description="Chart name.")
    version: str = Field(
        "1.14.1",
        description="Default: aws/karpenter-provider-aws charts/karpenter 1.14.1 (tag v1.14.1, 2026-08-20); "
        "Kubernetes 1.35 needs Karpenter >= 1.9 (website v1.14 upgrading/compatibility.md).",
    )
    crd_chart: str = Field(
        "karpenter-crd",
        description="Chart of the CRDs, installed as their own release from repo at version (upgraded by "
        "helm, unlike a chart's crds/ folder). Default: charts/karpenter-crd 1.14.1.",
    )
    ami_alias: Annotated[str, Field(pattern=r"^al2023@v\d{8}$")] = Field(
        "al2023@v20260714",
        description="EC2NodeClass AMI alias: AL2023, pinned release (GPU types get the NVIDIA variant). "
        "Default: awslabs/amazon-eks-ami release v20260714 (2026-07-14), the newest whose release notes "
        "record its NVIDIA driver (580.159.03, infra/pools/ami_drivers.py: rule gpu-driver-runs-image-cuda "
        "checks it against the images' CUDA). Pinned so a new AMI is a config "
        "change, not drift ('latest' is not recommended for production by the Karpenter docs).",
    )
    replicas: Annotated[int, Field(ge=1, le=3)] = Field(2, description="Controller replicas.")
    node_pools: dict[str, KarpenterPoolConfig] = Field(
        default_factory=dict, description="GPU NodePools keyed by name; empty = no Karpenter."
    )

    @field_validator("node_pools")
    @classmethod
    def _names(cls, v: dict[str, KarpenterPoolConfig]) -> dict[str, KarpenterPoolConfig]:
        for name in v:
            if not NAME_RE.match(name):
                raise ValueError(
                    f"Karpenter pool name {name!r} must be 2-32 characters of lower-case letters, digits "
                    "and '-', starting with a letter"
                )
        return v

    @field_validator("crd_chart")
    @classmethod
    def _crd_chart(cls, v: str) -> str:
        return cls._chart_name(v)
