"""The inference server's Kubernetes documents against what the server itself says (its settings parser, its
metrics registry, its routes, its image), and the ALB annotations and KEDA policies against the controllers'
documented formats and ports. ``infra`` may not import ``inference``; the tests tie the two together."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from inference.config import ConfigError, ServerConfig
from inference.metrics import IN_FLIGHT, Metrics
from infra.inference.documents import alb, keda
from infra.inference.documents import inference as inf
from infra.monitoring import documents as mon

REPO = Path(__file__).resolve().parents[4]
SPEC = inf.ServerSpec(
    model_name="gpt2-small",
    region="ap-east-1",
    service_account="inference",
    pool_label="aiplat.io/pool",
    pools=["gpu"],
    gpu_taint=("nvidia.com/gpu", "true"),
    cpu="3",
    cpu_limit=None,
    memory="12Gi",
    cache_size="20Gi",
    tmp_size="2Gi",
    drain_delay_s=15,
    graceful_shutdown_s=60,
    request_timeout_s=60,
    first_load_timeout_s=1800,
)
IMAGE = "123456789012.dkr.ecr.ap-east-1.amazonaws.com/aiplat-prod/inference@sha256:" + "a" * 64
ROOT = "s3://aiplat-prod-ap-east-1-artifacts"


def _container(spec: inf.ServerSpec = SPEC) -> dict:
    (container,) = inf.deployment_spec(spec, image=IMAGE, release_root=ROOT)["template"]["spec"]["containers"]
    return container


def _server_config(spec: inf.ServerSpec = SPEC) -> ServerConfig:
    """What the server makes of the environment the Deployment gives it (its own parser)."""
    return ServerConfig.from_env({e["name"]: e["value"] for e in _container(spec)["env"]})


def test_the_server_accepts_the_environment_and_reads_our_values() -> None:
    cfg = _server_config(replace(SPEC, pin_version="20261130T100100Z-step4"))
    assert (cfg.release_root, cfg.model_name, cfg.pin_version) == (
        ROOT,
        "gpt2-small",
        "20261130T100100Z-step4",
    )
    assert (cfg.drain_delay_s, cfg.graceful_shutdown_s, cfg.request_timeout_s) == (15, 60, 60)
    assert cfg.http_port == inf.PORT and cfg.cache_dir == inf.CACHE_DIR
    # without a pin the variable is absent: the server follows the newest release
    assert "INFERENCE_PIN_VERSION" not in {e["name"] for e in _container()["env"]}
    assert _server_config().pin_version == ""


def test_an_unknown_setting_would_stop_the_server() -> None:
    """Why server_env may only hold variables the server knows: it refuses the rest (exit 2)."""
    env = {e["name"]: e["value"] for e in _container()["env"]}
    with pytest.raises(ConfigError, match="INFERENCE_DRAIN_DELAY"):
        ServerConfig.from_env({**env, "INFERENCE_DRAIN_DELAY": "5"})


def test_grace_period_covers_the_servers_drain_and_grace() -> None:
    """terminationGracePeriodSeconds > drain delay + graceful shutdown + 5 (inference/serve.py), for our
    settings and for the server's own defaults."""
    pod = inf.deployment_spec(SPEC, image=IMAGE, release_root=ROOT)["template"]["spec"]
    cfg = _server_config()
    assert pod["terminationGracePeriodSeconds"] > cfg.drain_delay_s + cfg.graceful_shutdown_s + 5
    defaults = ServerConfig(release_root=ROOT, model_name="m")
    spec = replace(
        SPEC, drain_delay_s=int(defaults.drain_delay_s), graceful_shutdown_s=int(defaults.graceful_shutdown_s)
    )
    assert inf.termination_grace_s(spec) > defaults.drain_delay_s + defaults.graceful_shutdown_s + 5


def test_autoscaling_metric_is_the_gauge_the_server_exports() -> None:
    exported = {m.name: m.type for m in Metrics().registry.collect()}
    assert inf.IN_FLIGHT_METRIC == IN_FLIGHT and exported[IN_FLIGHT] == "gauge"
    query = inf.in_flight_query("inference", mon.INFERENCE_JOB)
    assert query == f'sum({IN_FLIGHT}{{namespace="inference",job="aiplat-inference"}})'


def _routes() -> set[str]:
    """Paths the server's FastAPI app declares (decorators in inference/app.py)."""
    tree = ast.parse((REPO / "inference" / "app.py").read_text())
    paths = set()
    for node in ast.walk(tree):
        is_get = (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        )
        if is_get and node.args and isinstance(node.args[0], ast.Constant):
            paths.add(node.args[0].value)
    return paths


