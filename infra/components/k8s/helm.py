"""One way to install an upstream chart: a ``helm.v3.Release`` pinned to repository, chart and version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.lib.charts import ChartRef


def chart_release(
    resource_name: str,
    *,
    release_name: str,
    chart: ChartRef,
    namespace: str,
    values: pulumi.Input[Mapping[str, Any]],
    opts: pulumi.ResourceOptions,
    skip_crds: bool = False,
) -> k8s.helm.v3.Release:
    """A Helm release of ``chart`` named ``release_name`` (fixed, so the chart's object names are stable).

    HTTPS repositories go through ``repository_opts``; OCI charts are named in full (``oci://.../chart``).
    ``atomic``: a failed install or upgrade is rolled back instead of left half-applied.
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/helm/v3/release/
    """
    return k8s.helm.v3.Release(
        resource_name,
        name=release_name,
        chart=chart.chart_ref,
        version=chart.version,
        repository_opts=None if chart.oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        namespace=namespace,
        values=values,
        skip_crds=skip_crds,
        atomic=True,
        opts=opts,
    )
