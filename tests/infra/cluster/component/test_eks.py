"""EksCluster and EksAddons on every stack's recorded plan."""

from __future__ import annotations

import json

import pytest

from infra.cluster import addon_versions
from infra.cluster.component.eks import CONTROL_PLANE_LOG_TYPES
from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_private_encrypted_logged(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    cluster = plan.one("aws:eks/cluster:Cluster")
    cfg = plan.config["cluster"]
    assert cluster.inputs["version"] == cfg["kubernetes_version"]
    vpc = cluster.inputs["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["endpointPublicAccess"] is bool(cfg["endpoint_public_access_cidrs"])
    assert len(vpc["subnetIds"]) == len(plan.outputs["availabilityZones"])
    enc = cluster.inputs["encryptionConfig"]
    assert enc["resources"] == ["secrets"]
    assert enc["provider"]["keyArn"] == plan.outputs["kmsKeyArns"]["eks"]
    assert sorted(cluster.inputs["enabledClusterLogTypes"]) == sorted(CONTROL_PLANE_LOG_TYPES)
    assert cluster.inputs["accessConfig"]["authenticationMode"] == "API"
    logs = plan.one("aws:cloudwatch/logGroup:LogGroup", "cluster-control-plane-logs")
    assert logs.inputs["name"] == f"/aws/eks/{cluster.inputs['name']}/cluster"
    assert logs.inputs["kmsKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    oidc = plan.one("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert oidc.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    assert oidc.inputs["url"] == "https://" + plan.outputs["oidcIssuer"]
    assert not plan.outputs["oidcIssuer"].startswith("https://")


@pytest.mark.parametrize("stack", STACKS)
def test_addons_pinned_from_config(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    addons = {a.inputs["addonName"]: a for a in plan.by_type("aws:eks/addon:Addon")}
    minor = plan.config["cluster"]["kubernetes_version"]
    pinned = {k.replace("_", "-"): v for k, v in plan.config["cluster"]["addons"].items() if v}
    # the stack file's build, else the default recorded for the minor
    expected = {
        n: pinned.get(n) or addon_versions.builds(minor, n)[0].version for n in addon_versions.ADDON_NAMES
    }
    assert {n: a.inputs["addonVersion"] for n, a in addons.items()} == expected
    assert set(expected) == {
        "vpc-cni",
        "coredns",
        "kube-proxy",
        "aws-ebs-csi-driver",
        "eks-pod-identity-agent",
        "eks-node-monitoring-agent",
    }
    ebs = addons["aws-ebs-csi-driver"].inputs["podIdentityAssociations"]
    assert ebs[0]["serviceAccount"] == "ebs-csi-controller-sa"
    role = plan.one("aws:iam/role:Role", "addons-ebs-csi-role")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "pods.eks.amazonaws.com"
    }


@pytest.mark.parametrize("stack", STACKS)
def test_node_role_has_only_node_policies(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    role = plan.one("aws:iam/role:Role", "cluster-node-role")
    attached = sorted(
        a.inputs["policyArn"].rsplit("/", 1)[-1]
        for a in plan.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.startswith("cluster-node-")
    )
    # no CNI policy (vpc-cni has its own role) and no AmazonSSMManagedInstanceCore (every parameter)
    assert attached == sorted(["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"])
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "ec2.amazonaws.com"
    }


def test_kubeconfig_uses_get_token(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    provider = plan.one("pulumi:providers:kubernetes")
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    exec_ = kubeconfig["users"][0]["user"]["exec"]
    assert exec_["command"] == "aws"
    assert exec_["args"][:2] == ["eks", "get-token"] and plan.outputs["clusterName"] in exec_["args"]
    assert kubeconfig["clusters"][0]["cluster"]["server"] == plan.outputs["clusterEndpoint"]


@pytest.mark.parametrize("stack", STACKS)
def test_addons_wait_for_system_pools_only(plan_stack, stack: str) -> None:
    # CoreDNS, the EBS CSI driver and the node monitoring agent wait for the pools that can run them; a
    # GPU pool that never gets capacity must not hold them back.
    plan = plan_stack(stack)
    pools = plan.config["node_pools"]
    # the component and each add-on itself (the engine's graph orders deletes and replacements by it)
    waiting = [plan.one("aiplat:addons:EksAddons")] + [
        r for r in plan.by_type("aws:eks/addon:Addon") if r.name.startswith("addons-")
    ]
    assert len(waiting) == 4

    def runs_system_pods(pool: dict) -> bool:
        # a CPU pool without a hard taint (the publisher's pool is tainted NoSchedule: system pods stay off)
        hard = [t for t in (pool.get("taints") or {}).values() if t["effect"] != "PreferNoSchedule"]
        return not pool["gpu"] and not hard

    for r in waiting:
        for name, pool in pools.items():
            ng = plan.one("aws:eks/nodeGroup:NodeGroup", f"pool-{name}-ng")
            if runs_system_pods(pool):
                assert ng.urn in r.dependencies, (r.name, name)
            else:
                assert not any(f"::pool-{name}-" in d for d in r.dependencies), (r.name, name)
    assert any(runs_system_pods(p) for p in pools.values())
    if plan.config["role"] == "train":  # the publisher's CPU pool, tainted
        assert any(not runs_system_pods(p) and not p["gpu"] for p in pools.values())


@pytest.mark.parametrize("stack", STACKS)
def test_node_groups_wait_for_networking_addons(plan_stack, stack: str) -> None:
    # Nodes join only once vpc-cni, kube-proxy and the pod identity agent exist: the edge is on the node
    # group itself, not only on its component.
    plan = plan_stack(stack)
    networking = {r.urn for r in plan.by_type("aws:eks/addon:Addon") if r.name.startswith("cluster-")}
    assert {r.name for r in plan.by_type("aws:eks/addon:Addon") if r.urn in networking} >= {
        "cluster-vpc-cni",
        "cluster-kube-proxy",
    }
    for ng in plan.by_type("aws:eks/nodeGroup:NodeGroup"):
        assert networking <= set(ng.dependencies), ng.name


@pytest.mark.parametrize("stack", STACKS)
def test_lifecycle_is_explicit(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    cluster = plan.one("aws:eks/cluster:Cluster").inputs
    # standard support unless the stack asks for extended (EKS would default to EXTENDED)
    assert cluster["upgradePolicy"] == {"supportType": plan.config["cluster"]["support_type"]}
    assert plan.config["cluster"]["support_type"] == "STANDARD"
    assert cluster["deletionProtection"] is (plan.config["environment"] == "prod")


def test_deletion_protection_switch(stack_config) -> None:
    from infra.schema.parse import parse_platform_config

    raw = stack_config("dev-us-train")
    assert parse_platform_config(raw).cluster_deletion_protection is False
    raw["cluster"]["deletion_protection"] = True
    assert parse_platform_config(raw).cluster_deletion_protection is True
