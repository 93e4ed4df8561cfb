"""Custom resources declared from their documents (the pure builders' ``apiVersion``/``kind``/``metadata``/
``spec`` dicts): the one way the components turn a CRD document into a Pulumi resource."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def custom_resource(
    name: str, doc: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """``doc`` as a CustomResource: its name, namespace and labels, and its ``spec`` as the CRD has it."""
    meta = doc["metadata"]
    return k8s.apiextensions.CustomResource(
        name,
        api_version=doc["apiVersion"],
        kind=doc["kind"],
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=meta["name"], namespace=meta.get("namespace"), labels=dict(meta.get("labels") or {})
        ),
        spec=doc["spec"],
        opts=opts,
    )
