"""Config of the images the stack builds and of training on the cluster (Kubeflow Trainer v2).

``images``: container images built from this repository and pushed to the stack's ECR repositories
(train stacks own the registry), or prebuilt images named by digest (a CI without Docker).
``training``: the Kubeflow Trainer chart, our ``ClusterTrainingRuntime`` for torch on one node pool, the
runs the stack declares, and the bandwidth check. Checks that need the pools, the AWS facts or a trainer
config file are rules (``infra/training/rules.py``).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.core.charts import ChartPin
from infra.core.config import Strict, check_image_by_digest
from infra.services.config import NAMESPACE_PATTERN

# A Kubernetes object name usable as a TrainJob name (the TrainJob CRD's CEL rule at v2.3.0:
# ``self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')`` and at most 63 characters); the
# JobSet-derived pod names are checked by the rule 'train-job-name-fits'.
RUN_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
QUANTITY = r"^[0-9]+(Ki|Mi|Gi|Ti)$"


# The build argument a Dockerfile reads to accept a base image without a digest (images/vllm/Dockerfile).
UNPINNED_BASE_ARG = "ALLOW_UNPINNED_BASE"


class ImageBuild(Strict):
    """One image: built from a Dockerfile of this repository, or prebuilt and named by digest."""

    dockerfile: str = Field(
        description="Dockerfile, relative to the repository root, e.g. 'images/trainer/Dockerfile'. Its "
        "'<Dockerfile>.dockerignore' (or the context's .dockerignore) decides what the build context holds."
    )
    context: str = Field(".", description="Build context directory, relative to the repository root.")
    build_args: dict[str, str] = Field(
        default_factory=dict, description="Docker build arguments (--build-arg); part of the image tag."
    )
    target: str | None = Field(None, description="Build stage to stop at (--target); default: the last.")
    prebuilt: str | None = Field(
        None,
        description="Use this image instead of building one: '<registry>/<repository>@sha256:<digest>'. "
        "For a `pulumi up` without a Docker engine (CI): nothing is built and workloads run this digest.",
    )
    unpinned_base: str | None = Field(
        None,
        min_length=10,
        description="Why a base image of this build is named without a digest. The plan and the build refuse "
        "a FROM without '@sha256:' (a tag can be re-pushed) unless this says why; the reason reaches the "
        f"build as {UNPINNED_BASE_ARG} and every plan warns. Pin the digest instead "
        "(build_args, e.g. VLLM_IMAGE: '<image>:<tag>@sha256:<digest>').",
    )

    def effective_build_args(self) -> dict[str, str]:
        """The build arguments the build gets: ``build_args``, and the unpinned-base reason when set."""
        args = dict(self.build_args)
        if self.unpinned_base:
            args[UNPINNED_BASE_ARG] = self.unpinned_base
        return args

    @field_validator("dockerfile", "context")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError(f"{v!r} must be a path inside the repository (relative, no '..')")
        return v

    @field_validator("prebuilt")
    @classmethod
    def _by_digest(cls, v: str | None) -> str | None:
        return check_image_by_digest(v)


class ImagesConfig(Strict):
    """Images the stack builds with pulumi-docker-build and pushes to its ECR repositories (train stacks).

    Each image is tagged with a hash of its build context (files after .dockerignore, Dockerfile, build
    arguments, platform), so a code change gives a new tag in the immutable repositories, and workloads
    refer to it by digest. `pulumi up` needs a Docker engine with BuildKit where it runs (docs/deploy.md).
    """

    build_on_preview: bool = Field(
        False,
        description="Build during `pulumi preview` too (pulumi-docker-build's default is true). Off: a "
        "preview does not build; images from `prebuilt` need no Docker at all.",
    )
    builds: dict[str, ImageBuild] = Field(
        default_factory=dict,
        description="Images by ECR repository name (each must be in registry.repositories), e.g. "
        "{trainer: {dockerfile: images/trainer/Dockerfile}}.",
    )


class TrainerChartConfig(ChartPin):
    """The Kubeflow Trainer v2 chart (controller, CRDs, and JobSet as a subchart). Upgrading is changing
    ``version``; JobSet's CRD is not upgraded by Helm (docs/platform/training.md)."""

    repo: str = Field(
        "oci://ghcr.io/kubeflow/charts",
        description="OCI registry of the chart (kubeflow/trainer charts/kubeflow-trainer/README.md, v2.3.0).",
    )
    chart: str = Field("kubeflow-trainer", description="Chart name.")
    version: str = Field(
        "2.3.0",
        description="Default: kubeflow/trainer tag v2.3.0 (658725b, 2026-08-06), Chart.yaml version 2.3.0; "
        "bundles JobSet chart 0.12.0. The runtime and TrainJobs follow the v1alpha1 CRDs of this version.",
    )
    namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "kubeflow-system", description="Namespace of the controller (the chart README's)."
    )


