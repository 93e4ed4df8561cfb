"""Typed models of the custom resources the training side creates: the fields we set, as their CRDs
define them. Pure (pydantic), used by the program's tests, ``aiplat train render`` and the plan checks.

* ``trainer.kubeflow.org/v1alpha1`` ``ClusterTrainingRuntime`` and ``TrainJob``: the CRDs of Kubeflow
  Trainer v2.3.0 (kubeflow/trainer tag v2.3.0, 658725b, 2026-08-06,
  ``charts/kubeflow-trainer/templates/crd/trainer.kubeflow.org_{clustertrainingruntimes,trainjobs}.yaml``),
  whose JobSet template is JobSet v0.12.0's (enums and the failure-policy webhook rules of
  kubernetes-sigs/jobset v0.12.0 ``pkg/webhooks/jobset_webhook.go``).

Only what we set is modelled (``extra="forbid"``: a field the CRD lacks, or a new one we set without
modelling it, fails). The Job and pod templates inside the runtime are Kubernetes' own batch/v1 types; they
are checked against the Kubernetes schema (``infra/io/kube_validate.py``), with the batch/v1 rules the
schema cannot express checked here (pod failure policy, restart policy).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TRAINER_CRD = "Kubeflow Trainer v2.3.0 CRDs (trainer.kubeflow.org/v1alpha1)"
# TrainJob CEL rule on metadata.name (v2.3.0) and DNS labels.
_TRAINJOB_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_DNS1123 = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# JobSet failure policy rule names (jobset v0.12.0 api ruleNameFmt).
_RULE_NAME = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# What the JobSet webhook accepts in onJobFailureReasons (validOnJobFailureReasons, v0.12.0).
JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
# Reserved by the Trainer's torch plugin: a TrainJob may not set them (constants.TorchRunReservedEnvNames).
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Metadata(Strict):
    name: Annotated[str, Field(pattern=_DNS1123, max_length=253)]
    namespace: Annotated[str, Field(pattern=_DNS1123, max_length=63)] | None = None
    labels: dict[str, str] = {}


# -- ClusterTrainingRuntime ------------------------------------------------------------------------------


class TorchPolicy(Strict):
    """``mlPolicy.torch``: since v2.2 an (almost) empty struct; numProcPerNode/elasticPolicy are gone."""


class MLPolicy(Strict):
    numNodes: Annotated[int, Field(ge=1)]
    torch: TorchPolicy


class FailurePolicyRule(Strict):
    name: Annotated[str, Field(pattern=_RULE_NAME, min_length=1, max_length=128)]
    # RestartJob* actions need the JobSet RestartJob feature gate (alpha, off; the bundled chart has no
    # value to turn it on), so they are refused here.
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    onJobFailureReasons: list[Literal[JOB_FAILURE_REASONS]] = []  # type: ignore[valid-type]
    targetReplicatedJobs: list[str] = []


class FailurePolicy(Strict):
    maxRestarts: Annotated[int, Field(ge=0)]
    # InPlaceRestart is behind an alpha gate in JobSet v0.12.0
    restartStrategy: Literal["Recreate", "BlockingRecreate"] = "Recreate"
    rules: list[FailurePolicyRule] = []

    @model_validator(mode="after")
    def _unique(self) -> FailurePolicy:
        names = [r.name for r in self.rules]
        if len(names) != len(set(names)):
            raise ValueError(f"failure policy rule names are not unique: {names}")
        return self


class JobTemplateMeta(Strict):
    labels: dict[str, str]


class JobTemplate(Strict):
    metadata: JobTemplateMeta
    spec: dict[str, Any]  # batch/v1 JobSpec: Kubernetes schema + _check_job_spec


class ReplicatedJob(Strict):
    name: Annotated[str, Field(pattern=_DNS1123, max_length=63)]
    # pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs (v2.3.0): a Trainer job has 1 replica
    replicas: Literal[1] = 1
    template: JobTemplate


class JobSetSpec(Strict):
    failurePolicy: FailurePolicy
    replicatedJobs: Annotated[list[ReplicatedJob], Field(min_length=1)]

    @model_validator(mode="after")
    def _targets(self) -> JobSetSpec:
        names = {r.name for r in self.replicatedJobs}
        for rule in self.failurePolicy.rules:
            unknown = set(rule.targetReplicatedJobs) - names
            if unknown:
                raise ValueError(f"failure policy rule {rule.name} targets unknown replicated jobs {unknown}")
        return self


class JobSetTemplate(Strict):
    spec: JobSetSpec


class ClusterTrainingRuntimeSpec(Strict):
    mlPolicy: MLPolicy
    template: JobSetTemplate

    @model_validator(mode="after")
    def _trainer_job(self) -> ClusterTrainingRuntimeSpec:
        trainers = [
            r
            for r in self.template.spec.replicatedJobs
            if r.template.metadata.labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"
        ]
        if len(trainers) != 1:
            raise ValueError("exactly one replicated job must carry trainjob-ancestor-step: trainer")
        for r in self.template.spec.replicatedJobs:
            _check_job_spec(r.template.spec)
        containers = trainers[0].template.spec.get("template", {}).get("spec", {}).get("containers", [])
        if "node" not in [c.get("name") for c in containers]:
            raise ValueError("the trainer job's container must be named 'node' (Trainer v2 constants.Node)")
        return self


class ClusterTrainingRuntime(Strict):
    CRD_VERSION: ClassVar[str] = TRAINER_CRD
    apiVersion: Literal["trainer.kubeflow.org/v1alpha1"]
    kind: Literal["ClusterTrainingRuntime"]
    metadata: Metadata
    spec: ClusterTrainingRuntimeSpec


def _check_job_spec(spec: dict[str, Any]) -> None:
    """batch/v1 rules the OpenAPI schema does not carry (k8s.io/kubernetes pkg/apis/batch/validation)."""
    pfp = spec.get("podFailurePolicy")
    if pfp is None:
        return
    pod = spec.get("template", {}).get("spec", {})
    if pod.get("restartPolicy") != "Never":
        raise ValueError("podFailurePolicy needs the pod template's restartPolicy: Never")
    rules = pfp.get("rules", [])
    if len(rules) > 20:
        raise ValueError("podFailurePolicy allows at most 20 rules")
    containers = {c.get("name") for c in pod.get("containers", [])} | {
        c.get("name") for c in pod.get("initContainers", [])
    }
    for i, rule in enumerate(rules):
        if rule.get("action") not in ("FailJob", "FailIndex", "Ignore", "Count"):
            raise ValueError(f"podFailurePolicy.rules[{i}].action {rule.get('action')!r} is not supported")
        codes, conds = rule.get("onExitCodes"), rule.get("onPodConditions")
        if (codes is None) == (conds is None):
            raise ValueError(f"podFailurePolicy.rules[{i}]: exactly one of onExitCodes, onPodConditions")
        if codes is not None:
            values = codes.get("values", [])
            if codes.get("operator") not in ("In", "NotIn"):
                raise ValueError(f"podFailurePolicy.rules[{i}].onExitCodes.operator must be In or NotIn")
            if codes.get("operator") == "In" and 0 in values:
                raise ValueError(f"podFailurePolicy.rules[{i}]: value 0 cannot be used with In")
            if not values or len(values) > 255 or values != sorted(set(values)):
                raise ValueError(f"podFailurePolicy.rules[{i}].onExitCodes.values: 1-255 sorted unique codes")
            name = codes.get("containerName")
            if name is not None and name not in containers:
                raise ValueError(f"podFailurePolicy.rules[{i}]: no container named {name!r}")
        if rule.get("action") == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            raise ValueError("FailIndex needs backoffLimitPerIndex")


# -- TrainJob --------------------------------------------------------------------------------------------


class TrainJobMetadata(Strict):
    name: Annotated[str, Field(pattern=_TRAINJOB_NAME, max_length=63)]
    namespace: Annotated[str, Field(pattern=_DNS1123, max_length=63)]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class RuntimeRef(Strict):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    apiGroup: Literal["trainer.kubeflow.org"] = "trainer.kubeflow.org"
    kind: Literal["ClusterTrainingRuntime", "TrainingRuntime"] = "ClusterTrainingRuntime"


class Trainer(Strict):
    numNodes: Annotated[int, Field(ge=1)]
    # int32 since v2.2 (v2.1 took "auto"/"cpu"/"gpu" strings); optional (the torch runtime's default is
    # auto: one process per GPU); ours always set it, a Kubeflow SDK job does not
    numProcPerNode: Annotated[int, Field(ge=1)] | None = None
    image: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    args: Annotated[list[str], Field(max_length=128)] = []
    command: Annotated[list[str], Field(max_length=128)] | None = None
    env: Annotated[list[dict[str, Any]], Field(max_length=128)] = []

    @field_validator("env")
    @classmethod
    def _reserved(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        bad = sorted({e.get("name") for e in v} & set(RESERVED_ENV))
        if bad:
            raise ValueError(f"trainer.env must not set the Trainer's reserved variables {bad}")
        return v


class PodTemplateMetaPatch(Strict):
    # metav1.ObjectMeta, of which the Trainer applies only labels and annotations (RuntimePatch, v2.3.0)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PodSpecPatch(Strict):
    # PodSpecPatch (v2.3.0): the pod spec fields a runtime patch may set; we set only the grace period
    terminationGracePeriodSeconds: Annotated[int, Field(ge=0)] | None = None


class PodTemplatePatch(Strict):
    metadata: PodTemplateMetaPatch | None = None
    spec: PodSpecPatch | None = None


class JobSpecPatch(Strict):
    template: PodTemplatePatch


class JobTemplatePatch(Strict):
    spec: JobSpecPatch


class ReplicatedJobPatch(Strict):
    name: Annotated[str, Field(max_length=253)]
    template: JobTemplatePatch


class JobSetSpecPatch(Strict):
    replicatedJobs: Annotated[list[ReplicatedJobPatch], Field(max_length=100)]


class JobSetTemplatePatch(Strict):
    spec: JobSetSpecPatch


class TrainingRuntimeSpecPatch(Strict):
    template: JobSetTemplatePatch


class RuntimePatch(Strict):
    manager: Annotated[str, Field(min_length=1, max_length=253)]
    trainingRuntimeSpec: TrainingRuntimeSpecPatch


class TrainJobSpec(Strict):
    runtimeRef: RuntimeRef
    trainer: Trainer
    suspend: bool = False
    # int64, minimum 1, immutable; relative to the start, reset on resume from suspension (v2.3.0)
    activeDeadlineSeconds: Annotated[int, Field(ge=1)] | None = None
    runtimePatches: Annotated[list[RuntimePatch], Field(max_length=16)] = []

    @field_validator("runtimePatches")
    @classmethod
    def _managers(cls, v: list[RuntimePatch]) -> list[RuntimePatch]:
        managers = [p.manager for p in v]
        if len(managers) != len(set(managers)):
            raise ValueError("runtimePatches is a map keyed by manager: managers must be unique")
        return v


class TrainJob(Strict):
    CRD_VERSION: ClassVar[str] = TRAINER_CRD
    apiVersion: Literal["trainer.kubeflow.org/v1alpha1"]
    kind: Literal["TrainJob"]
    metadata: TrainJobMetadata
    spec: TrainJobSpec


MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): ClusterTrainingRuntime,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): TrainJob,
}


def embedded_jobs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The batch/v1 Jobs a ClusterTrainingRuntime's replicated jobs describe, as Job objects (for the
    Kubernetes schema check); empty for other kinds."""
    if manifest.get("kind") != "ClusterTrainingRuntime":
        return []
    out = []
    for rj in manifest.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
        template = rj.get("template", {})
        name = re.sub(r"[^a-z0-9-]", "-", f"{manifest['metadata']['name']}-{rj.get('name', '')}")[:63]
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    **({"labels": template["metadata"]["labels"]} if "metadata" in template else {}),
                },
                "spec": template.get("spec", {}),
            }
        )
    return out
