"""The Kueue documents: chart values against the chart's values.yaml, the manager configuration against
Kueue's Configuration type, the Kueue objects against the CRD models, the teams' IAM policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.queueing import documents as q
from infra.queueing.names import team_names
from infra.queueing.wire import kueue_chart_values
from infra.schema.parse import parse_platform_config
from tests.conftest import with_value
from tests.k8s.crds import kueue as models

UPSTREAM_VALUES = Path(__file__).parent / "upstream" / "kueue-0.19.2.values.yaml"
# The json names of kubernetes-sigs/kueue apis/config/v1beta2/configuration_types.go at v0.19.2
# (Configuration with ControllerManager inlined; WaitForPodsReady; RequeuingStrategy; Integrations).
CONFIGURATION_FIELDS = {
    "apiVersion", "kind", "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector",
    "internalCertManagement", "waitForPodsReady", "clientConnection", "integrations", "multiKueue",
    "fairSharing", "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies",
    "visibilityServer", "webhook", "leaderElection", "metrics", "health", "pprofBindAddress", "controller",
    "tls",
}  # fmt: skip
WAIT_FIELDS = {"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
REQUEUE_FIELDS = {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}
# pkg/controller/jobs/trainjob/trainjob_controller.go (v0.19.2): FrameworkName
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"


def _paths(doc: Any, prefix: str = "") -> set[str]:
    """Every leaf path of ``doc`` (lists are leaves: the chart takes them whole)."""
    if isinstance(doc, dict) and doc:
        return {p for k, v in doc.items() for p in _paths(v, f"{prefix}{k}.")}
    return {prefix.rstrip(".")}


@pytest.fixture
def prod(stack_config) -> dict:
    return stack_config("prod-us-train")


@pytest.mark.parametrize("kueueviz", [False, True])
def test_chart_values_are_keys_of_the_chart(prod: dict, kueueviz: bool) -> None:
    cfg = parse_platform_config(with_value(prod, "queueing.kueueviz.enabled", kueueviz))
    values = kueue_chart_values(cfg)
    upstream = _paths(yaml.safe_load(UPSTREAM_VALUES.read_text()))
    assert _paths(values) - upstream == set()
    assert values["enableKueueViz"] is kueueviz


def test_kueueviz_is_reachable_by_port_forward_only(prod: dict) -> None:
    off = kueue_chart_values(parse_platform_config(prod))
    assert off["enableKueueViz"] is False and "kueueViz" not in off  # off by default
    on = kueue_chart_values(parse_platform_config(with_value(prod, "queueing.kueueviz.enabled", True)))
    viz = on["kueueViz"]
    assert viz["frontend"]["ingress"]["enabled"] is False
    assert viz["backend"]["ingress"]["enabled"] is False
    # the browser reaches the backend through the forwarded local port, and the backend allows that origin
    assert viz["backend"]["ingress"]["host"] == f"localhost:{q.KUEUEVIZ_BACKEND_PORT}"
    origins = {e["name"]: e["value"] for e in viz["backend"]["env"]}["KUEUEVIZ_ALLOWED_ORIGINS"]
    assert origins == f"http://localhost:{q.KUEUEVIZ_FRONTEND_PORT}"


def test_manager_config_is_a_kueue_configuration(prod: dict) -> None:
    cfg = parse_platform_config(prod)
    config = json.loads(kueue_chart_values(cfg)["managerConfig"]["controllerManagerConfigYaml"])
    assert set(config) <= CONFIGURATION_FIELDS
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert TRAINJOB_FRAMEWORK in config["integrations"]["frameworks"]
    wait = config["waitForPodsReady"]
    assert set(wait) <= WAIT_FIELDS and set(wait["requeuingStrategy"]) <= REQUEUE_FIELDS
    w = cfg.queueing.wait_for_pods_ready
    assert wait == {
        "timeout": w.timeout,
        "blockAdmission": w.block_admission,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": w.backoff.base_delay_s,
            "backoffMaxSeconds": w.backoff.max_delay_s,
            "backoffLimitCount": w.backoff.limit_count,
        },
    }
    # jobs without a queue name are Kueue's in the team namespaces (labelled aiplat.io/team) only
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "aiplat.io/team", "operator": "Exists"}]
    }


def test_wait_for_pods_ready_can_be_switched_off(prod: dict) -> None:
    cfg = parse_platform_config(with_value(prod, "queueing.wait_for_pods_ready.enabled", False))
    config = json.loads(kueue_chart_values(cfg)["managerConfig"]["controllerManagerConfigYaml"])
    assert "waitForPodsReady" not in config


def _flavor(**kw: Any) -> q.FlavorSpec:
    base = dict(
        name="train",
        node_labels={"aiplat.io/pool": "train"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        capacity_type="capacity_block",
        gpus_per_node=8,
        vcpus_per_node=192,
        memory_mib_per_node=2097152,
        efa_per_node=32,
        hugepages_mib_per_node=5120,
        topology=q.TOPOLOGY_NAME,
    )
    return q.FlavorSpec(**{**base, **kw})


def test_flavor_topology_and_priority_class_validate() -> None:
    flavor = q.resource_flavor(_flavor())
    models.ResourceFlavor.model_validate(flavor)
    assert flavor["metadata"]["labels"]["aiplat.io/capacity-type"] == "capacity-block"
    assert flavor["spec"]["topologyName"] == q.TOPOLOGY_NAME
    topo = q.topology()
    models.Topology.model_validate(topo)
    assert [lvl["nodeLabel"] for lvl in topo["spec"]["levels"]][-1] == "kubernetes.io/hostname"
    models.WorkloadPriorityClass.model_validate(q.priority_class("dev", 100, "debugging"))
    models.Cohort.model_validate(q.cohort("gpus"))


def test_cluster_queue_quotas_follow_whole_nodes() -> None:
    names = team_names("research")
    cq = q.cluster_queue(
        names,
        [q.TeamQuota(flavor=_flavor(), gpus=16, borrowing_limit=8, lending_limit=8)],
        cohort_name="gpus",
        reclaim_within_cohort="Any",
        within_cluster_queue="LowerPriority",
    )
    models.ClusterQueue.model_validate(cq)
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "vpc.amazonaws.com/efa",
        "hugepages-2Mi",
    ]
    res = {r["name"]: r for r in group["flavors"][0]["resources"]}
    # 16 GPUs = 2 nodes of 8: their vCPUs, memory, EFA devices and huge pages
    assert {k: r["nominalQuota"] for k, r in res.items()} == {
        "cpu": "384",
        "memory": "4194304Mi",
        "nvidia.com/gpu": "16",
        "vpc.amazonaws.com/efa": "64",
        "hugepages-2Mi": "10240Mi",
    }
    assert res["nvidia.com/gpu"]["borrowingLimit"] == "8" and res["cpu"]["borrowingLimit"] == "192"
    assert cq["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-research"}
    }
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    models.LocalQueue.model_validate(q.local_queue(names))


def test_no_efa_no_efa_resources() -> None:
    flavor = _flavor(efa_per_node=0, hugepages_mib_per_node=0, topology=None)
    cq = q.cluster_queue(
        team_names("ml"),
        [q.TeamQuota(flavor=flavor, gpus=8)],
        cohort_name="gpus",
        reclaim_within_cohort="Never",
        within_cluster_queue="Never",
    )
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    models.ClusterQueue.model_validate(cq)


def test_the_crd_models_refuse_what_the_crds_refuse() -> None:
    with pytest.raises(ValueError, match="kubernetes.io/hostname label can only be used at the lowest"):
        models.Topology.model_validate(
            {
                **q.topology(),
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a/b"}]},
            }
        )
    cq = q.cluster_queue(
        team_names("ml"),
        [q.TeamQuota(flavor=_flavor(), gpus=8, borrowing_limit=8)],
        cohort_name="gpus",
        reclaim_within_cohort="Never",
        within_cluster_queue="Never",
    )
    del cq["spec"]["cohortName"]
    with pytest.raises(ValueError, match="borrowingLimit must be nil when cohort is empty"):
        models.ClusterQueue.model_validate(cq)


def test_team_policy_reaches_only_its_prefix() -> None:
    doc = q.team_policy(
        team="research",
        datasets_arn="arn:aws:s3:::d",
        checkpoints_arn="arn:aws:s3:::c",
        kms_key_arns=["arn:aws:kms:us-east-1:1:key/k"],
        account_id="1",
        region="us-east-1",
    )
    objects = sorted(
        r
        for s in doc["Statement"]
        if s["Sid"] != "UseDataKey" and s["Effect"] == "Allow"
        for r in s["Resource"]
        if "/" in r
    )
    assert objects == ["arn:aws:s3:::c/research/*", "arn:aws:s3:::d/research/*"]
    # its runs' records: created once (If-None-Match), never deleted (tests/infra/test_security_audit.py)
    denied = {s["Sid"]: s for s in doc["Statement"] if s["Effect"] == "Deny"}
    assert denied["RunRecordsCreateOnly"]["Resource"] == ["arn:aws:s3:::c/*run-records/*"]
    assert "s3:DeleteObjectVersion" in denied["RunRecordsNeverDeleted"]["Action"]
    listing = next(s for s in doc["Statement"] if s["Sid"] == "ListOwnPrefix")
    assert listing["Condition"]["StringLike"] == {"s3:prefix": ["research/*", "research"]}
    writes = [s for s in doc["Statement"] if "s3:PutObject" in s["Action"] and s["Effect"] == "Allow"]
    assert [s["Resource"] for s in writes] == [["arn:aws:s3:::c/research/*"]]  # never the datasets