def test_probes_use_the_servers_routes_and_only_readiness_looks_at_the_model() -> None:
    container = _container()
    assert {inf.LIVENESS_PATH, inf.READINESS_PATH, "/metrics"} <= _routes()
    port_names = {p["name"] for p in container["ports"]}
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[kind]["httpGet"]["port"] in port_names
    # probes that restart the container never ask for the model: no release is not a reason to restart
    assert container["startupProbe"]["httpGet"]["path"] == inf.LIVENESS_PATH
    assert container["livenessProbe"]["httpGet"]["path"] == inf.LIVENESS_PATH
    assert container["readinessProbe"]["httpGet"]["path"] == inf.READINESS_PATH


def test_port_user_and_cache_match_the_image() -> None:
    dockerfile = (REPO / "images" / "inference" / "Dockerfile").read_text()
    assert f"EXPOSE {inf.PORT}" in dockerfile
    assert re.search(rf"^USER {inf.RUN_AS}:{inf.RUN_AS}$", dockerfile, re.M)
    assert f"INFERENCE_CACHE_DIR={inf.CACHE_DIR}" in dockerfile
    container = _container()
    assert container["ports"] == [{"name": inf.PORT_NAME, "containerPort": inf.PORT, "protocol": "TCP"}]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {inf.CACHE_DIR, inf.TMP_DIR}


def test_pod_is_restricted_and_non_root() -> None:
    pod = inf.deployment_spec(SPEC, image=IMAGE, release_root=ROOT)["template"]["spec"]
    sc = _container()["securityContext"]
    assert sc == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["securityContext"]["runAsUser"] == inf.RUN_AS != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False and pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all(set(v) == {"name", "emptyDir"} for v in volumes.values())  # no hostPath, no PVC


def test_one_gpu_and_ephemeral_storage_for_both_volumes() -> None:
    res = _container()["resources"]
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "1"
    assert res["requests"]["memory"] == res["limits"]["memory"] == "12Gi"
    assert "cpu" not in res["limits"]
    # 20Gi + 2Gi + 1Gi of headroom, in Mi
    assert res["requests"]["ephemeral-storage"] == res["limits"]["ephemeral-storage"] == f"{23 * 1024}Mi"
    assert _container(replace(SPEC, cpu_limit="6"))["resources"]["limits"]["cpu"] == "6"


def test_selectors_match_the_pods() -> None:
    deployment = inf.deployment_spec(SPEC, image=IMAGE, release_root=ROOT)
    labels = deployment["template"]["metadata"]["labels"]

    def selects(selector: dict) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert selects(deployment["selector"]["matchLabels"])
    assert selects(inf.service_spec()["selector"])
    assert selects(inf.pdb_spec()["selector"]["matchLabels"])
    assert selects(inf.load_balancer_ingress_policy(["10.0.0.0/24"])["podSelector"]["matchLabels"])
    for c in deployment["template"]["spec"]["topologySpreadConstraints"]:
        assert selects(c["labelSelector"]["matchLabels"])
    (port,) = inf.service_spec()["ports"]
    assert port["targetPort"] == inf.PORT_NAME


def test_deployment_leaves_the_replica_count_to_the_autoscaler_and_never_drops_capacity() -> None:
    deployment = inf.deployment_spec(SPEC, image=IMAGE, release_root=ROOT)
    assert "replicas" not in deployment
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert deployment["progressDeadlineSeconds"] == SPEC.first_load_timeout_s
    zone = deployment["template"]["spec"]["topologySpreadConstraints"][0]
    assert (zone["topologyKey"], zone["whenUnsatisfiable"]) == (
        "topology.kubernetes.io/zone",
        "DoNotSchedule",
    )


def test_scaled_object_targets_the_deployment_with_a_safe_fallback() -> None:
    a = inf.Autoscaling(
        prometheus_url="http://kps-prometheus.monitoring.svc:9090",
        query=inf.in_flight_query("inference", mon.INFERENCE_JOB),
        target_in_flight=8,
        min_replicas=2,
        max_replicas=8,
        scale_down_stabilization_s=300,
    )
    spec = inf.scaled_object_spec(a)
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": inf.NAME}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 8)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "8" and IN_FLIGHT in trigger["metadata"]["query"]
    # an empty answer is an error (fallback keeps the replicas), not 0 (which would scale down)
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["name"] == inf.NAME
    down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] == 300


INGRESS = alb.IngressSpec(
    internet_facing=True,
    tls_policy="ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
    health_path=inf.READINESS_PATH,
    request_timeout_s=60,
    deregistration_delay_s=75,
    inbound_cidrs=["0.0.0.0/0"],
    tags={"CostCenter": "ml-platform", "Owner": "ml@example.com"},
)
CERT = "arn:aws:acm:ap-east-1:123456789012:certificate/90c7180f-e24a-555c-8d2c-26493c3fe093"


