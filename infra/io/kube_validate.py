"""Offline validation of the Kubernetes objects the training side builds.

Built-in kinds are validated with ``kubernetes-validate`` (the Kubernetes OpenAPI schemas of 1.25-1.37
bundled in the package; reading them is why this lives in the I/O layer) in strict mode against the
cluster's minor. Custom resources are checked against the typed models of the fields we set
(``infra/training/crds.py``, naming their CRD version); the Jobs a ClusterTrainingRuntime describes are
also validated as batch/v1 Jobs. What it does not check: enum values and quantity formats in the
Kubernetes schema, admission (Pod Security, webhooks), defaulting. One line per problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes_validate
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError
from pydantic import BaseModel
from pydantic import ValidationError as ModelError

from infra.training.crds import MODELS, embedded_jobs


def _ref(m: dict[str, Any]) -> str:
    meta = m.get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{m.get('apiVersion')} {m.get('kind')} {where}{meta.get('name')}"


def _schema(manifest: dict[str, Any], version: str, ref: str, no_model: str) -> list[str]:
    try:
        kubernetes_validate.validate(manifest, version, strict=True)
    except ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        return [f"{ref} (Kubernetes {version}): {path}: {exc.message}"]
    except SchemaNotFoundError:
        return [f"{ref}: no Kubernetes {version} schema and {no_model}"]
    return []


def validate_manifest(
    manifest: dict[str, Any],
    kubernetes_version: str,
    *,
    models: Mapping[tuple[str, str], type[BaseModel]] = MODELS,
    no_model: str = "no model of this custom resource",
) -> list[str]:
    """Every problem of one object (empty: valid), each prefixed with the object's reference.

    ``models``: (apiVersion, kind) -> typed model of the custom resources known (the tests add those of
    the charts' CRDs); ``no_model``: what the problem says of a kind with neither schema nor model."""
    ref = _ref(manifest)
    model = models.get((manifest.get("apiVersion", ""), manifest.get("kind", "")))
    if model is None:
        return _schema(manifest, kubernetes_version, ref, no_model)
    problems: list[str] = []
    try:
        model.model_validate(manifest)
    except ModelError as exc:
        crd = getattr(model, "CRD_VERSION", "")
        problems += [
            f"{ref} ({crd}): {'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        ]
    for job in embedded_jobs(manifest):
        job_ref = f"{ref} replicated job {job['metadata']['name']}"
        problems += _schema(job, kubernetes_version, job_ref, no_model)
    return problems
