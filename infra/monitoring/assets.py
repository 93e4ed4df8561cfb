"""The monitoring files as the program hands them to the wiring (read by ``infra/io/monitoring.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class MonitoringAssets:
    """Every alert rule file (name -> the file's data), dashboard (name -> JSON text), the dcgm-exporter
    counters file, the EFA exporter and budget hold scripts (file name, text), and each Alertmanager
    receiver's URL (receiver -> a secret ``pulumi.Output[str]``; typed loosely here because the model
    imports no Pulumi)."""

    rules: Mapping[str, Mapping[str, Any]]
    dashboards: Mapping[str, str]
    dcgm_counters: str
    efa_exporter_script: tuple[str, str]
    budget_hold_script: tuple[str, str]
    receiver_urls: Mapping[str, Any] = field(default_factory=dict)