def test_ingress_annotations_https_only_with_the_tls_policy() -> None:
    ann = {
        k.removeprefix(alb.PREFIX): v
        for k, v in alb.ingress_annotations(INGRESS, certificate_arn=CERT, waf_acl_arn=None).items()
    }
    assert all(isinstance(v, str) for v in ann.values())
    assert json.loads(ann["listen-ports"]) == [{"HTTP": 80}, {"HTTPS": 443}]
    assert ann["ssl-redirect"] == "443"  # HTTP only redirects
    assert ann["ssl-policy"] == "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09"
    assert ann["certificate-arn"] == CERT
    assert (ann["scheme"], ann["target-type"]) == ("internet-facing", "ip")
    assert ann["healthcheck-path"] == inf.READINESS_PATH
    assert ann["wafv2-acl-arn"] == "none"  # explicit: an absent annotation leaves an old ACL attached
    lb = dict(kv.split("=") for kv in ann["load-balancer-attributes"].split(","))
    assert int(lb["idle_timeout.timeout_seconds"]) > INGRESS.request_timeout_s
    tg = dict(kv.split("=") for kv in ann["target-group-attributes"].split(","))
    assert tg["deregistration_delay.timeout_seconds"] == "75"
    assert ann["tags"] == "CostCenter=ml-platform,Owner=ml@example.com"
    internal = alb.ingress_annotations(
        replace(INGRESS, internet_facing=False), certificate_arn=CERT, waf_acl_arn="arn:x"
    )
    assert internal[f"{alb.PREFIX}scheme"] == "internal" and internal[f"{alb.PREFIX}wafv2-acl-arn"] == "arn:x"


def test_annotation_maps_refuse_what_they_cannot_encode() -> None:
    with pytest.raises(ValueError, match="Team=a,b: ',' and '=' cannot be written"):
        alb.ingress_annotations(
            replace(INGRESS, tags={"Team": "a,b"}), certificate_arn=CERT, waf_acl_arn=None
        )


def test_ingress_routes_the_host_to_the_service_port() -> None:
    spec = alb.ingress_spec(host="hk.example.com", service=inf.NAME, service_port=inf.SERVICE_PORT_NAME)
    (rule,) = spec["rules"]
    (path,) = rule["http"]["paths"]
    assert spec["ingressClassName"] == alb.INGRESS_CLASS and rule["host"] == "hk.example.com"
    assert path["backend"]["service"] == {"name": inf.NAME, "port": {"name": inf.SERVICE_PORT_NAME}}
    assert {p["name"] for p in inf.service_spec()["ports"]} == {inf.SERVICE_PORT_NAME}


def test_keda_namespace_admits_the_control_plane_and_reaches_prometheus_only_on_its_port() -> None:
    policies = keda.namespace_policies(
        vpc_cidr="10.30.0.0/16", monitoring_namespace="monitoring", prometheus_port=9090
    )
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    (cp,) = policies["allow-control-plane"]["ingress"]
    assert cp["from"] == [{"ipBlock": {"cidr": "10.30.0.0/16"}}]
    assert {p["port"] for p in cp["ports"]} == {keda.METRICS_SERVER_PORT, keda.WEBHOOK_PORT}
    (prom,) = policies["allow-to-prometheus"]["egress"]
    assert prom["ports"] == [{"protocol": "TCP", "port": 9090}]
    https = policies["allow-https-egress"]["egress"][0]["to"][0]["ipBlock"]
    assert "169.254.169.254/32" in https["except"]
    back = keda.prometheus_from_keda_policy(keda_namespace="keda", prometheus_port=9090)
    assert back["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}}
    ]


def test_keda_chart_ports_are_the_ones_the_policies_open() -> None:
    """The ports in infra/inference/documents/keda.py are the chart's (kedacore/charts v2.20.2 values.yaml:
    service
    portHttpsTarget 6443, webhooks.port default 9443 in templates/webhooks/deployment.yaml)."""
    assert (keda.METRICS_SERVER_PORT, keda.WEBHOOK_PORT, keda.OPERATOR_GRPC_PORT) == (6443, 9443, 9666)
    values = keda.keda_values(system_pools=["system"])
    assert values["networkPolicy"] == {"enabled": False}
    assert values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_prometheus_address_is_the_service_the_chart_creates() -> None:
    """kube-prometheus-stack names Prometheus' Service <fullname>-prometheus; fullnameOverride makes it
    kps-prometheus (templates/prometheus/service.yaml, _helpers.tpl at 88.5.3)."""
    values = mon.kube_prometheus_stack_values(
        mon.StackValues(
            cluster_name="c",
            system_pools=["system"],
            retention="15d",
            retention_size=None,
            storage_class="gp3",
            prometheus_storage="100Gi",
            prometheus_replicas=1,
            scrape_interval="30s",
            alertmanager_storage="10Gi",
            alertmanager_config={},
        )
    )
    assert f"{values['fullnameOverride']}-prometheus" == mon.PROMETHEUS_SERVICE
