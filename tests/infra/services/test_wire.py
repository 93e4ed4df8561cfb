"""The cluster services in every stack's plan: releases pinned from config, chart values that break things
silently when wrong (selectors, tolerations, service accounts, role ARNs), ordering (system pools, never GPU
pools), namespaces (Pod Security, NetworkPolicies blocking IMDS), identities, Karpenter's GPU NodePools
from AWS's offerings, and the MinIO path."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from infra.core.namespaces import EXPORTERS_NAMESPACE
from infra.io import snapshot
from infra.plan.runner import Plan, RecordedResource, run_plan
from tests.conftest import STACKS
from tests.support.kubernetes import tolerates

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODEGROUP = "aws:eks/nodeGroup:NodeGroup"
POOL_LABEL = "aiplat.io/pool"


def _releases(plan: Plan) -> dict[str, RecordedResource]:
    """The cluster services' releases (the monitoring stack's, in its own namespace, are tested in
    tests/infra/monitoring/test_wire.py; KEDA, the inference autoscaler's, in test_inference.py)."""
    own = {plan.config["cluster_services"]["monitoring_namespace"], EXPORTERS_NAMESPACE}
    if plan.config.get("inference"):
        own.add(plan.config["inference"]["keda"]["namespace"])
    return {r.inputs["name"]: r for r in plan.by_type(RELEASE) if r.inputs["namespace"] not in own}


def _services(plan: Plan) -> dict:
    return plan.config["cluster_services"]


def _pool_affinity(values: dict) -> set[str]:
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (term,) = terms
    (expr,) = [e for e in term["matchExpressions"] if e["key"] == POOL_LABEL]
    assert expr["operator"] == "In"
    return set(expr["values"])


def _node_groups(plan: Plan, *, gpu: bool) -> list[RecordedResource]:
    pools = plan.config["node_pools"]
    return [r for r in plan.by_type(NODEGROUP) if pools[r.inputs["labels"][POOL_LABEL]]["gpu"] is gpu]


EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def _system_groups(plan: Plan) -> list[RecordedResource]:
    """CPU node groups without a hard taint (the publisher's pool is tainted for its pods alone)."""
    return [
        g
        for g in _node_groups(plan, gpu=False)
        if all(EFFECTS[t["effect"]] == "PreferNoSchedule" for t in g.inputs.get("taints") or [])
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_releases_are_pinned_from_config(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    services = _services(plan)
    releases = _releases(plan)
    expected = {
        "nvidia-device-plugin": services["nvidia_device_plugin"],
        "aws-load-balancer-controller": services["load_balancer_controller"],
        "metrics-server": services["metrics_server"],
        "cert-manager": services["cert_manager"],
    }
    if any(p["efa"] for p in plan.config["node_pools"].values()):
        expected["aws-efa-k8s-device-plugin"] = services["efa_device_plugin"]
    if services["karpenter"]["node_pools"]:
        expected["karpenter"] = services["karpenter"]
        expected["karpenter-crd"] = {**services["karpenter"], "chart": services["karpenter"]["crd_chart"]}
    if plan.config.get("training"):  # Kubeflow Trainer, pinned in the training section
        expected["kubeflow-trainer"] = plan.config["training"]["operator"]
    if plan.config.get("teams"):  # Kueue, pinned in the queueing section
        expected["kueue"] = plan.config["queueing"]["kueue"]
    assert set(releases) == set(expected)
    for name, chart in expected.items():
        inputs = releases[name].inputs
        assert inputs["version"] == chart["version"], name
        if chart["repo"].startswith("oci://"):
            assert inputs["chart"] == f"{chart['repo']}/{chart['chart']}" and "repositoryOpts" not in inputs
        else:
            assert inputs["chart"] == chart["chart"] and inputs["repositoryOpts"] == {"repo": chart["repo"]}
    if "karpenter" in releases:
        assert releases["karpenter"].inputs["skipCrds"] is True  # CRDs come from karpenter-crd


@pytest.mark.parametrize("stack", STACKS)
def test_device_plugins_land_on_gpu_pools_only(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    values = _releases(plan)["nvidia-device-plugin"].inputs["values"]
    gpu_groups = _node_groups(plan, gpu=True)
    selected = _pool_affinity(values)
    assert {g.inputs["labels"][POOL_LABEL] for g in gpu_groups} <= selected
    assert not {g.inputs["labels"][POOL_LABEL] for g in _node_groups(plan, gpu=False)} & selected
    for g in gpu_groups:  # every taint of a GPU node group is tolerated
        for t in g.inputs.get("taints") or []:
            assert tolerates(values["tolerations"], t["key"], t["value"], EFFECTS[t["effect"]]), (g.name, t)
    for pool in plan.by_type("kubernetes:karpenter.sh/v1:NodePool"):
        assert pool.inputs["spec"]["template"]["metadata"]["labels"][POOL_LABEL] in selected
        for t in pool.inputs["spec"]["template"]["spec"]["taints"]:
            assert tolerates(values["tolerations"], t["key"], t["value"], t["effect"])
    efa = _releases(plan).get("aws-efa-k8s-device-plugin")
    efa_groups = [g for g in gpu_groups if plan.config["node_pools"][g.inputs["labels"][POOL_LABEL]]["efa"]]
    assert (efa is not None) == bool(efa_groups)
    if efa is not None:
        ((key, value),) = efa.inputs["values"]["nodeSelector"].items()
        assert all(g.inputs["labels"].get(key) == value for g in efa_groups)
        assert not any(
            g.inputs["labels"].get(key) == value for g in plan.by_type(NODEGROUP) if g not in efa_groups
        )
        for g in efa_groups:
            for t in g.inputs.get("taints") or []:
                assert tolerates(
                    efa.inputs["values"]["tolerations"], t["key"], t["value"], EFFECTS[t["effect"]]
                )


@pytest.mark.parametrize("stack", STACKS)
def test_controllers_run_on_system_pools(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    system = {g.inputs["labels"][POOL_LABEL] for g in _system_groups(plan)}
    releases = _releases(plan)
    for name in ("aws-load-balancer-controller", "metrics-server", "cert-manager", "karpenter"):
        if name in releases:
            assert _pool_affinity(releases[name].inputs["values"]) == system, name
    cm = releases["cert-manager"].inputs["values"]
    assert cm["crds"] == {"enabled": True, "keep": True}
    for part in ("webhook", "cainjector", "startupapicheck"):
        assert _pool_affinity(cm[part]) == system


def _role_arn_of(plan: Plan, role_name: str) -> str:
    (role,) = [r for r in plan.by_type("aws:iam/role:Role") if r.name == role_name]
    return f"arn:aws:iam::123456789012:role/{role.inputs.get('name') or role.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_service_accounts_carry_their_roles(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    releases = _releases(plan)
    lbc = releases["aws-load-balancer-controller"].inputs["values"]
    assert lbc["serviceAccount"]["name"] == "aws-load-balancer-controller"
    assert lbc["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] == _role_arn_of(
        plan, "lbc-iam-role"
    )
    (trust,) = [r for r in plan.by_type("aws:iam/role:Role") if r.name == "lbc-iam-role"]
    condition = json.loads(trust.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert "system:serviceaccount:kube-system:aws-load-balancer-controller" in condition.values()
    assert lbc["clusterName"] == plan.one("aws:eks/cluster:Cluster").inputs["name"]
    assert lbc["region"] == plan.region and lbc["vpcId"].startswith("network-vpc")
    if "karpenter" in releases:
        values = releases["karpenter"].inputs["values"]
        assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] == _role_arn_of(
            plan, "karpenter-aws-controller-role"
        )
        (queue,) = plan.by_type("aws:sqs/queue:Queue")
        assert values["settings"]["interruptionQueue"] == queue.name  # the mock names auto-named queues so
        assert values["settings"]["clusterName"] == plan.one("aws:eks/cluster:Cluster").inputs["name"]
        (trust,) = [r for r in plan.by_type("aws:iam/role:Role") if r.name == "karpenter-aws-controller-role"]
        condition = json.loads(trust.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
        assert f"system:serviceaccount:kube-system:{values['serviceAccount']['name']}" in condition.values()
    # workload service accounts: the S3 pod roles by IRSA, no API token
    accounts = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
        for r in plan.by_type("kubernetes:core/v1:ServiceAccount")
    }
    storage = plan.config["storage"]
    role = "trainer" if plan.config["role"] == "train" else "inference"
    sa = accounts[(storage[role]["namespace"], storage[role]["service_account"])]
    assert sa.inputs["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == _role_arn_of(
        plan, f"pod-roles-{role}"
    )
    assert all(a.inputs["automountServiceAccountToken"] is False for a in accounts.values())


def _closure(plan: Plan, urn: str) -> set[str]:
    by_urn = {r.urn: r for r in plan.resources}
    seen: set[str] = set()
    todo = [urn]
    while todo:
        for dep in by_urn[todo.pop()].dependencies:
            if dep not in seen and dep in by_urn:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize("stack", STACKS)
def test_services_wait_for_system_pools_and_never_for_gpu_pools(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    system_ngs = {r.urn for r in _system_groups(plan)}
    gpu_urns = {
        r.urn
        for r in plan.resources
        if r.name.startswith(
            tuple(f"pool-{g.inputs['labels'][POOL_LABEL]}-" for g in _node_groups(plan, gpu=True))
        )
    }
    (gate,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name.startswith("k8s-access")]
    coredns = next(r.urn for r in plan.by_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "coredns")
    k8s = [
        r
        for r in plan.resources
        if r.type.startswith("kubernetes:") and r.custom and not r.type.startswith("pulumi")
    ]
    assert len(k8s) > 20
    for r in k8s:
        deps = _closure(plan, r.urn)
        assert system_ngs <= deps and coredns in deps, r.name
        assert not deps & gpu_urns, (r.name, sorted(deps & gpu_urns))
        if r.urn != gate.urn:
            assert gate.urn in deps, r.name
        assert r.provider and "cluster-k8s" in r.provider, r.name


def _admits(rule_peers: list[dict], ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    for peer in rule_peers:
        block = peer.get("ipBlock")
        if (
            block
            and addr in ipaddress.ip_network(block["cidr"])
            and not any(addr in ipaddress.ip_network(e) for e in block.get("except") or [])
        ):
            return True
    return False


@pytest.mark.parametrize("stack", STACKS)
def test_workload_namespaces_deny_by_default_and_block_imds(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    namespaces = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]
        for r in plan.by_type("kubernetes:core/v1:Namespace")
    }
    storage = plan.config["storage"]
    workload = {
        storage["inference"]["namespace"]: "restricted",
        _services(plan)["monitoring_namespace"]: "baseline",
        EXPORTERS_NAMESPACE: "privileged",
    }
    if plan.config["role"] == "train":
        workload[storage["trainer"]["namespace"]] = "restricted"
        workload[storage["publisher"]["namespace"]] = "restricted"  # the publisher's own
    if plan.config.get("inference"):  # KEDA's namespace, made by the inference wiring the same way
        workload[plan.config["inference"]["keda"]["namespace"]] = "restricted"
    for team, t in plan.config.get("teams", {}).items():  # made by the queueing wiring the same way
        workload[t.get("namespace") or f"team-{team}"] = "restricted"
    version = f"v{plan.config['cluster']['kubernetes_version']}"
    policies: dict[str, dict[str, dict]] = {}
    for p in plan.by_type("kubernetes:networking.k8s.io/v1:NetworkPolicy"):
        policies.setdefault(p.inputs["metadata"]["namespace"], {})[p.inputs["metadata"]["name"]] = p.inputs[
            "spec"
        ]
    for ns, level in workload.items():
        labels = namespaces[ns]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == level
        assert labels["pod-security.kubernetes.io/enforce-version"] == version
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
        if level != "restricted":
            assert namespaces[ns]["annotations"]["aiplat.io/pod-security-reason"]
        ns_policies = policies[ns]
        assert ns_policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        egress = [rule for spec in ns_policies.values() for rule in spec.get("egress", [])]
        assert not any(_admits(rule.get("to", []), "169.254.169.254") for rule in egress), ns
        assert any(_admits(rule.get("to", []), "52.216.0.1") for rule in egress)  # S3 over 443
        dns = ns_policies["allow-dns"]["egress"][0]
        assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert set(policies) == set(workload)  # system namespaces are left to their charts
    assert namespaces["cert-manager"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # the trainer's metrics ports are open to the monitoring namespace only
    if plan.config["role"] == "train":
        scrape = policies[storage["trainer"]["namespace"]]["allow-metrics-scrape"]["ingress"][0]
        assert scrape["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
        assert scrape["ports"] == [{"protocol": "TCP", "port": 9400, "endPort": 9407}]


@pytest.mark.parametrize("stack", STACKS)
def test_network_policy_enforcement_is_on(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (cni,) = [r for r in plan.by_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "vpc-cni"]
    assert json.loads(cni.inputs["configurationValues"])["enableNetworkPolicy"] == "true"


@pytest.mark.parametrize("stack", STACKS)
def test_default_storage_class_is_encrypted_gp3(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (sc,) = plan.by_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert sc.inputs["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    params = sc.inputs["parameters"]
    assert params["type"] == "gp3" and params["encrypted"] == "true"
    ebs_key = next(r for r in plan.by_type("aws:kms/key:Key") if r.name == "kms-ebs")
    assert ebs_key.urn in sc.dependencies and params["kmsKeyId"].startswith("arn:aws:kms:")


def _offered_nvidia(region: str, zones: list[str]) -> dict[str, set[str]]:
    """Independently of the program: type -> zones offering it, for NVIDIA GPU types (moto's snapshot)."""
    out: dict[str, set[str]] = {}
    for az, types in snapshot.offered_by_az(region).items():
        if az in zones:
            for t in types:
                f = snapshot.instance_facts(t, region)
                if f is not None and (f.gpu_manufacturer or "").upper() == "NVIDIA":
                    out.setdefault(t, set()).add(az)
    return out


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "prod-us-train"])
def test_karpenter_gpu_pools_use_what_the_zones_offer(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (node_class,) = plan.by_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    spec = node_class.inputs["spec"]
    assert (
        spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
        and spec["metadataOptions"]["httpTokens"] == "required"
    )
    (root,) = spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and root["ebs"]["kmsKeyID"].startswith("arn:aws:kms:")
    assert spec["amiSelectorTerms"] == [{"alias": _services(plan)["karpenter"]["ami_alias"]}]
    node_role = next(r for r in plan.by_type("aws:iam/role:Role") if r.name == "karpenter-aws-node-role")
    assert spec["role"] == node_role.name
    entry = plan.one("aws:eks/accessEntry:AccessEntry", "karpenter-aws-node-access")
    assert entry.inputs["type"] == "EC2_LINUX"
    subnets = [
        r
        for r in plan.by_type("aws:ec2/subnet:Subnet")
        if r.inputs["tags"].items() >= spec["subnetSelectorTerms"][0]["tags"].items()
    ]
    assert subnets and all("private" in s.name for s in subnets)
    for pool in plan.by_type("kubernetes:karpenter.sh/v1:NodePool"):
        reqs = {r["key"]: r["values"] for r in pool.inputs["spec"]["template"]["spec"]["requirements"]}
        zones = reqs["topology.kubernetes.io/zone"]
        offered = _offered_nvidia(plan.region, zones)
        types = reqs["node.kubernetes.io/instance-type"]
        assert types and all(t in offered for t in types), sorted(set(types) - set(offered))
        families = reqs["karpenter.k8s.aws/instance-family"]
        assert {t.split(".")[0] for t in types} == set(families)
        if plan.config["role"] == "infer":
            assert len(families) >= 2, families
        config = _services(plan)["karpenter"]["node_pools"][pool.inputs["metadata"]["name"]]
        assert pool.inputs["spec"]["limits"] == {"nvidia.com/gpu": str(config["gpu_limit"])}
        assert reqs["karpenter.sh/capacity-type"] == config["capacity_types"]


def test_inference_stacks_have_two_gpu_families(plan_stack) -> None:
    for stack in ("prod-hk-infer", "prod-sg-infer"):
        families = plan_stack(stack).outputs["karpenterNodePools"]["gpu"]["families"]
        assert len(families) >= 2, (stack, families)


def test_minio_gets_what_it_needs_from_the_services() -> None:
    plan = run_plan("minio", stacks_dir=EXAMPLES)
    by_name = {r.name: r for r in plan.resources}
    release = by_name["minio-release"]
    issuer = by_name["cert-manager-ca-issuer"]
    assert release.inputs["values"]["persistence"].get("storageClass") is None  # the default class
    assert by_name["storage-classes-gp3"].urn in _closure(plan, release.urn)
    assert (
        issuer.inputs["metadata"]["name"] == by_name["minio-certificate"].inputs["spec"]["issuerRef"]["name"]
    )
    assert issuer.urn in _closure(plan, by_name["minio-certificate"].urn)
    for secret in ("minio-trainer-s3", "minio-inference-s3"):
        ns = by_name[secret].inputs["metadata"]["namespace"]
        assert by_name[f"namespaces-{ns}"].urn in by_name[secret].dependencies, secret
        # the workload may reach MinIO's S3 API through its NetworkPolicies
        assert by_name[f"namespaces-{ns}-allow-to-minio"].inputs["spec"]["egress"][0]["ports"] == [
            {"protocol": "TCP", "port": 9000}
        ]


def _service_types(value: object) -> list[str]:
    """Every ``type`` under a ``service``/``Service``-ish key in chart values (``service.type``,
    ``consoleService.type``, ``grafana.service.type``...)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if "service" in str(key).lower() and isinstance(item, dict) and isinstance(item.get("type"), str):
                found.append(item["type"])
            found.extend(_service_types(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_service_types(item))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_lbc_service_mutator_webhook_is_off_and_nothing_needs_it(plan_stack, stack: str) -> None:
    """Review finding F5: chart 3.5.0's ``mservice.elbv2.k8s.aws`` webhook (failurePolicy Fail, every
    Service CREATE) would fail the other releases' Services while the controller starts. It only serves
    ``type: LoadBalancer`` Services, and the plan declares and configures none."""
    plan = plan_stack(stack)
    lbc = _releases(plan)["aws-load-balancer-controller"].inputs["values"]
    assert lbc["enableServiceMutatorWebhook"] is False
    declared = [r.inputs.get("spec", {}).get("type") for r in plan.by_type("kubernetes:core/v1:Service")]
    configured = [t for r in plan.by_type(RELEASE) for t in _service_types(r.inputs.get("values", {}))]
    assert "LoadBalancer" not in declared + configured
