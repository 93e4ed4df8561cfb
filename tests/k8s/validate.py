"""Offline validation of every Kubernetes object a plan declares. Reusable by every stream.

How to use it (monitoring, training, inference engineers)::

    from tests.k8s.validate import validate_plan

    def test_my_objects_validate(plan_stack):
        plan = plan_stack("prod-us-train")
        assert validate_plan(plan) == []          # every problem is one line naming the object

* Built-in kinds (``kubernetes:core/v1:Namespace``, ``kubernetes:networking.k8s.io/v1:NetworkPolicy``,
  ``kubernetes:apps/v1:Deployment`` ...) are rebuilt from the recorded inputs (apiVersion, kind, metadata,
  spec/data/...) and validated with ``kubernetes-validate`` (pinned in the dev extra; it bundles the
  OpenAPI schemas of Kubernetes 1.25-1.37) against the cluster's minor
  (``plan.config["cluster"]["kubernetes_version"]``), in strict mode: an unknown field is an error.
  What it does not check: enum values, quantity formats, admission (PSS, webhooks), defaulting.
* Custom resources have no bundled schema: each (apiVersion, kind) needs a typed model of the fields we set
  (pydantic, ``extra="forbid"``), written from the CRD of the version we install and naming it. Models live
  in ``tests/k8s/crds/`` and are registered in ``CRD_MODELS`` below (Karpenter v1.14.1, cert-manager
  v1.21.1, prometheus-operator v0.93.1, KEDA v2.20.2, Kueue v0.19.2). A new kind (e.g. a prometheus-operator
  ``ServiceMonitor``) without a model fails validation with "no schema and no model": add
  ``tests/k8s/crds/<project>.py`` and register it here.
* Helm releases are not objects: their values are asserted where a wrong value breaks things silently
  (see ``tests/infra/services/test_wire.py``).
* Secret payloads are ``"[secret]"`` in plans; they are replaced by an empty map before validation, and
  integral numbers (doubles on the engine's wire) become integers, as in the JSON the API server receives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from infra.io.kube_validate import validate_manifest
from infra.plan.runner import SECRET, Plan, RecordedResource
from infra.training import crds as training_crds
from tests.k8s.crds import cert_manager, karpenter, keda, kueue, prometheus_operator

# (apiVersion, kind) -> model of the whole object (apiVersion, kind, metadata, spec)
CRD_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    **karpenter.MODELS,
    **cert_manager.MODELS,
    **prometheus_operator.MODELS,
    # Kubeflow Trainer v2.3.0 (ClusterTrainingRuntime, TrainJob): in the package, because `aiplat train
    # render` validates with them too
    **training_crds.MODELS,
    **keda.MODELS,
    **kueue.MODELS,
}
NO_MODEL = "no model in tests/k8s/crds (add one for a custom resource)"
# Pulumi types under "kubernetes:" that are not Kubernetes objects
NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml", "kubernetes:kustomize")


@dataclass(frozen=True)
class K8sObject:
    """A Kubernetes object as the API server would receive it, and the plan resource it came from."""

    manifest: dict[str, Any]
    resource: RecordedResource

    @property
    def ref(self) -> str:
        meta = self.manifest.get("metadata") or {}
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        return f"{self.manifest.get('apiVersion')} {self.manifest.get('kind')} {where}{meta.get('name')}"


def api_version_of(type_token: str) -> tuple[str, str]:
    """``kubernetes:networking.k8s.io/v1:NetworkPolicy`` -> (``networking.k8s.io/v1``, ``NetworkPolicy``);
    the core group is ``v1``."""
    _, group_version, kind = type_token.split(":", 2)
    group, _, version = group_version.rpartition("/")
    # a server-side apply patch (NamespacePatch) sends a partial object of its kind
    kind = kind.removesuffix("Patch")
    return (version if group == "core" else f"{group}/{version}"), kind


def _as_sent(value: Any, key: str = "") -> Any:
    """The JSON the API server receives: secret payloads emptied, integral numbers as integers (the
    engine's protobuf numbers are doubles; JSON encodes 256.0 as 256)."""
    if value == SECRET and key in ("data", "stringData"):
        return {}
    if isinstance(value, dict):
        return {k: _as_sent(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_sent(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def k8s_objects(plan: Plan) -> list[K8sObject]:
    """Every Kubernetes object of the plan (typed resources and custom resources; not Helm releases)."""
    out = []
    for r in plan.resources:
        if not r.custom or not r.type.startswith("kubernetes:") or r.type.startswith(NOT_OBJECTS):
            continue
        if r.type.startswith("pulumi:providers:"):
            continue
        api_version, kind = api_version_of(r.type)
        manifest = {k: _as_sent(v, k) for k, v in r.inputs.items()}
        manifest.setdefault("apiVersion", api_version)
        manifest.setdefault("kind", kind)
        out.append(K8sObject(manifest=manifest, resource=r))
    return out


def kubernetes_version(plan: Plan) -> str:
    return str(plan.config["cluster"]["kubernetes_version"])


def validate_object(obj: K8sObject, version: str) -> list[str]:
    """Problems of one object (empty: valid), each prefixed with the object's reference: the program's own
    validator (``infra/io/kube_validate.py``) with the models of ``CRD_MODELS``."""
    return validate_manifest(obj.manifest, version, models=CRD_MODELS, no_model=NO_MODEL)


def validate_plan(plan: Plan, *, only: Callable[[K8sObject], bool] | None = None) -> list[str]:
    """Every problem of every Kubernetes object in ``plan`` (``only``: a filter), one line each."""
    version = kubernetes_version(plan)
    problems: list[str] = []
    for obj in k8s_objects(plan):
        if only is None or only(obj):
            problems.extend(validate_object(obj, version))
    return problems


def kinds(objects: Iterable[K8sObject]) -> set[tuple[str, str]]:
    return {(o.manifest["apiVersion"], o.manifest["kind"]) for o in objects}
