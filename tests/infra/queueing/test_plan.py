"""The teams as the plan declares them: each team's IAM role reaches only its prefixes and is assumed only
from its own namespace's service account; the flavors select the pools' nodes; the stack's runs are queued
in their team's namespace; Kueue comes from the pinned chart."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.plan.runner import Plan
from infra.queueing.config import KueueChartConfig
from infra.queueing.names import PRIORITY_LABEL, QUEUE_LABEL
from tests.support.kubernetes import tolerates

ROLE, POLICY = "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"
SA = "kubernetes:core/v1:ServiceAccount"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


@pytest.fixture(scope="module")
def prod(plan_stack) -> Plan:
    return plan_stack("prod-us-train")


def _team_roles(plan: Plan) -> dict[str, tuple[dict, dict]]:
    """namespace the role trusts -> (trust policy, permission policy), for every team role in the plan."""
    out = {}
    for role in plan.by_type(ROLE):
        if not role.name.startswith("team-"):
            continue
        trust = json.loads(role.inputs["assumeRolePolicy"])
        if "Federated" not in trust["Statement"][0]["Principal"]:
            continue  # not a pod role (the team's CI role: tests/infra/queueing/test_registry.py)
        policy = json.loads(plan.one(POLICY, f"{role.name}-policy").inputs["policy"])
        (sub,) = [
            v for k, v in trust["Statement"][0]["Condition"]["StringEquals"].items() if k.endswith(":sub")
        ]
        out[sub] = (role.inputs, policy)
    return out


@pytest.mark.parametrize(
    ("team", "other"),
    [("production", "research"), ("research", "production")],
    ids=["production", "research"],
)
def test_each_team_role_reaches_only_its_prefixes(prod: Plan, team: str, other: str) -> None:
    roles = _team_roles(prod)
    role, policy = roles[f"system:serviceaccount:team-{team}:trainer"]
    assert role["name"].endswith(f"-team-{team}")
    object_arns = [
        arn
        for s in policy["Statement"]
        if s["Effect"] == "Allow" and s["Sid"] != "UseDataKey"
        for arn in s["Resource"]
        if "/" in arn
    ]
    assert object_arns and all(arn.endswith(f"/{team}/*") for arn in object_arns), object_arns
    assert not any(f"/{other}/" in arn for arn in object_arns)
    listing = [s for s in policy["Statement"] if "s3:ListBucket" in s["Action"]]
    assert [s["Condition"]["StringLike"]["s3:prefix"] for s in listing] == [[f"{team}/*", team]]
    # the artifacts bucket (models, releases) is not the teams'
    assert not any("artifacts" in json.dumps(s["Resource"]) for s in policy["Statement"])


def test_a_team_namespace_has_only_its_own_service_account(prod: Plan) -> None:
    roles = {r.name: r.inputs["name"] for r in prod.by_type(ROLE) if r.name.startswith("team-")}
    accounts = [
        sa.inputs["metadata"]
        for sa in prod.by_type(SA)
        if sa.inputs["metadata"]["namespace"].startswith("team-")
    ]
    by_namespace = {m["namespace"]: m for m in accounts}
    assert sorted(by_namespace) == ["team-production", "team-research"]
    assert len(accounts) == 2  # one service account per team namespace: its own
    for ns, meta in by_namespace.items():
        team = ns.removeprefix("team-")
        assert meta["name"] == "trainer"
        assert meta["annotations"]["eks.amazonaws.com/role-arn"].endswith(
            f":role/{roles[f'team-{team}-role']}"
        )
    # and each role is assumed only from its own namespace's service account: a pod in team-production
    # runs as team-production's "trainer" (service accounts are per namespace), which research's role refuses
    assert sorted(_team_roles(prod)) == [
        "system:serviceaccount:team-production:trainer",
        "system:serviceaccount:team-research:trainer",
    ]


def test_runs_are_queued_in_their_team_namespace(prod: Plan) -> None:
    job = prod.one("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob", "train-jobs-gpt2-124m").inputs
    meta = job["metadata"]
    assert meta["namespace"] == "team-production"
    assert meta["labels"][PRIORITY_LABEL] == "production"
    # declared suspended (the stack's default): it waits unqueued until labelled with its queue
    assert QUEUE_LABEL not in meta["labels"]
    assert job["spec"]["suspend"] is True
    args = " ".join(job["spec"]["trainer"]["args"])
    assert "data.source=s3://aiplat-prod-us-east-1-datasets/production/shards/openwebtext" in args
    assert "checkpoint.uri=s3://aiplat-prod-us-east-1-checkpoints/production/checkpoints/gpt2-124m" in args
    # the queue it names exists in that namespace
    queue = prod.one(f"{KUEUE}:LocalQueue", "team-production-local-queue").inputs
    assert queue["metadata"]["namespace"] == meta["namespace"]


def test_flavors_select_the_pools_nodes(prod: Plan) -> None:
    flavor = prod.one(f"{KUEUE}:ResourceFlavor").inputs["spec"]
    group = prod.one("aws:eks/nodeGroup:NodeGroup", "pool-train-ng").inputs
    assert flavor["nodeLabels"].items() <= group["labels"].items()
    for taint in group["taints"]:
        assert tolerates(flavor["tolerations"], taint["key"], taint["value"], TAINT_EFFECTS[taint["effect"]])
    # the EFA pool has topology-aware scheduling on the EKS network labels, and the runtime asks for it
    assert flavor["topologyName"] == prod.one(f"{KUEUE}:Topology").inputs["metadata"]["name"]
    runtime = prod.one("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime").inputs
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"
    }


def test_only_pools_with_quota_get_a_flavor(plan_stack) -> None:
    """dev's Karpenter ``spot-gpu`` pool has no team quota: no ResourceFlavor for it (none would be used)."""
    dev = plan_stack("dev-us-train")
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in dev.by_type(f"{KUEUE}:ResourceFlavor")}
    assert sorted(flavors) == ["gpu"]
    queues = dev.by_type(f"{KUEUE}:ClusterQueue")
    named = {f["name"] for cq in queues for g in cq.inputs["spec"]["resourceGroups"] for f in g["flavors"]}
    assert named == set(flavors)
    assert "topologyName" not in flavors["gpu"]  # no EFA, no network topology


