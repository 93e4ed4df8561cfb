"""Model serving in both inference plans: the Deployment on the Karpenter GPU NodePool, its Service, PDB,
KEDA ScaledObject (the HPA's owner), the ALB Ingress with the TLS 1.3 policy and the certificate, DNS, WAF,
and every object valid against the schemas. Asserted against the other resources of the same plan (the
NodePool's labels and taints, the service account, the subnets, the PodMonitor, the train stack's image),
so a change on one side that the other misses fails here."""

from __future__ import annotations

import json

import pytest

from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.inference.rules import TLS13_ONLY_POLICIES
from infra.plan.runner import Plan, RecordedResource, run_plan
from infra.schema.parse import parse_platform_config
from tests.k8s.validate import k8s_objects, validate_plan
from tests.support.config_cases import variant_name
from tests.support.kubernetes import tolerates

INFER = ["prod-hk-infer", "prod-sg-infer"]
ALB = "alb.ingress.kubernetes.io/"
POOL_LABEL = "aiplat.io/pool"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
SECRET = "kubernetes:core/v1:Secret"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _in(plan: Plan, type_: str, namespace: str) -> list[RecordedResource]:
    return [r for r in plan.by_type(type_) if r.inputs["metadata"].get("namespace") == namespace]


def _one(plan: Plan, type_: str, name: str | None = None) -> RecordedResource:
    """The one object of ``type_`` named ``name`` in the inference namespace; without a name, the one that
    is not the router's (the shipped stacks serve one model)."""
    ns = plan.config["storage"]["inference"]["namespace"]
    found = _in(plan, type_, ns)
    (r,) = [
        r
        for r in found
        if r.inputs["metadata"]["name"] == name or (name is None and r.inputs["metadata"]["name"] != rd.NAME)
    ]
    return r


def _pod(plan: Plan) -> dict:
    return _one(plan, DEPLOYMENT).inputs["spec"]["template"]["spec"]


def _model(plan: Plan) -> dict:
    """The config of the shipped stacks' one model (its served name and section)."""
    ((_, model),) = plan.config["inference"]["models"].items()
    return model


