"""minio-fits-system-pools: MinIO's memory requests against the system pools' allocatable memory (AWS facts
from the snapshot), directly and as a plan refusal before any resource."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.core.project import CONFIG_KEY
from infra.io import snapshot
from infra.schema.parse import parse_platform_config
from infra.stack.registry import RuleContext
from infra.storage.rules import minio_fits_system_pools
from tests.support.config_cases import FACTS, assert_refused

REPO = Path(__file__).resolve().parents[3]
M = "aiplat:platform.storage.minio.resources.requests.memory"


def _example() -> dict:
    return yaml.safe_load((REPO / "examples" / "Pulumi.minio.yaml").read_text())["config"][CONFIG_KEY]


def _findings(raw: dict) -> list[str]:
    cfg = parse_platform_config(raw)
    ctx = RuleContext(cfg=cfg, facts=snapshot.region_facts(cfg))
    return [f.one_line() for f in minio_fits_system_pools(ctx)]


def test_the_minio_example_fits() -> None:
    assert _findings(_example()) == []


def test_the_charts_old_16gi_default_would_not_fit() -> None:
    raw = _example()
    raw["storage"]["minio"]["resources"] = {"requests": {"memory": "16Gi"}}
    assert _findings(raw) == [
        f"{M}: 4 pods of 16Gi do not fit on the pools that run system pods (system: 2 x m6i.2xlarge; about "
        "29317 MiB free on the roomiest node): only 2 of 4 pods can be scheduled, the rest stay Pending and "
        "distributed MinIO never reaches write quorum; fix: set storage.minio.resources.requests.memory to "
        "at most 14658Mi, or give the system pools more nodes (desired_size) or a larger instance type "
        "(see https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable)"
    ]


def test_the_karpenter_controller_is_counted() -> None:
    raw = _example()
    raw["node_pools"]["system"]["instance_type"] = "m6i.xlarge"  # 14162 MiB allocatable each
    raw["storage"]["minio"]["resources"] = {"requests": {"memory": "7000Mi"}}  # two per node fit
    assert _findings(raw) == []
    raw["cluster_services"] = {"karpenter": {"node_pools": {"gpu": {"instance_families": ["g5"]}}}}
    (line,) = _findings(raw)  # a 1 GiB controller on each node leaves room for one MinIO pod there
    assert "about 13138 MiB free on the roomiest node after the Karpenter controller's 1024 MiB" in line
    assert "only 2 of 4 pods can be scheduled" in line


def test_standalone_counts_one_pod() -> None:
    raw = _example()
    raw["storage"]["minio"].update(mode="standalone", resources={"requests": {"memory": "28Gi"}})
    assert _findings(raw) == []
    raw["storage"]["minio"]["resources"] = {"requests": {"memory": "29Gi"}}
    (line,) = _findings(raw)
    assert "1 pod of 29Gi does not fit" in line and "write quorum" not in line
    assert "only 0 of 1 pods can be scheduled" in line and "at most 29317Mi" in line


def test_refused_before_any_resource(monitors) -> None:
    raw = _example()
    raw["storage"]["minio"]["resources"] = {"requests": {"memory": "16Gi"}}
    # the figure needs the snapshot's IPv4 addresses per interface as the program's getInstanceType answers
    # it under mocks (58 pods on m6i.2xlarge; without it nodeadm's 110 would give 28745 MiB)
    assert_refused(
        raw,
        f"{M}: 4 pods of 16Gi do not fit on the pools that run system pods (system: 2 x m6i.2xlarge; "
        "about 29317 MiB free on the roomiest node)",
        monitors,
        FACTS,
    )
