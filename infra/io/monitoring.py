"""The monitoring files the program deploys (alert rules, dashboards, dcgm-exporter counters, the EFA
exporter script, all under ``infra/monitoring/``) and the Pulumi secrets holding Alertmanager receiver URLs.

The only place the program reads them: the wiring gets their contents, the components never open files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import yaml

from infra.core.project import CONFIG_NAMESPACE
from infra.monitoring.assets import MonitoringAssets
from infra.schema.platform import PlatformConfig

MONITORING_DIR = Path(__file__).resolve().parents[1] / "monitoring"


def rule_file(name: str) -> dict[str, Any]:
    """``infra/monitoring/rules/<name>.yaml`` (a Prometheus rule file) as data."""
    doc = yaml.safe_load((MONITORING_DIR / "rules" / f"{name}.yaml").read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"rules/{name}.yaml is not a rule file")
    return doc


def dashboard(name: str) -> str:
    """``infra/monitoring/dashboards/<name>.json``, checked to be JSON, as text for a ConfigMap."""
    text = (MONITORING_DIR / "dashboards" / f"{name}.json").read_text()
    json.loads(text)
    return text


def dcgm_counters() -> str:
    """The dcgm-exporter counters file (``infra/monitoring/dcgm/counters.csv``)."""
    return (MONITORING_DIR / "dcgm" / "counters.csv").read_text()


EFA_EXPORTER_SCRIPT = "efa_exporter.py"


def efa_exporter_script() -> str:
    """The EFA exporter (``infra/monitoring/efa/efa_exporter.py``), run in the cluster from a ConfigMap."""
    return (MONITORING_DIR / "efa" / EFA_EXPORTER_SCRIPT).read_text()


BUDGET_HOLD_SCRIPT = "budget_hold.py"


def budget_hold_script() -> str:
    """The budget hold (``infra/monitoring/budget/budget_hold.py``), run in the cluster from a ConfigMap."""
    return (MONITORING_DIR / "budget" / BUDGET_HOLD_SCRIPT).read_text()


def receiver_url(config_key: str) -> pulumi.Output[str]:
    """The secret ``aiplat:<config_key>`` (``pulumi config set --secret``); ``pulumi up`` stops with
    Pulumi's own "missing required configuration" message, naming the key, when it is not set."""
    return pulumi.Config(CONFIG_NAMESPACE).require_secret(config_key)


def load_monitoring_assets(cfg: PlatformConfig) -> MonitoringAssets:
    """Every rule file and dashboard (the wiring picks the stack's), the counters, the exporter script and
    the URLs of the receivers ``cfg`` names."""
    return MonitoringAssets(
        rules={p.stem: rule_file(p.stem) for p in sorted((MONITORING_DIR / "rules").glob("*.yaml"))},
        dashboards={
            p.stem: dashboard(p.stem) for p in sorted((MONITORING_DIR / "dashboards").glob("*.json"))
        },
        dcgm_counters=dcgm_counters(),
        efa_exporter_script=(EFA_EXPORTER_SCRIPT, efa_exporter_script()),
        budget_hold_script=(BUDGET_HOLD_SCRIPT, budget_hold_script()),
        receiver_urls={
            name: receiver_url(key) for name, key in sorted(cfg.monitoring.receiver_secret_keys().items())
        }
        if cfg.monitoring.enabled
        else {},
    )
