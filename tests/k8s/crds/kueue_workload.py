"""A typed model of Kueue's ``Workload`` (``kueue.x-k8s.io/v1beta2``, the storage version), the fields
``aiplat train list`` reads, from the CRD of kubernetes-sigs/kueue tag v0.19.2 (8eab687, 2026-08-20)
``config/components/crd/bases/kueue.x-k8s.io_workloads.yaml`` and ``apis/kueue/v1beta2/workload_types.go``.

The test fixtures that stand for what the API server returns are validated with it, so ``list`` is tested
on Workloads the real API could hold (metav1.Condition's required fields and patterns included).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

CRD_VERSION = "Kueue v0.19.2 CRD kueue.x-k8s.io/v1beta2 Workload"
_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# metav1.Condition (the CRD's conditions items: every field required)
_COND_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_COND_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class OwnerReference(Strict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    blockOwnerDeletion: bool = False


class Metadata(Strict):
    name: Annotated[str, Field(pattern=_NAME, max_length=253)]
    namespace: Annotated[str, Field(pattern=_LABEL, max_length=63)]
    uid: str = ""
    creationTimestamp: Annotated[str, Field(pattern=_TIME)] | None = None
    labels: dict[str, str] = {}
    ownerReferences: list[OwnerReference] = []


class PriorityClassRef(Strict):
    group: Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
    kind: Literal["WorkloadPriorityClass", "PriorityClass"]
    name: Annotated[str, Field(pattern=_NAME, min_length=1, max_length=253)]


class PodSet(Strict):
    name: Annotated[str, Field(pattern=_LABEL, max_length=63)] = "main"
    count: Annotated[int, Field(ge=0)] = 1
    template: dict[str, Any]


class Spec(Strict):
    podSets: Annotated[list[PodSet], Field(min_length=1, max_length=8)]
    queueName: Annotated[str, Field(pattern=_NAME, max_length=253)] | None = None
    priorityClassRef: PriorityClassRef | None = None
    priority: int | None = None
    active: bool = True


class Condition(Strict):
    type: Annotated[str, Field(pattern=_COND_TYPE, max_length=316)]
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, Field(pattern=_COND_REASON, min_length=1, max_length=1024)]
    message: Annotated[str, Field(max_length=32768)]
    lastTransitionTime: Annotated[str, Field(pattern=_TIME)]
    observedGeneration: Annotated[int, Field(ge=0)] | None = None


class PodSetAssignment(Strict):
    name: Annotated[str, Field(pattern=_LABEL, max_length=63)]
    flavors: dict[str, str] = {}
    resourceUsage: dict[str, str] = {}
    count: Annotated[int, Field(ge=0)] | None = None


class Admission(Strict):
    clusterQueue: Annotated[str, Field(pattern=_NAME, max_length=253)]
    podSetAssignments: Annotated[list[PodSetAssignment], Field(max_length=8)]


class Status(Strict):
    conditions: Annotated[list[Condition], Field(max_length=16)] = []
    admission: Admission | None = None


class Workload(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]
    kind: Literal["Workload"]
    metadata: Metadata
    spec: Spec
    status: Status = Status()


MODELS: dict[tuple[str, str], type[BaseModel]] = {("kueue.x-k8s.io/v1beta2", "Workload"): Workload}
