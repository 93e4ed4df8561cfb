"""Every series name an alert rule or a dashboard reads is one that something we run actually emits.

Emitted names come from the sources themselves where they are in this repository:
- dcgm-exporter: the fields of ``infra/monitoring/dcgm/counters.csv`` (the exporter names each metric after
  its field);
- the EFA exporter: what ``collect()`` writes for a sysfs tree with every counter the EFA driver defines;
- the trainer: ``tests/monitoring/emitted/trainer.txt``, checked here against its Prometheus registry so
  the list cannot drift from the code;
- vLLM: ``tests/monitoring/emitted/vllm.txt``, the sample names of every metric the pinned version's
  ``vllm/v1/metrics/loggers.py`` creates (vLLM 0.33.0 wheel, recorded by
  tests/infra/inference/data/record_vllm.py: vLLM needs CUDA torch, so it is not imported here);
- Fluent Bit (the log collector): ``emitted/fluent-bit-5.1.1.txt``, from its source at the chart's appVersion;
- OpenCost (cost allocation): ``emitted/opencost-1.120.1.txt``, from its source (the chart's appVersion);
- node-exporter, kube-state-metrics, the kubelet, Prometheus: ``emitted/upstream.yaml``, with sources.

Names are read from the PromQL with a real parser (``promql-parser``), not a regex.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from infra.logs.config import LogsConfig
from infra.logs.documents import run_dashboard as run_dashboard_doc
from infra.monitoring.documents import GENERATED_SERIES

REPO = Path(__file__).resolve().parents[2]
MON = REPO / "infra" / "monitoring"
EMITTED = Path(__file__).parent / "emitted"
# Grafana variables in dashboard queries, replaced by something PromQL parses
# The collector's series, at the appVersion of the pinned chart (checked against the config below).
FLUENT_BIT_NAMES = "fluent-bit-5.1.1.txt"
OPENCOST_NAMES = "opencost-1.120.1.txt"
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def load_efa_exporter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("efa_exporter", MON / "efa" / "efa_exporter.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_sysfs(root: Path, efa: ModuleType, devices: int = 2) -> Path:
    """/sys/class/infiniband with ``devices`` EFA devices, each with every counter the driver defines."""
    for d in range(devices):
        dev = root / "class" / "infiniband" / f"rdmap{d}s0"
        (dev / "hw_counters").mkdir(parents=True)
        for i, name in enumerate(efa.DEVICE_COUNTERS):
            (dev / "hw_counters" / name).write_text(f"{i}\n")
        port = dev / "ports" / "1"
        (port / "hw_counters").mkdir(parents=True)
        for i, name in enumerate(efa.PORT_COUNTERS):
            (port / "hw_counters" / name).write_text(f"{1000 + i}\n")
        (port / "hw_counters" / "lifespan").write_text("10\n")
        (port / "state").write_text("4: ACTIVE\n")
    return root


def names_of(lines: str) -> set[str]:
    return {ln.strip() for ln in lines.splitlines() if ln.strip() and not ln.startswith("#")}


def dcgm_names() -> set[str]:
    out = set()
    for line in (MON / "dcgm" / "counters.csv").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        field, kind, _ = (part.strip() for part in line.split(",", 2))
        if kind != "label":  # label fields become labels on the other metrics, not series
            out.add(field)
    return out


def efa_names(tmp_path: Path) -> set[str]:
    efa = load_efa_exporter()
    text = efa.collect(fake_sysfs(tmp_path, efa))
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def emitted(tmp_path: Path) -> dict[str, str]:
    """Series name -> who emits it."""
    out: dict[str, str] = {}
    for name in dcgm_names():
        out[name] = "dcgm-exporter"
    for name in efa_names(tmp_path):
        out[name] = "efa-exporter"
    for name in names_of((EMITTED / "trainer.txt").read_text()):
        out[name] = "trainer"
    for name in names_of((EMITTED / "vllm.txt").read_text()):
        out[name] = "vllm"
    for name in names_of((EMITTED / FLUENT_BIT_NAMES).read_text()):
        out[name] = "fluent-bit"
    for name in names_of((EMITTED / OPENCOST_NAMES).read_text()):
        out[name] = "opencost"
    for name in yaml.safe_load((EMITTED / "upstream.yaml").read_text()):
        out[name] = "upstream"
    # our own recording rules: the rule files' and the group each train stack generates from its config
    for path in sorted((MON / "rules").glob("*.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    out[rule["record"]] = f"rules/{path.name}"
    for name in GENERATED_SERIES:
        out[name] = "aiplat-teams (infra/monitoring/documents.py team_rules)"
    return out


def selectors(expr: str) -> set[str]:
    """Series names selected anywhere in a PromQL expression."""
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"selector without a metric name in {expr!r}"
            found.add(node.name)
            return
        if isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
            return
        for attr in ("expr", "lhs", "rhs", "param"):
            child = getattr(node, attr, None)
            if child is not None:
                walk(child)
        for arg in getattr(node, "args", None) or []:
            walk(arg)

    walk(promql_parser.parse(expr))
    return found


def rule_exprs() -> list[tuple[str, str]]:
    out = []
    for path in sorted((MON / "rules").glob("*.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                out.append((f"{path.name}:{rule.get('alert') or rule.get('record')}", rule["expr"]))
    return out


def run_dashboard() -> dict:
    """The run dashboard as infra/logs builds it (metrics next to the logs of one training run)."""
    return run_dashboard_doc(
        cluster_name="aiplat-prod-train",
        group_arns_by_name={"/g": "arn:aws:logs:us-east-1:123456789012:log-group:/g"},
    )


def dashboard_exprs() -> list[tuple[str, str]]:
    out = []
    docs = [(p.name, json.loads(p.read_text())) for p in sorted((MON / "dashboards").glob("*.json"))]
    for name, doc in [*docs, ("run (infra/logs)", run_dashboard())]:
        for panel in doc["panels"]:
            # Prometheus panels only: the run dashboard's log panel queries CloudWatch Logs
            if (panel.get("datasource") or {}).get("type", "prometheus") != "prometheus":
                continue
            for target in panel.get("targets", []):
                out.append((f"{name}:{panel['title']}", target["expr"]))
        for var in doc["templating"]["list"]:
            if var["type"] == "query":
                match = re.fullmatch(r"label_values\((.+),\s*\w+\)", var["query"]["query"])
                assert match, f"{name}: ${var['name']}: expected label_values(<selector>, <label>)"
                out.append((f"{name}:${var['name']}", match.group(1)))
    return out


def test_parser_finds_every_selector() -> None:
    """The walker sees through aggregations, binary operators, subqueries, functions and offsets."""
    expr = (
        'max by (node) (rate(a_total{x="1"}[5m]) / on (node) group_left () b) > 0 '
        "and (c offset 1h) unless histogram_quantile(0.9, sum by (le) (rate(d_bucket[$__rate_interval]))) "
        "or -max_over_time(e[30m:1m]) or label_replace(f, 'n', '$1', 'node', '(.*)') or vector(1)"
    )
    assert selectors(expr) == {"a_total", "b", "c", "d_bucket", "e", "f"}


def test_every_metric_a_rule_or_dashboard_reads_is_emitted(tmp_path: Path) -> None:
    known = emitted(tmp_path)
    unknown = {
        f"{where}: {name}"
        for where, expr in rule_exprs() + dashboard_exprs()
        for name in selectors(expr)
        if name not in known
    }
    assert unknown == set()


def test_every_rule_file_and_dashboard_reads_something() -> None:
    assert len(rule_exprs()) >= 30
    assert {p.stem for p in (MON / "dashboards").glob("*.json")} == {
        "gpu",
        "efa",
        "training",
        "inference",
        "cost",
    }
    for where, expr in dashboard_exprs():
        assert selectors(expr), where


def test_fluent_bit_names_are_of_the_pinned_app_version() -> None:
    """The recorded names are of the Fluent Bit the pinned chart runs (its appVersion, in the pin's
    description), so a chart bump makes this file be re-read from the new source."""
    pin = LogsConfig().fluent_bit
    app = re.search(r"appVersion (\d+\.\d+\.\d+)", type(pin).model_fields["version"].description or "")
    assert app and f"fluent-bit-{app.group(1)}.txt" == FLUENT_BIT_NAMES


def test_opencost_names_are_of_the_pinned_app_version() -> None:
    """The recorded names are of the OpenCost the pinned chart runs (its appVersion, in the pin's
    description), so a chart bump makes this file be re-read from the new source."""
    from infra.opencost.config import OpenCostConfig

    pin = OpenCostConfig().chart
    app = re.search(r"appVersion (\d+\.\d+\.\d+)", type(pin).model_fields["version"].description or "")
    assert app and f"opencost-{app.group(1)}.txt" == OPENCOST_NAMES


def test_the_cost_dashboard_reads_only_opencost_series(tmp_path: Path) -> None:
    known = emitted(tmp_path)
    names = {n for where, expr in dashboard_exprs() if where.startswith("cost.json") for n in selectors(expr)}
    assert names and {known[n] for n in names} == {"opencost"}


def test_the_run_dashboard_reads_trainer_series() -> None:
    names = {n for where, expr in dashboard_exprs() if where.startswith("run ") for n in selectors(expr)}
    assert names and all(n.startswith("trainer_") for n in names)


def test_counters_keep_the_default_set_and_add_what_alerts_need() -> None:
    ours = dcgm_names() | {"DCGM_FI_DRIVER_VERSION"}
    default = names_of((EMITTED / "dcgm-default-counters-4.8.2.txt").read_text())
    assert default - ours == set(), "a custom counters list replaces the default: keep every default field"
    # what the alerts need beyond the default: ECC, retired pages, violations, NVLink, XID count
    for field in (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_RETIRED_SBE",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_RETIRED_PENDING",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_EXP_XID_ERRORS_COUNT",
    ):
        assert field in ours, field


def test_counters_file_is_well_formed() -> None:
    seen = set()
    for line in (MON / "dcgm" / "counters.csv").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        assert len(parts) == 3 and all(parts), line
        assert re.fullmatch(r"DCGM_(FI|EXP)_[A-Z0-9_]+", parts[0]), line
        assert parts[1] in {"gauge", "counter", "label"}, line
        assert parts[0] not in seen, f"{parts[0]} listed twice"
        seen.add(parts[0])


def test_trainer_list_matches_the_trainer() -> None:
    torch = pytest.importorskip("torch")
    from trainer.config import MetricsConfig
    from trainer.training.metrics import Metrics

    metrics = Metrics(MetricsConfig(port_base=0), rank=0, local_rank=0, device=torch.device("cpu"))
    registered = {s.name for fam in metrics.registry.collect() for s in fam.samples}
    assert registered == names_of((EMITTED / "trainer.txt").read_text())


def test_vllm_list_is_of_the_pinned_version_and_has_the_renamed_names() -> None:
    """The list is the pinned vLLM's (infra/inference/config.py VLLM_VERSION), and holds the current names
    of series vLLM renamed (gpu_cache_usage_perc -> kv_cache_usage_perc; the V0 engine's names are gone)."""
    from infra.inference.config import VLLM_VERSION

    text = (EMITTED / "vllm.txt").read_text()
    assert text.startswith(f"# vLLM {VLLM_VERSION} (PyPI wheel vllm-{VLLM_VERSION})")
    assert "from vllm/v1/metrics/loggers.py" in text.splitlines()[1]
    names = names_of(text)
    assert {"vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting"} <= names
    assert {"vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_bucket"} <= names
    assert "vllm:gpu_cache_usage_perc" not in names and "vllm:num_preemptions" not in names