def test_karpenter_flavor_matches_its_nodepool(tmp_path, stack_doc) -> None:
    """With a team quota on it, a Karpenter pool gets a flavor that selects and tolerates its nodes."""
    import shutil

    from infra.core.project import CONFIG_KEY
    from infra.plan.runner import run_plan
    from tests.conftest import REPO

    shutil.copytree(REPO / "stacks", tmp_path, dirs_exist_ok=True)
    doc = stack_doc("dev-us-train")
    doc["config"][CONFIG_KEY]["teams"]["ml"]["quotas"]["spot-gpu"] = {"gpus": 2}
    (tmp_path / "Pulumi.dev-us-train.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    dev = run_plan("dev-us-train", stacks_dir=tmp_path)
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in dev.by_type(f"{KUEUE}:ResourceFlavor")}
    assert sorted(flavors) == ["gpu", "spot-gpu"]
    pool = dev.one("kubernetes:karpenter.sh/v1:NodePool").inputs["spec"]["template"]
    assert flavors["spot-gpu"]["nodeLabels"].items() <= pool["metadata"]["labels"].items()
    for taint in pool["spec"]["taints"]:
        assert tolerates(flavors["spot-gpu"]["tolerations"], taint["key"], taint["value"], taint["effect"])


def test_kueue_from_the_pinned_chart(prod: Plan) -> None:
    release = prod.one("kubernetes:helm.sh/v3:Release", "kueue-release").inputs
    pin = KueueChartConfig()  # the stack keeps the default pin
    assert release["chart"] == f"{pin.repo}/{pin.chart}"
    assert release["version"] == pin.version
    assert release["values"]["enableKueueViz"] is False
    assert release["namespace"] == "kueue-system"
    # every cluster queue is in the cohort, and takes jobs only from the namespace of the LocalQueue that
    # feeds it
    feeds = {
        lq.inputs["spec"]["clusterQueue"]: lq.inputs["metadata"]["namespace"]
        for lq in prod.by_type(f"{KUEUE}:LocalQueue")
    }
    cqs = prod.by_type(f"{KUEUE}:ClusterQueue")
    assert len(cqs) == len(feeds) == 2
    for cq in cqs:
        spec = cq.inputs["spec"]
        assert spec["cohortName"] == prod.one(f"{KUEUE}:Cohort").inputs["metadata"]["name"]
        ns = spec["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        assert feeds[cq.inputs["metadata"]["name"]] == ns


def test_the_teams_runs_are_scraped(prod: Plan) -> None:
    monitors = [
        m.inputs["spec"]["namespaceSelector"]["matchNames"]
        for m in prod.by_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
        if m.inputs["metadata"]["name"] == "aiplat-trainer"
    ]
    assert monitors == [["training", "team-production", "team-research"]]