@pytest.mark.parametrize("stack", INFER)
def test_plan_shows_serving_and_every_object_validates(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    assert _one(plan, INGRESS).inputs["metadata"]["name"] == "inference"
    (served,) = plan.config["inference"]["models"]
    for type_ in (DEPLOYMENT, SERVICE, PDB, SCALED_OBJECT):
        # one model's objects, named and keyed (URN) by its served name
        r = _one(plan, type_)
        assert r.inputs["metadata"]["name"] == f"inference-{served}", type_
        assert r.urn.endswith(f"inference-{served}-{r.name.rsplit('-', 1)[1]}"), r.urn
    assert plan.by_type(NODEPOOL)
    assert plan.one("aws:acm/certificate:Certificate", "serving-certificate-certificate")
    assert plan.one("aws:wafv2/webAcl:WebAcl")
    ns = plan.config["storage"]["inference"]["namespace"]
    serving = [o for o in k8s_objects(plan) if (o.manifest.get("metadata") or {}).get("namespace") == ns]
    assert len(serving) >= 6
    assert validate_plan(plan) == []


@pytest.mark.parametrize("stack", INFER)
def test_pods_land_on_the_karpenter_gpu_pool_and_tolerate_its_taint(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    pod = _pod(plan)
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (expr,) = term["matchExpressions"]
    assert expr["key"] == POOL_LABEL and expr["operator"] == "In"
    assert expr["values"] == _model(plan)["node_pools"]
    pools = {
        p.inputs["spec"]["template"]["metadata"]["labels"][POOL_LABEL]: p for p in plan.by_type(NODEPOOL)
    }
    for name in expr["values"]:
        template = pools[name].inputs["spec"]["template"]["spec"]
        for taint in template["taints"]:
            assert tolerates(pod["tolerations"], taint["key"], taint["value"], taint["effect"]), taint
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # one GPU per replica fits the pool's GPU limit at the largest replica count
    limit = sum(int(pools[n].inputs["spec"]["limits"]["nvidia.com/gpu"]) for n in expr["values"])
    assert _model(plan)["replicas"]["max"] <= limit


@pytest.mark.parametrize("stack", INFER)
def test_pods_run_as_the_inference_service_account_bound_to_its_role(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ns = plan.config["storage"]["inference"]["namespace"]
    (sa,) = _in(plan, "kubernetes:core/v1:ServiceAccount", ns)
    assert _pod(plan)["serviceAccountName"] == sa.inputs["metadata"]["name"]
    role_arn = sa.inputs["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    roles = {r.inputs.get("name") or r.name for r in plan.by_type("aws:iam/role:Role")}
    assert role_arn.rsplit("/", 1)[1] in roles
    deployment = _one(plan, DEPLOYMENT)
    assert sa.urn in deployment.dependencies  # the pods never start before their service account


@pytest.mark.parametrize("stack", INFER)
def test_release_and_images_come_from_the_training_stack(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    train = plan_stack(plan.config["storage"]["source_stack"])
    replica = train.outputs["artifactReplicas"][plan.region]
    pod = _pod(plan)
    (container,) = pod["containers"]
    (init,) = pod["initContainers"]
    cmd = init["command"]
    model = _model(plan)["release"]
    assert cmd[cmd.index("--root") + 1] == f"s3://{replica['bucket']}"
    assert cmd[cmd.index("--model") + 1] == model["name"]
    assert cmd[cmd.index("--version") + 1] == model["version"]
    assert container["args"][container["args"].index("--model") + 1] == cmd[cmd.index("--dest") + 1]
    # both images: the same digest as the train stack built, from this region's replica of the repository
    for c, repo in ((container, "vllm"), (init, "inference")):
        built = train.outputs["images"][repo]
        assert built.startswith(train.outputs["repositories"][repo] + "@sha256:")
        assert c["image"] == f"{replica['repositories'][repo]}@{built.split('@')[1]}"
        assert c["image"].split(".")[3] == plan.region


@pytest.mark.parametrize("stack", INFER)
def test_api_keys_are_a_secret_and_the_pod_only_references_it(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (secret,) = _in(plan, SECRET, plan.config["storage"]["inference"]["namespace"])
    assert secret.inputs["stringData"] == "[secret]"  # never in the plan
    pod = _pod(plan)
    (container,) = pod["containers"]
    args = container["args"]
    assert "--api-key" not in args
    config = args[args.index("--config") + 1]  # vLLM reads the keys from the Secret's file
    (mount,) = [m for m in container["volumeMounts"] if config.startswith(m["mountPath"] + "/")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == secret.inputs["metadata"]["name"]
    deployment = _one(plan, DEPLOYMENT)
    assert secret.urn in deployment.dependencies
    assert plan.outputs["inferenceGateKey"] == "[secret]"


@pytest.mark.parametrize("stack", INFER)
def test_grace_period_covers_the_prestop_pause_and_vllms_drain(plan_stack, stack: str) -> None:
    """The plan rule of item 2: terminationGracePeriodSeconds > preStop sleep + --shutdown-timeout."""
    pod = _pod(plan_stack(stack))
    (container,) = pod["containers"]
    prestop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = int(container["args"][container["args"].index("--shutdown-timeout") + 1])
    assert prestop > 0 and drain > 0
    assert pod["terminationGracePeriodSeconds"] > prestop + drain


@pytest.mark.parametrize("stack", INFER)
def test_no_route_without_authentication_and_none_to_metrics(plan_stack, stack: str) -> None:
    """Every path the Ingress routes, under every host (the regional name and the global one), reaches vLLM
    under a prefix it checks the API key on, vLLM reads its keys (--config) and the gate serves exactly these
    paths with a key; /metrics, /health and the rest of the server are not routed."""
    plan = plan_stack(stack)
    rules = _one(plan, INGRESS).inputs["spec"]["rules"]
    assert rules
    for rule in rules:
        routed = [p["path"] for p in rule["http"]["paths"]]
        assert routed and all(p["pathType"] == "Exact" for p in rule["http"]["paths"])
        assert all(p.startswith("/v1/") for p in routed), routed
        assert "/metrics" not in routed and "/health" not in routed and "/" not in routed
        assert set(routed) == set(inf.api_paths(chat=_model(plan).get("engine", {}).get("serve_chat", False)))
    (container,) = _pod(plan)["containers"]
    assert "--config" in container["args"] and inf.GATE_MIDDLEWARE in container["args"]
    gate_paths = next(e["value"] for e in container["env"] if e["name"] == inf.GATE_PATHS_ENV)
    assert set(gate_paths.split(",")) == set(routed)  # the gate serves what the Ingress routes


@pytest.mark.parametrize("stack", INFER)
def test_service_pdb_and_autoscaler_select_the_pods(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    deployment = _one(plan, DEPLOYMENT).inputs["spec"]
    labels = deployment["template"]["metadata"]["labels"]
    assert "replicas" not in deployment  # the HPA owns the count

    def selects(selector: dict) -> bool:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    assert selects(deployment["selector"]["matchLabels"])
    service = _one(plan, SERVICE).inputs["spec"]
    assert selects(service["selector"])
    (container,) = deployment["template"]["spec"]["containers"]
    port_names = {p["name"] for p in container["ports"]}
    (port,) = service["ports"]
    assert port["targetPort"] in port_names
    pdb = _one(plan, PDB).inputs["spec"]
    assert selects(pdb["selector"]["matchLabels"]) and pdb["maxUnavailable"] == 1
    scaled = _one(plan, SCALED_OBJECT).inputs["spec"]
    assert scaled["scaleTargetRef"]["name"] == _one(plan, DEPLOYMENT).inputs["metadata"]["name"]
    replicas = _model(plan)["replicas"]
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (replicas["min"], replicas["max"])
    assert scaled["minReplicaCount"] >= 2


@pytest.mark.parametrize("stack", INFER)
def test_autoscaler_reads_vllms_gauges_from_the_scraped_pods(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (trigger,) = _one(plan, SCALED_OBJECT).inputs["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    # the gauges vLLM 0.33.0 exports (tests/monitoring/emitted/vllm.txt, from its source)
    assert meta["query"].startswith("sum(vllm:num_requests_running{")
    assert "+ sum(vllm:num_requests_waiting{" in meta["query"]
    assert meta["threshold"] == str(_model(plan)["autoscaling"]["target_requests_per_replica"])
    # the job label the query filters on is the one the monitoring PodMonitor writes, on our port name
    monitor = next(
        r
        for r in plan.by_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
        if "inference" in r.name and "router" not in r.name
    )
    (endpoint,) = monitor.inputs["spec"]["podMetricsEndpoints"]
    job = next(r["replacement"] for r in endpoint["relabelings"] if r.get("targetLabel") == "job")
    assert f'job="{job}"' in meta["query"]
    (container,) = _pod(plan)["containers"]
    assert endpoint["port"] in {p["name"] for p in container["ports"]}
    # the Prometheus KEDA asks is the Service kube-prometheus-stack creates: <fullnameOverride>-prometheus
    kps = next(r for r in plan.by_type(RELEASE) if r.inputs["name"] == "kps")
    monitoring_ns = kps.inputs["namespace"]
    service = f"{kps.inputs['values']['fullnameOverride']}-prometheus"
    assert meta["serverAddress"] == f"http://{service}.{monitoring_ns}.svc:9090"


@pytest.mark.parametrize("stack", INFER)
def test_network_policies_let_in_the_alb_prometheus_and_keda_only(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ns = plan.config["storage"]["inference"]["namespace"]
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in _in(plan, POLICY, ns)}
    (container,) = _pod(plan)["containers"]
    port_names = {p["name"] for p in container["ports"]}
    # the ALB reaches the router, the router the servers, nothing else reaches the servers' API port
    (router_container,) = _one(plan, DEPLOYMENT, rd.NAME).inputs["spec"]["template"]["spec"]["containers"]
    alb = policies["router-from-load-balancer"]["ingress"][0]
    assert (
        {p["port"] for p in alb["ports"]} == {rd.PORT_NAME} <= {p["name"] for p in router_container["ports"]}
    )
    servers = policies["servers-from-router"]
    # every model's pods (their Deployment's selector adds the model's own label)
    assert servers["podSelector"]["matchLabels"].items() <= (
        _one(plan, DEPLOYMENT).inputs["spec"]["selector"]["matchLabels"].items()
    )
    assert {p["port"] for p in servers["ingress"][0]["ports"]} <= port_names
    (egress,) = policies["router-to-servers"]["egress"]
    assert egress["to"] == [{"podSelector": servers["podSelector"]}]
    # the ALB sends from the subnets it lives in: the public ones of this VPC for an internet-facing ALB
    public = {
        s.inputs["cidrBlock"]
        for s in plan.by_type("aws:ec2/subnet:Subnet")
        if s.inputs["tags"].get("kubernetes.io/role/elb") == "1"
    }
    assert {peer["ipBlock"]["cidr"] for peer in alb["from"]} == public and len(public) >= 2
    scrape = policies["allow-metrics-scrape"]["ingress"][0]
    assert {p["port"] for p in scrape["ports"]} <= port_names
    # KEDA's namespace may query Prometheus in the monitoring namespace
    keda_ns = plan.config["inference"]["keda"]["namespace"]
    monitoring_ns = plan.config["cluster_services"]["monitoring_namespace"]
    (back,) = [
        p for p in _in(plan, POLICY, monitoring_ns) if p.inputs["metadata"]["name"] == f"allow-from-{keda_ns}"
    ]
    assert back.inputs["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9090}]
    # rollouts wait for the ALB: the namespace asks the controller for readiness gates
    (namespace,) = [
        n for n in plan.by_type("kubernetes:core/v1:Namespace") if n.inputs["metadata"]["name"] == ns
    ]
    assert namespace.inputs["metadata"]["labels"]["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("stack", INFER)
def test_ingress_is_https_only_with_tls13_and_the_validated_certificate(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ingress = _one(plan, INGRESS)
    ann = ingress.inputs["metadata"]["annotations"]
    https = plan.config["inference"]["https"]
    assert ann[f"{ALB}ssl-policy"] == https["tls_policy"] in TLS13_ONLY_POLICIES
    assert ann[f"{ALB}ssl-policy"] == "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09"  # TLS 1.3 + post-quantum
    assert ann[f"{ALB}listen-ports"] == '[{"HTTPS": 443}]'
    assert f"{ALB}ssl-redirect" not in ann
    assert ann[f"{ALB}target-type"] == "ip"
    assert ann[f"{ALB}scheme"] == "internet-facing"
    assert ann[f"{ALB}healthcheck-path"] == "/health"  # vLLM's, answered without a key
    validation = plan.one(
        "aws:acm/certificateValidation:CertificateValidation", "serving-certificate-validation"
    )
    cert = plan.one("aws:acm/certificate:Certificate", "serving-certificate-certificate")
    assert cert.inputs["domainName"] == https["domain"] and cert.inputs["validationMethod"] == "DNS"
    # the regional certificate is the listener's default (the global name's follows: tests/infra/edge)
    assert ann[f"{ALB}certificate-arn"].split(",")[0] == validation.inputs["certificateArn"]
    assert validation.urn in ingress.dependencies  # the listener is created with an issued certificate
    rule = ingress.inputs["spec"]["rules"][0]
    assert rule["host"] == https["domain"]
    # the validation record goes to the configured zone
    records = {r.name: r.inputs for r in plan.by_type("aws:route53/record:Record")}
    assert records["serving-certificate-validation-record"]["zoneId"] == https["dns_zone_id"]


@pytest.mark.parametrize("stack", INFER)
def test_waf_dns_and_ordering(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ingress = _one(plan, INGRESS)
    acl = plan.one("aws:wafv2/webAcl:WebAcl")
    assert acl.inputs["scope"] == "REGIONAL"
    assert (
        f":regional/webacl/{acl.inputs['name']}/"
        in ingress.inputs["metadata"]["annotations"][f"{ALB}wafv2-acl-arn"]
    )
    rules = {r["name"]: r for r in acl.inputs["rules"]}
    crs = rules["AWSManagedRulesCommonRuleSet"]["statement"]["managedRuleGroupStatement"]
    # the 8 KB body limit blocks (nothing only counts)
    assert not crs.get("ruleActionOverrides")
    https = plan.config["inference"]["https"]
    cname = plan.one("aws:route53/record:Record", "serving-dns-cname").inputs
    assert (cname["name"], cname["type"], cname["zoneId"]) == (https["domain"], "CNAME", https["dns_zone_id"])
    assert cname["records"][0].endswith(f".{plan.region}.elb.amazonaws.com")
    # ordering: the controller before the Ingress; the Ingress (its target group binding) before the pods,
    # so the controller injects its readiness gate; the Deployment and KEDA before the ScaledObject
    lbc = next(r for r in plan.by_type(RELEASE) if r.inputs["name"] == "aws-load-balancer-controller")
    keda = next(r for r in plan.by_type(RELEASE) if r.inputs["name"] == "keda")
    deployment = _one(plan, DEPLOYMENT)
    assert lbc.urn in ingress.dependencies and ingress.urn in deployment.dependencies
    scaled = _one(plan, SCALED_OBJECT)
    assert {deployment.urn, keda.urn} <= set(scaled.dependencies)
    assert plan.outputs["inferenceUrl"] == f"https://{https['domain']}"


@pytest.mark.parametrize("stack", INFER)
def test_deployment_is_not_awaited_and_what_hangs_off_it_is_declared(plan_stack, stack: str) -> None:
    """On a fresh platform no release exists yet, so the pods cannot become ready; pulumi must not wait
    for them (ProgressDeadlineExceeded would fail ``up`` and leave the ScaledObject uncreated). The rollout
    gate judges the Deployment instead (infra/ops/health.py)."""
    plan = plan_stack(stack)
    deployment = _one(plan, DEPLOYMENT)
    assert deployment.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    # the objects around it are still declared, the ScaledObject still after the Deployment, and none of
    # them is awaited on the Deployment's readiness any more (the annotation is on the Deployment only)
    scaled = _one(plan, SCALED_OBJECT)
    assert deployment.urn in scaled.dependencies
    for type_ in (PDB, INGRESS, SERVICE, SCALED_OBJECT):
        assert "pulumi.com/skipAwait" not in (_one(plan, type_).inputs["metadata"].get("annotations") or {})


@pytest.mark.parametrize("stack", INFER)
def test_keda_is_pinned_restricted_and_on_system_pools(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    chart = plan.config["inference"]["keda"]
    keda = next(r for r in plan.by_type(RELEASE) if r.inputs["name"] == "keda")
    assert (keda.inputs["chart"], keda.inputs["version"]) == (chart["chart"], chart["version"])
    assert keda.inputs["repositoryOpts"] == {"repo": chart["repo"]}
    assert keda.inputs["namespace"] == chart["namespace"]
    terms = keda.inputs["values"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    (expr,) = [e for e in terms["nodeSelectorTerms"][0]["matchExpressions"] if e["key"] == POOL_LABEL]
    system = {n for n, p in plan.config["node_pools"].items() if not p["gpu"]}
    assert set(expr["values"]) == system
    (namespace,) = [
        n
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if n.inputs["metadata"]["name"] == chart["namespace"]
    ]
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = {p.inputs["metadata"]["name"] for p in _in(plan, POLICY, chart["namespace"])}
    assert {"default-deny", "allow-control-plane", "allow-to-prometheus"} <= policies
    assert any(urn.endswith("::keda-allow-control-plane") for urn in keda.dependencies)


def _variant(stack_config, stack: str, https: dict, **inference) -> Plan:
    raw = stack_config(stack)
    raw["inference"]["https"] = {"domain": raw["inference"]["https"]["domain"], **https}
    # one region's serving on its own: the global endpoint has its tests (tests/infra/edge)
    raw["inference"].pop("global_endpoint", None)
    raw["inference"].update(inference)
    return run_plan(variant_name(raw), parse_platform_config(raw))


def test_internal_alb_with_an_existing_certificate_and_no_waf(stack_config) -> None:
    cert = "arn:aws:acm:ap-east-1:123456789012:certificate/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
    plan = _variant(stack_config, "prod-hk-infer", {"certificate_arn": cert})
    ann = _one(plan, INGRESS).inputs["metadata"]["annotations"]
    assert ann[f"{ALB}scheme"] == "internal" and ann[f"{ALB}certificate-arn"] == cert
    assert ann[f"{ALB}wafv2-acl-arn"] == "none"  # explicit, so an ACL attached earlier is removed
    for type_ in (
        "aws:acm/certificate:Certificate",
        "aws:route53/record:Record",
        "aws:wafv2/webAcl:WebAcl",
    ):
        assert plan.by_type(type_) == [], type_
    # an internal ALB lives in (and sends from) the private subnets
    private = {
        s.inputs["cidrBlock"]
        for s in plan.by_type("aws:ec2/subnet:Subnet")
        if s.inputs["tags"].get("kubernetes.io/role/internal-elb") == "1"
    }
    ns = plan.config["storage"]["inference"]["namespace"]
    (policy,) = [
        p for p in _in(plan, POLICY, ns) if p.inputs["metadata"]["name"] == "router-from-load-balancer"
    ]
    assert {peer["ipBlock"]["cidr"] for peer in policy.inputs["spec"]["ingress"][0]["from"]} == private
    assert validate_plan(plan) == []


def test_existing_web_acl_another_version_and_prebuilt_images(stack_config) -> None:
    acl = (
        "arn:aws:wafv2:ap-southeast-1:123456789012:regional/webacl/edge/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
    )
    image = "public.ecr.aws/example/inference@sha256:" + "b" * 64
    vllm = "public.ecr.aws/example/vllm@sha256:" + "c" * 64
    plan = _variant(
        stack_config,
        "prod-sg-infer",
        {
            "dns_zone_id": "Z0000000000000EXAMPLE",
            "dns_zone_name": "example.com",
            "waf": "arn",
            "waf_acl_arn": acl,
        },
        models={
            "gpt2-small": {
                "release": {"name": "gpt2-small", "version": "20261120T090000Z-step2"},
                "node_pools": ["gpu"],
                "engine": {"serve_chat": True},
            }
        },
        image={"ref": image},
        engine={"image": {"ref": vllm}},
    )
    ann = _one(plan, INGRESS).inputs["metadata"]["annotations"]
    assert ann[f"{ALB}wafv2-acl-arn"] == acl and plan.by_type("aws:wafv2/webAcl:WebAcl") == []
    pod = _pod(plan)
    (container,) = pod["containers"]
    (init,) = pod["initContainers"]
    assert (container["image"], init["image"]) == (vllm, image)
    assert init["command"][init["command"].index("--version") + 1] == "20261120T090000Z-step2"
    assert container["args"][container["args"].index("--model") + 1] == "/models/20261120T090000Z-step2"
    (rule,) = _one(plan, INGRESS).inputs["spec"]["rules"]
    assert "/v1/chat/completions" in [p["path"] for p in rule["http"]["paths"]]


def test_train_stacks_serve_nothing(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    assert plan.by_type(INGRESS) == [] and plan.by_type(SCALED_OBJECT) == []
    assert "inferenceUrl" not in plan.outputs


# Run in its own process: a program stopped by an error mid-registration leaves pulumi's runtime of this
# process unusable for the plans of the tests after it.
_WRONG_KEYS = """
import json, sys
from infra.io.stackfiles import load_stack_config
from infra.plan import runner

plan_config = runner.plan_config

def one_key(cfg):
    config, secrets = plan_config(cfg)
    config["aiplat:inference-api-keys"] = json.dumps(["k" * 40])
    return config, secrets

runner.plan_config = one_key
cfg = load_stack_config("prod-hk-infer")
# without a global endpoint the stack serves with its own secret (with one, the train stack's: infra/edge)
cfg = cfg.model_copy(update={"inference": cfg.inference.model_copy(update={"global_endpoint": None})})
try:
    runner.run_plan("prod-hk-infer", cfg)
except Exception as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_wrong_key_list_stops_the_program_naming_the_secret() -> None:
    """The key list becomes the Secret in one place, and a list of the wrong length stops the deploy there
    (under `pulumi up` too: the same program reads the same secret)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "policies")])}
    r = subprocess.run(
        [sys.executable, "-c", _WRONG_KEYS], cwd=repo, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert "aiplat:inference-api-keys: holds 1 keys, inference.auth.api_key_slots is 2" in r.stdout
    assert "pulumi config set --secret aiplat:inference-api-keys" in r.stdout


@pytest.mark.parametrize("stack", INFER)
def test_the_ingress_sends_to_the_router_which_routes_to_the_served_model(plan_stack, stack: str) -> None:
    """ALB -> the router's Service -> the router pods (two or more, spread, with a PDB and a PodMonitor),
    whose backends file names the vLLM Service and the served model name of the same plan, and whose image
    is the train stack's replicated router build, by digest."""
    plan = plan_stack(stack)
    ns = plan.config["storage"]["inference"]["namespace"]
    for rule in _one(plan, INGRESS).inputs["spec"]["rules"]:
        backends = {p["backend"]["service"]["name"] for p in rule["http"]["paths"]}
        assert backends == {_one(plan, SERVICE, rd.NAME).inputs["metadata"]["name"]}
    router = _one(plan, DEPLOYMENT, rd.NAME).inputs["spec"]
    assert router["replicas"] >= 2
    assert {c["topologyKey"] for c in router["template"]["spec"]["topologySpreadConstraints"]} >= {
        "topology.kubernetes.io/zone"
    }
    assert _one(plan, PDB, rd.NAME).inputs["spec"]["selector"] == router["selector"]
    (container,) = router["template"]["spec"]["containers"]
    assert "--enable-igw" in container["args"]
    assert "@sha256:" in container["image"] and "/router@" in container["image"]
    config = _one(plan, "kubernetes:core/v1:ConfigMap", rd.NAME).inputs["data"]
    served = _one(plan, DEPLOYMENT).inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    served_name = served[served.index("--served-model-name") + 1]
    vllm_service = _one(plan, SERVICE).inputs
    (port,) = vllm_service["spec"]["ports"]
    assert json.loads(config[rd.BACKENDS_FILE_NAME]) == [
        {
            "model_id": served_name,
            "url": f"http://{vllm_service['metadata']['name']}.{ns}.svc:{int(port['port'])}",
        }
    ]
    (monitor,) = [
        r
        for r in plan.by_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
        if r.inputs["metadata"]["name"] == rd.NAME
    ]
    assert monitor.inputs["spec"]["podMetricsEndpoints"][0]["port"] in {p["name"] for p in container["ports"]}
