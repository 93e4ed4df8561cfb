"""The job file of ``aiplat train render/submit -f job.yaml``: a team's training job in its own image (or
the platform's trainer image) on the stack's training runtime. Pure (pydantic).

The file holds only the job; what it runs on (the runtime's pool, EFA devices, huge pages, the team's
namespace, queue, service account and IAM role) comes from the stack. Checks that need the stack (the team
exists, the image is in the team's repositories, the nodes fit the pool and the quota) are
``infra/jobs/rules.py``; the reference page is generated from this schema (``docs/reference/job-file.md``).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from infra.core.config import IMAGE_BY_DIGEST, Strict
from infra.queueing.config import OBJECT_NAME, TEAM_NAME
from infra.training.config import RUN_NAME

# `image: trainer`: the platform's trainer image, the one the stack's training runtime runs (by digest).
PLATFORM_TRAINER_IMAGE = "trainer"
# A variable name Kubernetes accepts for a container (C identifier; kubectl and most shells need one).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What the platform sets on every pod of a team job, and what torchrun and the Trainer set: a job's env may
# not replace them (docs/platform/job-contract.md).
RESERVED_ENV_PREFIXES = ("AIPLAT_", "PET_", "TORCHELASTIC_", "TORCH_ELASTIC_", "AWS_")
RESERVED_ENV = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "NODE_NAME",
        "POD_NAME",
        "POD_NAMESPACE",
        # the network the pool has decides these (infra/training/documents/runtime.py worker_env)
        "NCCL_NET",
        "NCCL_NET_PLUGIN",
    }
)
# The most a Trainer v2.3.0 TrainJob takes in trainer.command + trainer.args (128 each) less the launcher's
# own flags (torchrun: 6).
MAX_ARGV = 120


class Launcher(StrEnum):
    """How ``command`` runs on every node.

    ``torchrun``: under ``torchrun`` with the runtime's rendezvous (c10d on the first pod, one process per
    GPU), so ``command`` is the script and its arguments (``[train.py, --steps, '100']``, or
    ``['-m', 'pkg.train']``); ``none``: as given, as the pod's only process (it starts its own ranks from
    the Trainer's ``PET_*`` variables).
    """

    torchrun = "torchrun"
    none = "none"


class JobTimeouts(Strict):
    """How long the job may run, and how long it has to checkpoint once it is told to stop."""

    max_run_s: Annotated[int, Field(ge=60, le=2_147_483_647)] | None = Field(
        None,
        description="Seconds the job may hold its GPUs in all, summed over its admissions (Kueue's "
        "kueue.x-k8s.io/max-exec-time-seconds label: past it Kueue deactivates the workload and frees "
        "the GPUs). Default: no limit.",
    )
    active_deadline_s: Annotated[int, Field(ge=60)] | None = Field(
        None,
        description="Seconds one admission of the job may run (the TrainJob's activeDeadlineSeconds; the "
        "clock restarts when Kueue resumes it after a preemption); past it the Trainer fails the job "
        "(DeadlineExceeded), without a restart. Default: no limit.",
    )
    preemption_window_s: Annotated[int, Field(ge=10, le=3600)] | None = Field(
        None,
        description="Seconds between SIGTERM (preemption, eviction, cancel, node drain) and SIGKILL: the "
        "pods' terminationGracePeriodSeconds, given to the job as AIPLAT_PREEMPTION_WINDOW_S for a last "
        "checkpoint. Default: the training runtime's (the trainer's shutdown window plus "
        "training.runtime.grace_margin_s). Spot nodes get two minutes whatever is set here.",
    )


class JobSpec(Strict):
    """A team's training job: its image and command on the stack's training runtime, in the team's
    namespace and Kueue queue, reading and writing only the team's prefixes."""

    name: Annotated[str, Field(pattern=RUN_NAME, max_length=63)] = Field(
        description="TrainJob name: lower-case letters, digits and '-', starting with a letter. It names "
        "the job's checkpoint and output folders too."
    )
    team: Annotated[str, Field(pattern=TEAM_NAME)] = Field(
        description="Team (a key of the stack's teams) whose namespace, queue, quota, service account and "
        "IAM role the job uses."
    )
    priority: Annotated[str, Field(pattern=OBJECT_NAME)] | None = Field(
        None,
        description="WorkloadPriorityClass (a key of queueing.priority_classes); default: the team's "
        "default_priority, else queueing.default_priority.",
    )
    image: str = Field(
        description="The image every node runs: one of the team's ECR repositories by digest "
        "('<account>.dkr.ecr.<region>.amazonaws.com/<name_prefix>-<environment>/teams/<team>/<repository>"
        "@sha256:<64 hex>', the repository declared in teams.<team>.registry.repositories), or 'trainer' "
        "for the platform's trainer image."
    )
    command: Annotated[list[str], Field(min_length=1, max_length=MAX_ARGV)] = Field(
        description="argv. With launcher torchrun: the script and its arguments (torchrun starts one "
        "python per GPU with them), e.g. ['/app/train.py', '--steps', '100'] or ['-m', 'pkg.train']; with "
        "launcher none: the whole command line. Kubernetes expands $(VAR) of the pod's environment."
    )
    launcher: Launcher = Field(
        Launcher.torchrun,
        description="torchrun: run command under torchrun with the runtime's rendezvous; none: run it as "
        "given.",
    )
    nodes: Annotated[int, Field(ge=1, le=1000)] = Field(
        description="Nodes (pods) of the job, one pod per node with all of its GPUs."
    )
    gpus_per_node: Annotated[int, Field(ge=1, le=64)] | None = Field(
        None,
        description="GPUs per node (and ranks per node under torchrun). The runtime gives each pod a whole "
        "node, so this must be the pool's GPUs per node; default: that.",
    )
    pool: str | None = Field(
        None,
        description="Node pool, the Kueue ResourceFlavor of the same name; must be the training runtime's "
        "(training.runtime.pool). Default: that pool.",
    )
    env: Annotated[dict[str, str], Field(max_length=100)] = Field(
        default_factory=dict,
        description="More environment variables for every rank. The platform's (AIPLAT_*, AWS_*), "
        "torchrun's and the Trainer's (PET_*) are refused: docs/platform/job-contract.md lists what every "
        "pod already gets.",
    )
    max_restarts: Annotated[int, Field(ge=0, le=10)] | None = Field(
        None,
        description="torchrun --max-restarts: restarts of the ranks inside the pods after a rank fails "
        "(launcher torchrun only); default: training.runtime.worker_restarts. Whole-job restarts (after a "
        "pod fails: up to training.runtime.max_restarts) and resumption after a preemption are the "
        "runtime's, from the same AIPLAT_CHECKPOINT_URI.",
    )
    data: str | None = Field(
        None,
        description="Prefix inside the team's prefix of the datasets bucket the job reads "
        "(AIPLAT_DATA_URI = s3://<datasets bucket>/<team>/<data>/); default: the team's whole prefix.",
    )
    checkpoints: Annotated[str, Field(pattern=RUN_NAME, max_length=63)] | None = Field(
        None,
        description="Folder under the team's checkpoints/ (AIPLAT_CHECKPOINT_URI = s3://<checkpoints "
        "bucket>/<team>/checkpoints/<checkpoints>/); default: the job's name. Name an earlier job's to "
        "resume from where it stopped.",
    )
    timeouts: JobTimeouts = Field(default_factory=JobTimeouts)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if v == PLATFORM_TRAINER_IMAGE or IMAGE_BY_DIGEST.fullmatch(v):
            return v
        if "@" not in v:
            raise ValueError(
                f"{v!r} is not an image by digest (a tag can be pushed again, a digest cannot); push the "
                "image to one of your team's repositories and use <registry>/<repository>@sha256:<digest> "
                "(docker push prints the digest), or 'trainer' for the platform's trainer image"
            )
        raise ValueError(
            f"{v!r} is not '<registry>/<repository>@sha256:<64 hex>'; copy the digest docker push printed, "
            "or use 'trainer' for the platform's trainer image"
        )

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        if not v[0].strip():
            raise ValueError("the first item is empty; put the program or script first")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; use letters, digits and '_'")
            if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
                raise ValueError(
                    f"{name!r} is set by the platform, torchrun or the Trainer on every pod; remove it "
                    "(docs/platform/job-contract.md lists what each pod gets)"
                )
        return v

    @field_validator("data")
    @classmethod
    def _data(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = v.strip("/").split("/")
        if "://" in v or v.startswith("/") or ".." in parts or not v.strip("/"):
            raise ValueError(
                f"{v!r} must be a prefix inside the team's prefix of the datasets bucket, e.g. "
                "'shards/openwebtext' (no bucket, no leading '/', no '..')"
            )
        return v.strip("/")
