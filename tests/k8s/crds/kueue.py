"""Typed models of the Kueue custom resources we create, written from the CRDs of Kueue v0.19.2.

Source: kubernetes-sigs/kueue tag v0.19.2 (8eab687, 2026-08-20) ``config/components/crd/bases/``
``kueue.x-k8s.io_{resourceflavors,topologies,cohorts,workloadpriorityclasses,clusterqueues,localqueues}.yaml``
(version v1beta2, the storage version). Only the fields we set are modelled (``extra="forbid"``). Enums,
patterns, bounds and the CEL rules on those fields are validators: ResourceFlavor (nodeLabels at most 8,
tolerations at most 8 with effect/operator enums, a topologyName needs nodeLabels), Topology (1-16 unique
levels, kubernetes.io/hostname only last), ClusterQueue (1-16 resource groups, 1-64 covered resources and
flavors, every flavor with as many resources as covered ones, in the same order the CEL compares sizes;
borrowingLimit only with a cohort; preemption enums and the reclaim/borrow CEL), LocalQueue (clusterQueue
a DNS subdomain), WorkloadPriorityClass (value required, description at most 2048).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from tests.k8s.crds.base import ClusterMetadata, NamespacedMetadata, Strict

CRD_VERSION = "Kueue v0.19.2 CRDs"
API = "kueue.x-k8s.io/v1beta2"
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_QUALIFIED = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Name = Annotated[str, Field(pattern=_SUBDOMAIN, max_length=253)]
Quantity = Annotated[str, Field(pattern=_QUANTITY)]
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(Strict):
    key: str | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: Effect | None = None

    @model_validator(mode="after")
    def _cel(self) -> Toleration:
        if self.key is None and self.operator != "Exists":
            raise ValueError("operator must be Exists when 'key' is empty")
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("a value must be empty when 'operator' is 'Exists'")
        return self


class ResourceFlavorSpec(Strict):
    nodeLabels: Annotated[dict[str, str], Field(max_length=8)] = {}  # noqa: N815
    tolerations: Annotated[list[Toleration], Field(max_length=8)] = []
    topologyName: Name | None = None  # noqa: N815

    @model_validator(mode="after")
    def _topology(self) -> ResourceFlavorSpec:
        if self.topologyName is not None and not self.nodeLabels:
            raise ValueError("at least one nodeLabel is required when topology is set")
        return self


class ResourceFlavor(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["ResourceFlavor"]
    metadata: ClusterMetadata
    spec: ResourceFlavorSpec


class TopologyLevel(Strict):
    nodeLabel: Annotated[str, Field(pattern=_QUALIFIED, max_length=316)]  # noqa: N815


class TopologySpec(Strict):
    levels: Annotated[list[TopologyLevel], Field(min_length=1, max_length=16)]

    @model_validator(mode="after")
    def _cel(self) -> TopologySpec:
        labels = [level.nodeLabel for level in self.levels]
        if len(labels) != len(set(labels)):
            raise ValueError("levels must be unique")
        if "kubernetes.io/hostname" in labels and labels[-1] != "kubernetes.io/hostname":
            raise ValueError(
                "the kubernetes.io/hostname label can only be used at the lowest level of topology"
            )
        return self


class Topology(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["Topology"]
    metadata: ClusterMetadata
    spec: TopologySpec


class CohortSpec(Strict):
    parentName: Name | None = None  # noqa: N815


class Cohort(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["Cohort"]
    metadata: ClusterMetadata
    spec: CohortSpec


class WorkloadPriorityClass(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["WorkloadPriorityClass"]
    metadata: ClusterMetadata
    value: int
    description: Annotated[str, Field(max_length=2048)] | None = None


class ResourceQuota(Strict):
    name: str
    nominalQuota: Quantity  # noqa: N815
    borrowingLimit: Quantity | None = None  # noqa: N815
    lendingLimit: Quantity | None = None  # noqa: N815


class FlavorQuotas(Strict):
    name: Name
    resources: Annotated[list[ResourceQuota], Field(min_length=1, max_length=64)]


class ResourceGroup(Strict):
    coveredResources: Annotated[list[str], Field(min_length=1, max_length=64)]  # noqa: N815
    flavors: Annotated[list[FlavorQuotas], Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _cel(self) -> ResourceGroup:
        for f in self.flavors:
            if len(f.resources) != len(self.coveredResources):
                raise ValueError("flavors must have the same number of resources as the coveredResources")
            # Kueue's webhook (pkg/webhooks/clusterqueue_webhook.go) also wants them in the covered order
            if [r.name for r in f.resources] != self.coveredResources:
                raise ValueError(f"flavor {f.name}: resources must be the coveredResources, in order")
        return self


class LabelSelector(Strict):
    matchLabels: dict[str, str] = {}  # noqa: N815


class BorrowWithinCohort(Strict):
    policy: Literal["Never", "LowerPriority"] | None = None


class Preemption(Strict):
    reclaimWithinCohort: Literal["Never", "LowerPriority", "Any"] | None = None  # noqa: N815
    withinClusterQueue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = None  # noqa: N815
    borrowWithinCohort: BorrowWithinCohort | None = None  # noqa: N815

    @model_validator(mode="after")
    def _cel(self) -> Preemption:
        b = self.borrowWithinCohort
        if self.reclaimWithinCohort == "Never" and b is not None and b.policy != "Never":
            raise ValueError("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
        return self


class ClusterQueueSpec(Strict):
    cohortName: Name | None = None  # noqa: N815
    namespaceSelector: LabelSelector | None = None  # noqa: N815
    queueingStrategy: Literal["StrictFIFO", "BestEffortFIFO"] | None = None  # noqa: N815
    resourceGroups: Annotated[list[ResourceGroup], Field(max_length=16)] = []  # noqa: N815
    preemption: Preemption | None = None
    # set by the budget hold (infra/monitoring/budget/budget_hold.py), never by the program; default None
    stopPolicy: Literal["None", "Hold", "HoldAndDrain"] | None = None  # noqa: N815

    @model_validator(mode="after")
    def _cel(self) -> ClusterQueueSpec:
        if self.cohortName is None and any(
            r.borrowingLimit is not None for g in self.resourceGroups for f in g.flavors for r in f.resources
        ):
            raise ValueError("borrowingLimit must be nil when cohort is empty")
        return self


class ClusterQueue(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["ClusterQueue"]
    metadata: ClusterMetadata
    spec: ClusterQueueSpec


class LocalQueueSpec(Strict):
    clusterQueue: Name  # noqa: N815


class LocalQueue(Strict):
    apiVersion: Literal["kueue.x-k8s.io/v1beta2"]  # noqa: N815
    kind: Literal["LocalQueue"]
    metadata: NamespacedMetadata
    spec: LocalQueueSpec


MODELS: dict[tuple[str, str], type[BaseModel]] = {
    (API, "ResourceFlavor"): ResourceFlavor,
    (API, "Topology"): Topology,
    (API, "Cohort"): Cohort,
    (API, "WorkloadPriorityClass"): WorkloadPriorityClass,
    (API, "ClusterQueue"): ClusterQueue,
    (API, "LocalQueue"): LocalQueue,
}
