"""Plan-time refusals of cluster-services configs that would not work once deployed, each with its message,
refused before any resource; plus the two ways around a private endpoint (skip, and the probe's message)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra.core.instance_types import EFA_PLUGIN_CHART_VERSION
from infra.plan import runner
from infra.schema.parse import parse_platform_config
from tests.support.config_cases import (
    FACTS,
    RULES,
    SCHEMA,
    all_of,
    assert_refused,
    set_at,
    variant_name,
    without_teams,
)

REPO = Path(__file__).resolve().parents[3]

S = "aiplat:platform.cluster_services"


def _drop_system(c: dict) -> None:
    del c["node_pools"]["system"]


MINIO = all_of(
    without_teams,
    set_at("storage", {"backend": "minio", "minio": {"storage_size": "100Gi", "mode": "standalone"}}),
)

CASES = [
    (
        "prod-us-train",
        # r9g.48xlarge has EFA (AWS data) and came after the pinned chart's list
        set_at(
            "node_pools.efa-cpu",
            {
                "instance_type": "r9g.48xlarge",
                "gpu": False,
                "efa": True,
                "availability_zones": ["us-east-1a"],
                "min_size": 0,
                "desired_size": 0,
                "max_size": 1,
            },
        ),
        FACTS,
        f"{S}.efa_device_plugin.version: {EFA_PLUGIN_CHART_VERSION} does not list r9g.48xlarge in "
        "supportedInstanceLabels, so the plugin never runs there and pods asking for vpc.amazonaws.com/efa "
        "stay Pending; fix: use a chart version whose values.yaml lists the type",
    ),
    (
        "prod-us-train",
        set_at("cluster_services.efa_device_plugin.version", "v0.5.5"),
        FACTS,
        f"{S}.efa_device_plugin.version: v0.5.5 is not a chart version whose instance list is recorded",
    ),
    (
        "prod-hk-infer",
        set_at("cluster_services.karpenter.node_pools.gpu.instance_families", ["g6", "g5"]),
        FACTS,
        f"{S}.karpenter.node_pools.gpu.instance_families: only ['g5'] of ['g6', 'g5'] is offered in the "
        "VPC's "
        "zones ['ap-east-1a', 'ap-east-1b', 'ap-east-1c']; an inference pool needs two GPU families",
    ),
    (
        "prod-hk-infer",
        set_at("cluster_services.karpenter.node_pools.gpu.instance_families", ["p5"]),
        FACTS,
        f"{S}.karpenter.node_pools.gpu.instance_families: none of ['p5'] has an NVIDIA GPU type offered "
        "in the "
        "VPC's zones",
    ),
    (
        "prod-sg-infer",
        set_at("cluster_services.karpenter.node_pools.gpu.instance_families", ["g5g", "g4dn"]),
        FACTS,
        "only ['g4dn'] of ['g5g', 'g4dn'] is offered in the VPC's zones ['ap-southeast-1a', "
        "'ap-southeast-1b', "
        "'ap-southeast-1c'] (g5g offered but without an NVIDIA type of architecture amd64",
    ),
    (
        "prod-us-train",
        set_at("cluster_services.kubernetes_access", "public_cidrs"),
        RULES,
        f"{S}.kubernetes_access: public_cidrs but cluster.endpoint_public_access_cidrs is empty",
    ),
    (
        "prod-us-train",
        _drop_system,
        RULES,
        "aiplat:platform.node_pools: no pool with gpu: false and no NoSchedule/NoExecute taint",
    ),
    (
        "dev-us-train",
        all_of(MINIO, set_at("cluster_services.kubernetes_access", "skip")),
        RULES,
        f"{S}.kubernetes_access: skip but storage.backend is minio, which runs in the cluster",
    ),
    (
        "dev-us-train",
        all_of(MINIO, set_at("storage.minio.tls_issuer", "letsencrypt")),
        RULES,
        "aiplat:platform.storage.minio.tls_issuer: 'letsencrypt' is not a ClusterIssuer this stack "
        "creates, so "
        "MinIO's certificate would never be issued; fix: set it to 'aiplat-ca'",
    ),
    (
        "dev-us-train",
        all_of(MINIO, set_at("storage.minio.storage_class", "io2")),
        RULES,
        "aiplat:platform.storage.minio.storage_class: 'io2' is not a StorageClass this stack creates",
    ),
    (
        "dev-us-train",
        all_of(MINIO, set_at("storage.minio.namespace", "training")),
        RULES,
        "aiplat:platform.storage.minio.namespace: 'training' is already a system or workload namespace",
    ),
    (
        "dev-us-train",
        all_of(MINIO, set_at("cluster_services.cert_manager.enabled", False)),
        RULES,
        f"{S}.cert_manager.enabled: false but MinIO's TLS certificate comes from cert-manager",
    ),
    (
        "dev-us-train",
        set_at("cluster_services.karpenter.node_pools.gpu", {"instance_families": ["g5"]}),
        RULES,
        f"{S}.karpenter.node_pools.gpu: is also the name of a managed node pool",
    ),
    (
        "prod-hk-infer",
        set_at("tags.extra", {"kubernetes.io/cluster/other": "owned"}),
        RULES,
        "aiplat:platform.tags.extra.kubernetes.io/cluster/other: is a tag key Karpenter sets on its "
        "nodes itself",
    ),
    (
        "prod-hk-infer",
        set_at("cluster_services.karpenter.version", "1.14"),
        SCHEMA,
        f"{S}.karpenter.version: '1.14' is not an exact chart version like '1.2.3'",
    ),
    (
        "prod-us-train",
        set_at("cluster_services.cert_manager.repo", "http://charts.jetstack.io"),
        SCHEMA,
        f"{S}.cert_manager.repo: 'http://charts.jetstack.io' is not an https:// or oci:// chart repository",
    ),
]
IDS = [
    "efa-chart-lacks-type",
    "efa-chart-unknown",
    "infer-one-family",
    "karpenter-nothing-offered",
    "karpenter-arch-unfit",
    "public-access-private-endpoint",
    "no-system-pool",
    "minio-skip",
    "minio-other-issuer",
    "minio-other-class",
    "minio-namespace-taken",
    "minio-no-cert-manager",
    "karpenter-name-clash",
    "karpenter-restricted-tag",
    "karpenter-version-range",
    "chart-repo-http",
]


@pytest.mark.parametrize(("stack", "mutate", "stage", "expected"), CASES, ids=IDS)
def test_refused_before_any_resource(stack_config, monitors, stack, mutate, stage, expected) -> None:
    raw = stack_config(stack)
    mutate(raw)
    assert_refused(raw, expected, monitors, stage)


def test_efa_chart_that_lists_the_type_plans(stack_config) -> None:
    raw = stack_config("prod-us-train")
    set_at("node_pools.train.instance_type", "p5en.48xlarge")(raw)
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    (efa,) = [r for r in plan.by_type("kubernetes:helm.sh/v3:Release") if r.name == "device-plugins-efa"]
    assert efa.inputs["version"] == EFA_PLUGIN_CHART_VERSION


def test_skip_declares_no_kubernetes_object(stack_config) -> None:
    raw = stack_config("prod-us-train")
    raw["cluster_services"] = {"kubernetes_access": "skip"}
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    assert [r.type for r in plan.resources if r.type.startswith("kubernetes:")] == []
    assert plan.one("aws:eks/cluster:Cluster")  # the AWS side is all there
    assert plan.by_type("aws:iam/role:Role")


PROBE_CHILD = textwrap.dedent(
    """
    import functools, json, sys
    from infra import program
    from infra.io.stackfiles import load_stack_config, read_stack_index
    from infra.core.project import CONFIG_KEY
    from infra.plan import runner
    from infra.plan.mocks import AwsSnapshotMocks

    probed = []

    def probe(endpoint):
        probed.append(endpoint)
        return "TimeoutError: timed out (connecting to x:443, 10 s)"

    cfg = load_stack_config("prod-us-train")
    try:
        monitor = runner.run_program(
            functools.partial(program.program, stacks=read_stack_index(), endpoint_probe=probe),
            stack="prod-us-train",
            mocks=AwsSnapshotMocks(cfg.region),
            config={CONFIG_KEY: json.dumps(runner.config_as_json(cfg))},
        )
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc), "probed": probed}))
    else:
        print(json.dumps({"error": None, "probed": probed}))
    """
)


def test_unreachable_endpoint_stops_with_the_explanation() -> None:
    """What ``pulumi up`` does when the probe cannot connect: the program fails on the access gate (the first
    Kubernetes object) with the explanation. Run in a child process: a program that fails half-way leaves
    Pulumi's runtime unusable for the next plan in the same process."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE_CHILD], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["error"] == "RunError", result
    (endpoint,) = result["probed"]
    assert endpoint.startswith("https://") and endpoint.endswith(".eks.amazonaws.com")
    assert (
        f"{S}.kubernetes_access: cannot reach the cluster's Kubernetes API at {endpoint} (TimeoutError: "
        "timed "
        "out (connecting to x:443, 10 s)); the endpoint is private (cluster.endpoint_public_access_cidrs is "
        "empty), so Kubernetes resources can only be applied from inside the VPC"
    ) in result["message"]
    assert "cluster_services.kubernetes_access: skip" in result["message"]
