"""Upstream Helm charts in the config: a chart pinned by repository, name and exact version.

``ChartPin`` is the base of every service installed from a chart (cluster services, monitoring, training,
inference, the FSx CSI driver); each service declares its defaults and their source. The wiring hands the
validated pin to the components as plain data (``infra.lib.charts.chart_ref``).
"""

from __future__ import annotations

import re

from pydantic import field_validator

from infra.model.config.base import Strict

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
