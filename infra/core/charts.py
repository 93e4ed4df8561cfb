"""Upstream Helm charts in the config: a chart pinned by repository, name and exact version.

``ChartPin`` is the base of every service installed from a chart (cluster services, monitoring, training,
inference, the FSx CSI driver); each service declares its defaults and their source. The wiring hands the
validated pin to the components as plain data (``infra.core.charts.chart_ref``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import field_validator

from infra.core.config import Strict

_VERSION = r"^v?\d+\.\d+\.\d+$"
_CHART_NAME = r"^[a-z0-9][a-z0-9-]*$"


class ChartPin(Strict):
    """Base of a service installed from an upstream chart: ``repo``, ``chart`` and ``version`` (each
    service declares its defaults and their source). Upgrading is changing ``version``."""

    repo: str
    chart: str
    version: str

    @field_validator("repo")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not re.fullmatch(r"(https://|oci://)[A-Za-z0-9.-]+(/[A-Za-z0-9._-]+)*/?", v):
            raise ValueError(
                f"{v!r} is not an https:// or oci:// chart repository; e.g. 'https://charts.jetstack.io'"
            )
        return v

    @field_validator("chart")
    @classmethod
    def _chart_name(cls, v: str) -> str:
        if not re.fullmatch(_CHART_NAME, v):
            raise ValueError(f"{v!r} is not a chart name (lower-case letters, digits, '-')")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.fullmatch(_VERSION, v):
            raise ValueError(f"{v!r} is not an exact chart version like '1.2.3' (ranges are not pinned)")
        return v


@dataclass(frozen=True)
class ChartRef:
    """An upstream Helm chart, by repository, name and pinned version (never a range, never 'latest'): the
    pin a component's Args take, as plain data (components import nothing from the model)."""

    repo: str
    chart: str
    version: str
    # values that point the chart's images at the region's image cache, merged over the release's values
    image_values: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def oci(self) -> bool:
        return self.repo.startswith("oci://")

    @property
    def chart_ref(self) -> str:
        """The chart as Helm takes it: ``oci://registry/path/<chart>``, or the name with ``repo``."""
        return f"{self.repo.rstrip('/')}/{self.chart}" if self.oci else self.chart


def chart_ref(
    pin: ChartPin, *, chart: str | None = None, image_values: Mapping[str, Any] | None = None
) -> ChartRef:
    """The config's validated pin as plain data; ``chart``: another chart released with it (same repository
    and version, e.g. Karpenter's CRD chart); ``image_values``: its images in the region's cache
    (``infra.mirror.wire.cached_chart``)."""
    return ChartRef(
        repo=pin.repo, chart=chart or pin.chart, version=pin.version, image_values=dict(image_values or {})
    )
