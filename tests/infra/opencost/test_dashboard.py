"""The Cost per team dashboard's queries under ``promtool test rules`` (promql_expr_test): OpenCost's series
for two teams and a namespace of no team, each team's cost per hour and its spend over the dashboard's range,
without counting kube-state-metrics' own ``kube_namespace_labels`` twice."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "infra" / "monitoring" / "dashboards" / "cost.json"
# what Grafana puts in place of the variables: every team, the range of the test
VARS = {"$team": ".+", "$namespace": ".+", "$__range": "1h"}
GIB = 1024**3


def alloc(metric: str, namespace: str, pod: str, node: str) -> str:
    """One container's allocation series as OpenCost labels it (``pkg/costmodel/metrics.go``)."""
    return f'{metric}{{namespace="{namespace}",pod="{pod}",container="c",node="{node}"}}'


SERIES = {
    # team research: two pods of one TrainJob on node n1, 4 GPUs, 8 vCPUs and 64 GiB each
    **{alloc("container_gpu_allocation", "team-research", p, "n1"): "4" for p in ("run-0", "run-1")},
    **{alloc("container_cpu_allocation", "team-research", p, "n1"): "8" for p in ("run-0", "run-1")},
    **{
        alloc("container_memory_allocation_bytes", "team-research", p, "n1"): str(64 * GIB)
        for p in ("run-0", "run-1")
    },
    # team vision: one pod, 1 GPU on node n2
    alloc("container_gpu_allocation", "team-vision", "v-0", "n2"): "1",
    alloc("container_cpu_allocation", "team-vision", "v-0", "n2"): "2",
    alloc("container_memory_allocation_bytes", "team-vision", "v-0", "n2"): str(8 * GIB),
    # a namespace of no team (Prometheus itself): not in any team's sum
    alloc("container_cpu_allocation", "monitoring", "prom-0", "n3"): "1",
    # prices that keep every sum exact in binary floating point (promtool compares samples exactly): each
    # team's hourly cost is a multiple of 12, so 12 or 13 five-minute samples of it are whole dollars
    'node_gpu_hourly_cost{node="n1",instance_type="p5.48xlarge",region="us-east-1"}': "6",
    'node_cpu_hourly_cost{node="n1",instance_type="p5.48xlarge",region="us-east-1"}': "0.75",
    'node_ram_hourly_cost{node="n1",instance_type="p5.48xlarge",region="us-east-1"}': "0.375",
    'node_gpu_hourly_cost{node="n2",instance_type="g5.xlarge",region="us-east-1"}': "12",
    'node_cpu_hourly_cost{node="n2",instance_type="g5.xlarge",region="us-east-1"}': "6",
    'node_ram_hourly_cost{node="n2",instance_type="g5.xlarge",region="us-east-1"}': "1.5",
    'node_cpu_hourly_cost{node="n3",instance_type="m6i.2xlarge",region="us-east-1"}': "0.03",
    # OpenCost's namespace labels, and kube-state-metrics' (no label_* without an allow-list)
    'kube_namespace_labels{job="opencost",namespace="team-research",label_aiplat_io_team="research"}': "1",
    'kube_namespace_labels{job="opencost",namespace="team-vision",label_aiplat_io_team="vision"}': "1",
    'kube_namespace_labels{job="opencost",namespace="monitoring"}': "1",
    'kube_namespace_labels{job="kube-state-metrics",namespace="team-research"}': "1",
}
# per hour: research 8 GPUs x 6, 16 vCPUs x 0.75, 128 GiB x 0.375; vision 1 x 12, 2 x 6, 8 x 1.5
HOURLY = {
    "A": {"research": 48.0, "vision": 12.0},
    "B": {"research": 12.0, "vision": 12.0},
    "C": {"research": 48.0, "vision": 12.0},
}


def panel(title: str) -> dict:
    (p,) = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == title]
    return p


def expr(target: dict) -> str:
    text = target["expr"]
    for var, value in VARS.items():
        text = text.replace(var, value)
    return text


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install the Debian package 'prometheus' (make test does)")
    return path


def subquery_samples(range_minutes: int, step_minutes: int) -> int:
    """Samples a ``[range:step]`` subquery holds at a step-aligned time: Prometheus 3 made ranges left-open
    (https://prometheus.io/docs/prometheus/latest/migration/: "Range selectors and lookback delta are now
    left-open"), so the sample at the range's start is out (the stack's Prometheus, v3.14); Prometheus 2 (the
    promtool of Debian bookworm, 2.42) keeps it."""
    out = subprocess.run([promtool(), "--version"], capture_output=True, text=True, timeout=60).stdout
    major = int(re.search(r"version (\d+)\.", out).group(1))  # type: ignore[union-attr]
    return range_minutes // step_minutes + (1 if major < 3 else 0)


def promtool_test(tmp_path: Path, tests: list[dict]) -> subprocess.CompletedProcess[str]:
    doc = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                # constant for three hours: every sample of the spend's subquery is there
                "input_series": [{"series": s, "values": f"{v}x180"} for s, v in SERIES.items()],
                "promql_expr_test": tests,
            }
        ],
    }
    path = tmp_path / "cost_test.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return subprocess.run(
        [promtool(), "test", "rules", path.name], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_cost_per_hour_by_team(tmp_path: Path) -> None:
    targets = {t["refId"]: t for t in panel("Cost per hour by team (USD/h)")["targets"]}
    assert set(targets) == set(HOURLY)
    tests = [
        {
            "expr": expr(targets[ref]),
            "eval_time": "2h",
            "exp_samples": [
                {"labels": f'{{label_aiplat_io_team="{team}"}}', "value": value}
                for team, value in sorted(HOURLY[ref].items())
            ],
        }
        for ref in sorted(HOURLY)
    ]
    result = promtool_test(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_spend_over_the_range_counts_each_sample_for_its_step(tmp_path: Path) -> None:
    targets = {t["refId"]: t for t in panel("Spend in the time range (USD)")["targets"]}
    assert set(targets) == set(HOURLY)
    # $__range is 1h at a constant hourly cost: each 5-minute sample counts 5 minutes
    hours = subquery_samples(60, 5) * 5 / 60
    tests = [
        {
            "expr": expr(targets[ref]),
            "eval_time": "2h",
            "exp_samples": [
                {"labels": f'{{label_aiplat_io_team="{team}"}}', "value": value * hours}
                for team, value in sorted(HOURLY[ref].items())
            ],
        }
        for ref in sorted(HOURLY)
    ]
    result = promtool_test(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_gpus_allocated_by_team(tmp_path: Path) -> None:
    (target,) = panel("GPUs allocated by team")["targets"]
    tests = [
        {
            "expr": expr(target),
            "eval_time": "2h",
            "exp_samples": [
                {"labels": '{label_aiplat_io_team="research"}', "value": 8},
                {"labels": '{label_aiplat_io_team="vision"}', "value": 1},
            ],
        }
    ]
    result = promtool_test(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr
