"""One way to install an upstream chart: a ``helm.v3.Release`` pinned to repository, chart and version;
and the component that is nothing but such a release (``ChartComponent``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from infra.core.charts import ChartRef
from infra.resources.options import child_options


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
    ``atomic``: a failed install or upgrade is rolled back instead of left half-applied. The chart's
    ``image_values`` (its images in the region's cache, by digest) go over ``values``.
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/helm/v3/release/
    """
    if chart.image_values:
        overlay = chart.image_values
        # merged in place where the values are a mapping, so an unknown output inside them (a role ARN on the
        # first preview) leaves the rest of the values visible to the policy pack
        values = (
            _merged(values, overlay)
            if isinstance(values, Mapping)
            else pulumi.Output.from_input(values).apply(lambda v: _merged(v, overlay))
        )
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


def _merged(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` on top, nested mappings merged (neither is changed). ``base`` may hold
    outputs: one that ``overlay`` merges into is resolved there, every other is passed on as it is."""
    out = dict(base)
    for key, value in overlay.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = _merged(current, value)
        elif isinstance(value, Mapping) and isinstance(current, pulumi.Output):
            out[key] = current.apply(lambda c, v=value: _merged(c or {}, v))
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True, kw_only=True)
class ChartArgs:
    """A pinned chart installed as release ``release_name`` in ``namespace`` with ``values``."""

    chart: ChartRef
    release_name: str
    namespace: str
    values: pulumi.Input[Mapping[str, Any]]


class ChartComponent(pulumi.ComponentResource):
    """A component that is one pinned Helm release, ``<name>-release``, and nothing else. Subclasses name
    their type token in ``TYPE`` (``aiplat:<module>:<Name>``)."""

    TYPE: ClassVar[str]
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: ChartArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        self.release = chart_release(
            f"{name}-release",
            release_name=args.release_name,
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts),
        )
        self.register_outputs({})