class RuntimeConfig(Strict):
    """Our ClusterTrainingRuntime: one pod per node with all its GPUs (and every EFA device on EFA pools)."""

    name: Annotated[str, Field(pattern=RUN_NAME, max_length=63)] = Field(
        "aiplat-torch", description="Name of the ClusterTrainingRuntime."
    )
    pool: str = Field(description="Node pool the workers run on (a GPU pool of node_pools).")
    image: str = Field("trainer", description="Image (a key of images.builds) the workers run.")
    trainer_config: str = Field(
        "trainer/configs/gpt2_124m.toml",
        description="Trainer config the runtime is sized for: its data.cache_dir is where the node's NVMe "
        "cache is mounted, its checkpoint.shutdown_window_s sets the termination grace period and its "
        "metrics.port_base the scraped ports. Runs must agree with it (rules).",
    )
    grace_margin_s: Annotated[int, Field(ge=0, le=600)] = Field(
        20,
        description="Seconds added to the trainer's shutdown window for the pod's termination grace "
        "period (launcher exit, log flush).",
    )
    hugepages_2mi: Annotated[str, Field(pattern=QUANTITY)] = Field(
        "5120Mi",
        description="hugepages-2Mi per worker on EFA pools (libfabric's EFA provider allocates its buffers "
        "from huge pages). Default from AWS's EKS EFA examples (p5.48xlarge workers request 5120Mi).",
    )
    shm_size: Annotated[str, Field(pattern=QUANTITY)] | None = Field(
        None,
        description="Size of /dev/shm (a memory-backed emptyDir) for NCCL's shared-memory transport; "
        "default: a quarter of the worker's memory limit, at most 64Gi. Counts against the memory limit.",
    )
    cache_size_gib: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Size limit of the data cache volume (GiB); default: 90% of the type's NVMe instance "
        "store (AWS facts). Required for types without instance store.",
    )
    memory_fraction: Annotated[float, Field(gt=0.1, le=0.95)] = Field(
        0.85,
        description="Share of the node's memory a worker requests (and is limited to); the rest is for "
        "kubelet reservations and the daemon sets.",
    )
    cpu_fraction: Annotated[float, Field(gt=0.1, le=0.95)] = Field(
        0.75, description="Share of the node's vCPUs a worker requests (no CPU limit)."
    )
    max_restarts: Annotated[int, Field(ge=0, le=100)] = Field(
        3,
        description="JobSet restarts of the whole run after real errors (exit codes other than 0, 2 and "
        "143); preemptions after a committed checkpoint (143) do not count.",
    )
    worker_restarts: Annotated[int, Field(ge=0, le=10)] = Field(
        1,
        description="In-pod worker restarts by the launcher (torch elastic --max-restarts) before the pod "
        "fails and the JobSet restart above takes over.",
    )


