"""Typed models of the prometheus-operator custom resources we create, written from the CRDs of v0.93.1.
Source: prometheus-community/helm-charts (commit cf408a2, 2026-08-22) chart prometheus-operator-crds 31.0.1
``charts/crds/templates/crd-prometheusrules.yaml`` and ``crd-podmonitors.yaml`` (monitoring.coreos.com/v1,
annotation operator.prometheus.io/version: 0.93.1); ServiceMonitor from prometheus-operator tag v0.93.0
``example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml`` (required endpoints and
selector; scheme enum; bearerTokenFile, deprecated, still accepted). Only the fields we set are modelled
(``extra="forbid"``); required fields and enums follow the CRDs. The rule expressions themselves are
checked by promtool (tests/monitoring/test_promtool.py).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from tests.k8s.crds.base import NamespacedMetadata, Strict

CRD_VERSION = "prometheus-operator v0.93.1 CRDs"
# monitoring.coreos.com/v1 Duration: "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?
# (([0-9]+)s)?(([0-9]+)ms)?)$" (crd-podmonitors.yaml interval, crd-prometheusrules.yaml for)
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"


class Rule(Strict):
    """``spec.groups[].rules[]``: required ``expr``; exactly one of ``alert`` / ``record`` (the operator's
    validation, pkg/prometheus/promcfg rules)."""

    alert: str | None = None
    record: str | None = None
    expr: Annotated[str, Field(min_length=1)]
    for_: Annotated[str, Field(pattern=_DURATION)] | None = Field(None, alias="for")
    keep_firing_for: Annotated[str, Field(pattern=_DURATION, min_length=1)] | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}

    @model_validator(mode="after")
    def _one_kind(self) -> Rule:
        if (self.alert is None) == (self.record is None):
            raise ValueError("a rule is an alert or a record, exactly one")
        return self


class RuleGroup(Strict):
    name: Annotated[str, Field(min_length=1)]
    interval: Annotated[str, Field(pattern=_DURATION)] | None = None
    rules: list[Rule]


class PrometheusRuleSpec(Strict):
    groups: list[RuleGroup]

    @model_validator(mode="after")
    def _unique_groups(self) -> PrometheusRuleSpec:
        # CRD: groups is a list-map keyed by name (x-kubernetes-list-type: map)
        names = [g.name for g in self.groups]
        if len(names) != len(set(names)):
            raise ValueError(f"group names repeat: {names}")
        return self


class PrometheusRule(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["monitoring.coreos.com/v1"]  # noqa: N815
    kind: Literal["PrometheusRule"]
    metadata: NamespacedMetadata
    spec: PrometheusRuleSpec


class LabelSelectorRequirement(Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(Strict):
    matchLabels: dict[str, str] | None = None  # noqa: N815
    matchExpressions: list[LabelSelectorRequirement] | None = None  # noqa: N815


class NamespaceSelector(Strict):
    any: bool | None = None
    matchNames: list[str] | None = None  # noqa: N815


_ACTIONS = Literal[
    "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod", "labelmap", "LabelMap",
    "labeldrop", "LabelDrop", "labelkeep", "LabelKeep", "lowercase", "Lowercase", "uppercase", "Uppercase",
    "keepequal", "KeepEqual", "dropequal", "DropEqual",
]  # fmt: skip


class RelabelConfig(Strict):
    sourceLabels: list[Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]] | None = None  # noqa: N815
    separator: str | None = None
    targetLabel: str | None = None  # noqa: N815
    regex: str | None = None
    replacement: str | None = None
    action: _ACTIONS = "replace"

    @model_validator(mode="after")
    def _target(self) -> RelabelConfig:
        if self.action.lower() in ("replace", "hashmod", "lowercase", "uppercase") and not self.targetLabel:
            raise ValueError(f"relabel action {self.action} needs targetLabel")
        return self


class PodMetricsEndpoint(Strict):
    port: Annotated[str, Field(min_length=1)] | None = None
    portNumber: Annotated[int, Field(ge=1, le=65535)] | None = None  # noqa: N815
    path: str | None = None
    interval: Annotated[str, Field(pattern=_DURATION)] | None = None
    scrapeTimeout: Annotated[str, Field(pattern=_DURATION)] | None = None  # noqa: N815
    honorLabels: bool | None = None  # noqa: N815
    relabelings: list[RelabelConfig] | None = None


class PodMonitorSpec(Strict):
    selector: LabelSelector  # required
    namespaceSelector: NamespaceSelector | None = None  # noqa: N815
    podMetricsEndpoints: list[PodMetricsEndpoint] | None = None  # noqa: N815
    jobLabel: str | None = None  # noqa: N815


class PodMonitor(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["monitoring.coreos.com/v1"]  # noqa: N815
    kind: Literal["PodMonitor"]
    metadata: NamespacedMetadata
    spec: PodMonitorSpec


class TLSConfig(Strict):
    insecureSkipVerify: bool | None = None  # noqa: N815


class Endpoint(Strict):
    port: Annotated[str, Field(min_length=1)] | None = None
    path: str | None = None
    scheme: Literal["http", "https", "HTTP", "HTTPS"] | None = None
    interval: Annotated[str, Field(pattern=_DURATION)] | None = None
    bearerTokenFile: str | None = None  # noqa: N815
    tlsConfig: TLSConfig | None = None  # noqa: N815
    honorLabels: bool | None = None  # noqa: N815
    relabelings: list[RelabelConfig] | None = None


class ServiceMonitorSpec(Strict):
    selector: LabelSelector  # required
    endpoints: list[Endpoint]  # required
    namespaceSelector: NamespaceSelector | None = None  # noqa: N815


class ServiceMonitor(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["monitoring.coreos.com/v1"]  # noqa: N815
    kind: Literal["ServiceMonitor"]
    metadata: NamespacedMetadata
    spec: ServiceMonitorSpec


MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PrometheusRule,
    ("monitoring.coreos.com/v1", "PodMonitor"): PodMonitor,
}
