"""Typed model of the KEDA ScaledObject we create, written from the CRD of KEDA 2.20.2.

Source: kedacore/charts tag v2.20.2 (cbb9bb8, 2026-07-31) ``keda/templates/crds/crd-scaledobjects.yaml``
(keda.sh/v1alpha1; required: ``spec.scaleTargetRef``, ``spec.triggers``; ``scaleTargetRef.name`` minLength
1; ``triggers[].type`` and ``metadata`` (string map) required; ``fallback.failureThreshold`` and ``replicas``
required, ``fallback.behavior`` enum; the HPA ``behavior`` is Kubernetes' autoscaling/v2
HorizontalPodAutoscalerBehavior, ``stabilizationWindowSeconds`` 0-3600). Checks KEDA's admission webhook makes
on top (minReplicaCount <= maxReplicaCount; no fallback on Utilization metrics) are modelled too. Only the
fields we set are modelled (``extra="forbid"``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from tests.k8s.crds.base import NamespacedMetadata, Strict

CRD_VERSION = "KEDA v2.20.2 CRDs"


class ScaleTargetRef(Strict):
    apiVersion: str | None = None  # noqa: N815
    kind: str | None = None
    name: Annotated[str, Field(min_length=1)]


class Fallback(Strict):
    failureThreshold: Annotated[int, Field(ge=1)]  # noqa: N815
    replicas: Annotated[int, Field(ge=0)]
    behavior: (
        Literal["static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"] | None
    ) = None


class ScalingPolicy(Strict):
    """autoscaling/v2 HPAScalingPolicy: type Pods or Percent, value > 0, periodSeconds 1-1800."""

    type: Literal["Pods", "Percent"]
    value: Annotated[int, Field(gt=0)]
    periodSeconds: Annotated[int, Field(gt=0, le=1800)]  # noqa: N815


class ScalingRules(Strict):
    stabilizationWindowSeconds: Annotated[int, Field(ge=0, le=3600)] | None = None  # noqa: N815
    selectPolicy: Literal["Max", "Min", "Disabled"] | None = None  # noqa: N815
    policies: list[ScalingPolicy] = []


class Behavior(Strict):
    scaleUp: ScalingRules | None = None  # noqa: N815
    scaleDown: ScalingRules | None = None  # noqa: N815


class HpaConfig(Strict):
    name: Annotated[str, Field(min_length=1)] | None = None
    behavior: Behavior | None = None


class Advanced(Strict):
    horizontalPodAutoscalerConfig: HpaConfig | None = None  # noqa: N815


class Trigger(Strict):
    type: Annotated[str, Field(min_length=1)]
    name: str | None = None
    metricType: Literal["AverageValue", "Value", "Utilization"] | None = None  # noqa: N815
    metadata: dict[str, str]


class ScaledObjectSpec(Strict):
    scaleTargetRef: ScaleTargetRef  # noqa: N815
    minReplicaCount: Annotated[int, Field(ge=0)] | None = None  # noqa: N815
    maxReplicaCount: Annotated[int, Field(ge=1)] | None = None  # noqa: N815
    pollingInterval: Annotated[int, Field(ge=1)] | None = None  # noqa: N815
    fallback: Fallback | None = None
    advanced: Advanced | None = None
    triggers: Annotated[list[Trigger], Field(min_length=1)]

    @model_validator(mode="after")
    def _webhook(self) -> ScaledObjectSpec:
        lo, hi = self.minReplicaCount or 0, self.maxReplicaCount or 100
        if lo > hi:
            raise ValueError(f"minReplicaCount {lo} > maxReplicaCount {hi} (KEDA's webhook refuses it)")
        if self.fallback is not None and any(t.metricType == "Utilization" for t in self.triggers):
            raise ValueError("fallback is not supported with metricType Utilization")
        return self


class ScaledObject(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["keda.sh/v1alpha1"]  # noqa: N815
    kind: Literal["ScaledObject"]
    metadata: NamespacedMetadata
    spec: ScaledObjectSpec


MODELS: dict[tuple[str, str], type[BaseModel]] = {("keda.sh/v1alpha1", "ScaledObject"): ScaledObject}