class RunConfig(Strict):
    """A training run the stack declares as a TrainJob on the runtime."""

    config: str = Field(
        description="Trainer config file in this repository (copied into the image), e.g. "
        "'trainer/configs/gpt2_124m.toml'."
    )
    nodes: Annotated[int, Field(ge=1, le=1000)] = Field(description="Nodes (pods) of the run.")
    dataset: str = Field(
        description="Shards prefix in the stack's datasets bucket (data.source becomes "
        "s3://<datasets bucket>/<dataset>)."
    )
    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="More trainer config overrides ('section.key' -> value), passed as --set.",
    )
    team: str | None = Field(
        None,
        description="Team (a key of teams) whose queue, namespace, quota and IAM role the run uses; required "
        "when the stack declares teams. Its dataset and checkpoints then live under the team's '<team>/' "
        "prefix of the datasets and checkpoints buckets.",
    )
    priority: str | None = Field(
        None,
        description="WorkloadPriorityClass (a key of queueing.priority_classes); default: the team's "
        "default_priority, else queueing.default_priority.",
    )
    suspend: bool = Field(
        True,
        description="Create the TrainJob suspended; start it with one command after `pulumi up` "
        "(docs/how-to/run-training.md). "
        "A run that starts during the first deploy would find no dataset and fail for good.",
    )

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str) -> str:
        if not v or v.startswith("/") or "://" in v:
            raise ValueError(f"{v!r} must be a key prefix inside the datasets bucket, e.g. 'shards/owt'")
        return v.strip("/")

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key.count(".") != 1:
                raise ValueError(f"override {key!r} must be 'section.key', e.g. 'train.steps'")
            if key in ("data.source", "checkpoint.uri", "data.cache_dir"):
                raise ValueError(f"override {key!r} is set by the platform; remove it")
        return v


class BandwidthCheckConfig(Strict):
    """The all-reduce bus bandwidth check over the runtime's pool (``trainer.tools.allreduce_bench``)."""

    enabled: bool = Field(True, description="Declare the check's TrainJob (suspended) in the stack.")
    nodes: Annotated[int, Field(ge=1, le=1000)] = Field(
        2, description="Nodes the check spans (2 or more measure the network, 1 only NVLink/PCIe)."
    )
    min_busbw_gbps: Annotated[float, Field(gt=0)] | None = Field(
        None,
        description="Fail below this bus bandwidth (GB/s) at the largest message; default: the instance "
        "type's threshold in infra/pools/busbw.py (with its source).",
    )
    max_bytes: Annotated[int, Field(ge=1024)] | None = Field(
        None, description="Largest message (bytes); default: the size the threshold was measured at."
    )
    team: str | None = Field(
        None,
        description="On a stack with teams: the team whose queue admits the check (its TrainJob lives in the "
        "team's namespace, held without its queue label until labelled, and its GPUs count against the "
        "team's quota, so Kueue never admits work onto nodes the check holds). Required there; unused "
        "without teams (the check runs in the trainer namespace, which no queue manages).",
    )


class TrainingConfig(Strict):
    """Training on the cluster: Kubeflow Trainer, our runtime, declared runs and the bandwidth check."""

    operator: TrainerChartConfig = Field(default_factory=TrainerChartConfig)
    runtime: RuntimeConfig
    runs: dict[str, RunConfig] = Field(
        default_factory=dict, description="Runs keyed by TrainJob name (lower-case letters, digits, '-')."
    )
    bandwidth_check: BandwidthCheckConfig = Field(default_factory=BandwidthCheckConfig)

    @field_validator("runs")
    @classmethod
    def _run_names(cls, v: dict[str, RunConfig]) -> dict[str, RunConfig]:
        for name in v:
            if not re.fullmatch(RUN_NAME, name) or len(name) > 63:
                raise ValueError(
                    f"run name {name!r} must be lower-case letters, digits and '-', starting with a letter "
                    "(a TrainJob name)"
                )
        return v

    @model_validator(mode="after")
    def _names(self) -> TrainingConfig:
        if BANDWIDTH_CHECK_NAME in self.runs:
            raise ValueError(f"run name {BANDWIDTH_CHECK_NAME!r} is the bandwidth check's; pick another")
        return self


BANDWIDTH_CHECK_NAME = "bandwidth-check"
