"""The inference server's Kubernetes documents against what vLLM itself accepts (the flags, the
authentication and the routes of the pinned version, recorded from its source), the fetch tool's contract
(C1), the images, and the ALB annotations and KEDA policies against the controllers' documented formats and
ports."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from infra.inference.config import VLLM_VERSION
from infra.inference.documents import alb, catalog, keda
from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.monitoring import documents as mon

REPO = Path(__file__).resolve().parents[4]
DATA = REPO / "tests" / "infra" / "inference" / "data"
VERSION = "20261130T100100Z-step4"
SPEC = inf.ServerSpec(
    model_name="gpt2-small",
    model_version=VERSION,
    served_model_name="gpt2-small",
    region="ap-east-1",
    service_account="inference",
    pool_label="aiplat.io/pool",
    pools=["gpu"],
    gpu_taint=("nvidia.com/gpu", "true"),
    cpu="3",
    cpu_limit=None,
    memory="16Gi",
    model_volume_size="20Gi",
    tmp_size="10Gi",
    shm_size="2Gi",
    dtype="float16",
    max_model_len=1024,
    gpu_memory_utilization=0.9,
    max_num_seqs=256,
    gpus=1,
    api_key_slots=2,
    prestop_s=15,
    shutdown_timeout_s=60,
    first_load_timeout_s=1800,
)
IMAGE = "123456789012.dkr.ecr.ap-east-1.amazonaws.com/aiplat-prod/vllm@sha256:" + "a" * 64
FETCH_IMAGE = "123456789012.dkr.ecr.ap-east-1.amazonaws.com/aiplat-prod/inference@sha256:" + "b" * 64
ROOT = "s3://aiplat-prod-ap-east-1-artifacts"
KEYS = ["k" * 32, "m" * 40]


def _pod(spec: inf.ServerSpec = SPEC) -> dict:
    return inf.deployment_spec(spec, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)["template"][
        "spec"
    ]


def _container(spec: inf.ServerSpec = SPEC) -> dict:
    (container,) = _pod(spec)["containers"]
    return container


def _recorded(name: str) -> tuple[str, list[str]]:
    """(header, entries) of a file record_vllm.py wrote from the pinned vLLM's source."""
    lines = (DATA / name).read_text().splitlines()
    return lines[0], [ln for ln in lines if ln and not ln.startswith("#")]


def _flags(args: list[str]) -> dict[str, list[str]]:
    """Flag -> its values, as argparse reads ``args``."""
    out: dict[str, list[str]] = {}
    current = None
    for a in args:
        if a.startswith("--"):
            current = a
            out[a] = []
        else:
            assert current is not None, f"a value before any flag: {a}"
            out[current].append(a)
    return out


def test_the_recorded_vllm_data_is_of_the_pinned_version() -> None:
    """The flag list, the metric names and the auth lines were read from the wheel of VLLM_VERSION, and
    the image is built from that version's vllm/vllm-openai tag."""
    for name in ("vllm-serve-flags.txt", "vllm-auth.txt"):
        header, _ = _recorded(name)
        assert f"vLLM {VLLM_VERSION} (PyPI wheel vllm-{VLLM_VERSION})" in header
    metrics_header = (REPO / "tests" / "monitoring" / "emitted" / "vllm.txt").read_text().splitlines()[0]
    assert f"vLLM {VLLM_VERSION} " in metrics_header
    dockerfile = (REPO / "images" / "vllm" / "Dockerfile").read_text()
    assert re.search(
        rf"^ARG VLLM_IMAGE=docker\.io/vllm/vllm-openai:v{re.escape(VLLM_VERSION)}$", dockerfile, re.M
    )


def test_every_flag_exists_in_the_pinned_vllm() -> None:
    """Every flag the Deployment passes is one ``vllm serve`` of the pinned version registers
    (tests/infra/inference/data/vllm-serve-flags.txt, from vllm/engine/arg_utils.py and
    vllm/entrypoints/common/cli_args.py of the vllm 0.33.0 wheel)."""
    _, known = _recorded("vllm-serve-flags.txt")
    passed = set(_flags(inf.vllm_args(SPEC)))
    assert passed and passed <= set(known), passed - set(known)
    # what the check catches: flags older vLLM releases took and 0.33.0 does not (it would exit with
    # "unrecognized arguments" and the pod would crash-loop)
    assert not {"--guided-decoding-backend", "--swap-space", "--num-scheduler-steps"} & set(known)


def test_engine_settings_reach_vllm() -> None:
    spec = replace(SPEC, gpus=4, dtype="bfloat16", max_model_len=512, max_num_seqs=64)
    flags = _flags(_container(spec)["args"])
    assert flags["--tensor-parallel-size"] == ["4"]
    assert _container(spec)["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert (flags["--dtype"], flags["--max-model-len"], flags["--max-num-seqs"]) == (
        ["bfloat16"],
        ["512"],
        ["64"],
    )
    assert flags["--gpu-memory-utilization"] == ["0.9"] and flags["--served-model-name"] == ["gpt2-small"]
    assert flags["--port"] == [str(inf.PORT)]
    assert _container(spec)["command"] == ["vllm", "serve"]


def test_vllm_loads_the_release_the_init_container_verified_offline() -> None:
    """C1: the fetch tool's command line, its --dest is vLLM's --model, on the shared emptyDir."""
    pod = _pod()
    (init,) = pod["initContainers"]
    cmd = init["command"]
    assert cmd[:3] == ["python", "-m", "inference.fetch"]
    fetch = _flags(cmd[3:])
    assert fetch == {
        "--root": [ROOT],
        "--model": ["gpt2-small"],
        "--version": [VERSION],
        "--dest": [catalog.model_dir(VERSION)],
    }
    assert init["image"] == FETCH_IMAGE
    server = _container()
    assert _flags(server["args"])["--model"] == fetch["--dest"]
    # the destination's parent is the models volume in both containers (the tool writes only there)
    parent = str(Path(fetch["--dest"][0]).parent)
    mounts = {c["name"]: {m["mountPath"]: m["name"] for m in c["volumeMounts"]} for c in (init, server)}
    assert mounts[init["name"]][parent] == mounts[server["name"]][parent] == "models"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["models"]["emptyDir"] == {"sizeLimit": "20Gi"}
    env = {e["name"]: e.get("value") for e in server["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    assert {e["name"]: e["value"] for e in init["env"]}["AWS_REGION"] == "ap-east-1"


def test_api_keys_come_from_the_secret_and_never_appear_in_the_pod() -> None:
    """vLLM reads the keys from its --config file, the Secret's one file mounted read-only 0400; nothing
    of a key is on the command line or in an environment variable."""
    container = _container()
    flags = _flags(container["args"])
    assert "--api-key" not in flags
    assert flags["--config"] == [inf.KEYS_FILE] and flags["--middleware"] == [inf.GATE_MIDDLEWARE]
    assert not any("valueFrom" in e for e in container["env"])
    pod = _pod()
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == inf.KEYS_DIR]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == inf.NAME and "optional" not in volume["secret"]  # no start
    assert volume["secret"]["items"] == [
        {"key": inf.KEYS_FILE_NAME, "path": inf.KEYS_FILE_NAME, "mode": 0o400}
    ]
    data = inf.api_keys_secret_data(KEYS, slots=2, source="aiplat:inference-api-keys", gate_key="g" * 40)
    assert json.loads(data[inf.KEYS_FILE_NAME]) == {"api-key": [*KEYS, "g" * 40]}
    assert not any(k in json.dumps(pod) for k in KEYS)
    with pytest.raises(ValueError, match="gate key must be a key of its own"):
        inf.api_keys_secret_data(KEYS, slots=2, source="s", gate_key=KEYS[0])


def test_vllm_takes_several_keys_and_guards_every_routed_path() -> None:
    """C2 rests on two lines of vLLM 0.33.0 (tests/infra/inference/data/vllm-auth.txt):
    vllm/entrypoints/common/cli_args.py FrontendArgs.api_key is a list (several keys at once, since
    vllm-project/vllm#18548), and vllm/entrypoints/serve/middleware/authenticate.py checks the key only
    under GUARDED_PREFIX. Every path the Ingress routes is under it; /metrics and /health are not."""
    _, lines = _recorded("vllm-auth.txt")
    auth = dict(ln.split(": ", 1) for ln in lines)
    assert auth["vllm/entrypoints/common/cli_args.py"] == "api_key: list[str] | None = None"
    guarded = ast.literal_eval(auth["vllm/entrypoints/serve/middleware/authenticate.py"].split(" = ", 1)[1])
    for chat in (False, True):
        paths = inf.api_paths(chat=chat)
        assert all(p.startswith(tuple(f"{g}/" for g in guarded)) for p in paths), paths
        assert "/metrics" not in paths and inf.HEALTH_PATH not in paths
    assert inf.CHAT_PATH in inf.api_paths(chat=True) and inf.CHAT_PATH not in inf.api_paths(chat=False)
    assert not inf.HEALTH_PATH.startswith(guarded)  # probes and ALB health checks need no key


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["k" * 32], "holds 1 keys, inference.auth.api_key_slots is 2"),
        (["k" * 32, "k" * 32], "names a key twice"),
        (["k" * 32, "short"], "keys at positions [1] are shorter than 32 characters"),
        (["k" * 32, "m" * 31 + " "], "contain whitespace"),
        ("k" * 64, "must be a JSON list of strings"),
    ],
)
def test_bad_key_lists_are_refused_naming_the_secret(keys, message) -> None:
    with pytest.raises(ValueError) as info:
        inf.api_keys_secret_data(keys, slots=2, source="aiplat:inference-api-keys")
    assert message in str(info.value)
    assert "aiplat:inference-api-keys" in str(info.value) and "pulumi config set --secret" in str(info.value)


def test_probes_liveness_on_health_readiness_on_the_model_list_with_a_key() -> None:
    container = _container()
    for kind in ("startupProbe", "livenessProbe"):
        assert container[kind]["httpGet"] == {"path": inf.HEALTH_PATH, "port": inf.PORT_NAME}
    assert inf.PORT_NAME in {p["name"] for p in container["ports"]}
    command = container["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    script = command[2]
    ast.parse(script)  # valid Python
    assert f"http://127.0.0.1:{inf.PORT}{inf.MODELS_PATH}" in script
    # the key from the mounted keys file (the file vLLM's --config names), never from the environment
    assert f"open('{_flags(container['args'])['--config'][0]}')" in script and "environ" not in script


def test_grace_period_covers_the_prestop_pause_and_vllms_drain() -> None:
    """terminationGracePeriodSeconds > preStop sleep + --shutdown-timeout (the plan's Deployments are
    checked the same way in tests/infra/inference/test_wire.py)."""
    for spec in (SPEC, replace(SPEC, prestop_s=0, shutdown_timeout_s=300)):
        pod = _pod(spec)
        container = pod["containers"][0]
        prestop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        (drain,) = _flags(container["args"])["--shutdown-timeout"]
        assert prestop == spec.prestop_s
        assert pod["terminationGracePeriodSeconds"] > prestop + int(drain)


def test_pod_is_restricted_and_non_root() -> None:
    pod = _pod()
    for c in (*pod["initContainers"], *pod["containers"]):
        assert c["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        }
    assert pod["securityContext"]["runAsUser"] == inf.RUN_AS != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False and pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    key = volumes.pop("release-key")  # the release signing key's public half, read-only
    assert key == {"name": "release-key", "configMap": {"name": inf.RELEASE_KEY_CONFIG_MAP}}
    keys = volumes.pop("api-keys")  # the API keys' file, from the Secret
    assert keys["secret"]["secretName"] == inf.NAME
    assert all(set(v) == {"name", "emptyDir"} for v in volumes.values())  # no hostPath, no PVC
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
    for name in ("vllm", "inference"):
        assert re.search(
            rf"^USER {inf.RUN_AS}:{inf.RUN_AS}$", (REPO / "images" / name / "Dockerfile").read_text(), re.M
        )
    assert f"EXPOSE {inf.PORT}" in (REPO / "images" / "vllm" / "Dockerfile").read_text()


def test_gpus_and_ephemeral_storage_for_the_volumes() -> None:
    res = _container()["resources"]
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "1"
    assert res["requests"]["memory"] == res["limits"]["memory"] == "16Gi"
    assert "cpu" not in res["limits"]
    # 20Gi + 10Gi + 1Gi of headroom, in Mi
    assert res["requests"]["ephemeral-storage"] == res["limits"]["ephemeral-storage"] == f"{31 * 1024}Mi"
    assert _container(replace(SPEC, cpu_limit="6"))["resources"]["limits"]["cpu"] == "6"


def test_selectors_match_the_pods() -> None:
    deployment = inf.deployment_spec(SPEC, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)
    labels = deployment["template"]["metadata"]["labels"]

    def selects(selector: dict) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert selects(deployment["selector"]["matchLabels"])
    assert selects(inf.service_spec(SPEC)["selector"])
    assert selects(inf.pdb_spec(SPEC)["selector"]["matchLabels"])
    # the router's policies select the servers by the same labels
    assert selects(rd.backends_from_router_policy(inf.SELECTOR, inf.PORT_NAME)["podSelector"]["matchLabels"])
    for c in deployment["template"]["spec"]["topologySpreadConstraints"]:
        assert selects(c["labelSelector"]["matchLabels"])
    (port,) = inf.service_spec(SPEC)["ports"]
    assert port["targetPort"] == inf.PORT_NAME
    # another model's pods: its own selectors never take these pods, the router's policy admits both
    other = replace(SPEC, served_model_name="llama-3b", model_name="llama-3b")
    other_labels = inf.deployment_spec(other, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)[
        "template"
    ]["metadata"]["labels"]
    for selector in (inf.service_spec(other)["selector"], inf.pdb_spec(other)["selector"]["matchLabels"]):
        assert not selects(selector) and all(other_labels.get(k) == v for k, v in selector.items())
    policy = rd.backends_from_router_policy(inf.SELECTOR, inf.PORT_NAME)["podSelector"]["matchLabels"]
    assert all(other_labels.get(k) == v for k, v in policy.items())


def test_deployment_leaves_the_replica_count_to_the_autoscaler_and_never_drops_capacity() -> None:
    deployment = inf.deployment_spec(SPEC, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)
    assert "replicas" not in deployment
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert deployment["progressDeadlineSeconds"] == SPEC.first_load_timeout_s
    zone = deployment["template"]["spec"]["topologySpreadConstraints"][0]
    assert (zone["topologyKey"], zone["whenUnsatisfiable"]) == (
        "topology.kubernetes.io/zone",
        "DoNotSchedule",
    )


def test_scaled_object_scales_on_running_plus_waiting_with_a_safe_fallback() -> None:
    a = inf.Autoscaling(
        target=catalog.model_object_name("gpt2-small"),
        prometheus_url="http://kps-prometheus.monitoring.svc:9090",
        query=inf.requests_query("inference", mon.INFERENCE_JOB, "gpt2-small"),
        target_per_replica=32,
        min_replicas=2,
        max_replicas=8,
        scale_down_stabilization_s=300,
    )
    spec = inf.scaled_object_spec(a)
    target = "inference-gpt2-small"
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": target}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 8)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "32"
    query = trigger["metadata"]["query"]
    # one model's requests: vLLM labels its series with the served name (model_name)
    sel = '{namespace="inference",job="aiplat-inference",model_name="gpt2-small"}'
    assert query == f"sum(vllm:num_requests_running{sel}) + sum(vllm:num_requests_waiting{sel})"
    # an empty answer is an error (fallback keeps the replicas), not 0 (which would scale down)
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["name"] == target
    down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] == 300


INGRESS = alb.IngressSpec(
    internet_facing=True,
    tls_policy="ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
    health_path=inf.HEALTH_PATH,
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
    assert json.loads(ann["listen-ports"]) == [{"HTTPS": 443}]  # no port-80 listener at all
    assert "ssl-redirect" not in ann
    assert ann["ssl-policy"] == "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09"
    assert ann["certificate-arn"] == CERT
    assert (ann["scheme"], ann["target-type"]) == ("internet-facing", "ip")
    assert ann["healthcheck-path"] == inf.HEALTH_PATH
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


def test_ingress_routes_exactly_the_api_paths_to_the_service_port() -> None:
    paths = inf.api_paths(chat=False)
    service = catalog.model_object_name(SPEC.served_model_name)
    spec = alb.ingress_spec(
        host="hk.example.com", service=service, service_port=inf.SERVICE_PORT_NAME, paths=paths
    )
    (rule,) = spec["rules"]
    assert spec["ingressClassName"] == alb.INGRESS_CLASS and rule["host"] == "hk.example.com"
    routed = rule["http"]["paths"]
    assert [(p["path"], p["pathType"]) for p in routed] == [(p, "Exact") for p in paths]
    for p in routed:
        assert p["backend"]["service"] == {"name": service, "port": {"name": inf.SERVICE_PORT_NAME}}
    assert {p["name"] for p in inf.service_spec(SPEC)["ports"]} == {inf.SERVICE_PORT_NAME}


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
            namespace="monitoring",
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


LORA = replace(
    SPEC,
    served_model_name="llama-3b",
    model_name="llama-3b",
    lora=catalog.LoraSpec(max_loras=4, max_lora_rank=16, max_cpu_loras=8),
    adapters=(
        catalog.AdapterSpec(served_name="support-bot", release_name="support-bot", release_version=VERSION),
        catalog.AdapterSpec(
            served_name="sql-bot", release_name="sql-lora", release_version="20261201T000000Z-step9"
        ),
    ),
)


def test_adapters_reach_vllm_with_flags_of_the_pinned_version() -> None:
    """The base's Deployment serves its adapters: vLLM's LoRA flags (each registered by 0.33.0), every
    adapter by its served name at the folder its own init container fills."""
    _, known = _recorded("vllm-serve-flags.txt")
    args = inf.vllm_args(LORA)
    passed = set(_flags(args))
    assert {"--enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras", "--lora-modules"} <= passed
    assert passed <= set(known), passed - set(known)
    flags = _flags(args)
    assert (flags["--max-loras"], flags["--max-lora-rank"], flags["--max-cpu-loras"]) == (
        ["4"],
        ["16"],
        ["8"],
    )
    modules = dict(m.split("=", 1) for m in flags["--lora-modules"])
    pod = _pod(LORA)
    base, *adapters = pod["initContainers"]
    assert base["name"] == inf.FETCH_CONTAINER
    assert [c["name"] for c in adapters] == ["fetch-adapter-1", "fetch-adapter-2"]
    fetched = {}
    for c in adapters:
        cmd = c["command"]
        dest = cmd[cmd.index("--dest") + 1]
        fetched[dest] = (cmd[cmd.index("--model") + 1], cmd[cmd.index("--version") + 1])
        assert cmd[cmd.index("--root") + 1] == ROOT and c["image"] == FETCH_IMAGE
        # the fetch tool's --dest parent must exist: the adapters volume's mount
        (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == dest.rsplit("/", 1)[0]]
        assert mount["name"] == "adapters"
    assert {modules[a.served_name]: (a.release_name, a.release_version) for a in LORA.adapters} == fetched
    (server,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
    assert all(mounts[path.rsplit("/", 1)[0]]["readOnly"] for path in modules.values())
    assert "adapters" in {v["name"] for v in pod["volumes"]}
    # the server container alone skips the S3 role: every fetch container gets it
    annotation = inf.deployment_spec(LORA, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)[
        "template"
    ]["metadata"]["annotations"][inf.SKIP_CONTAINERS_ANNOTATION]
    assert annotation == inf.CONTAINER
    # without adapters: no LoRA flag, no adapters volume
    assert not {f for f in _flags(inf.vllm_args(SPEC)) if "lora" in f}
    assert "adapters" not in {v["name"] for v in _pod()["volumes"]}


def test_model_object_names_are_service_names_and_distinct() -> None:
    """Names of one model's objects: DNS-1035 labels (what a Service name must be), distinct for served
    names that differ only in '.', '_' or '-', and within 63 characters for the longest served name."""
    names = ["gpt2-small", "gpt2.small", "gpt2_small", "a" * 63, "a" * 62 + "b", "llama-3.1-8b"]
    objects = [catalog.model_object_name(n) for n in names]
    assert objects[0] == "inference-gpt2-small"
    assert len(set(objects)) == len(objects)
    assert all(re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", o) for o in objects), objects


def test_backends_name_every_served_name_and_its_service() -> None:
    """The router's table: each base and each adapter -> the base's Service and port."""
    table = catalog.backends([SPEC, LORA])
    assert [(b.served_name, b.model, b.adapter, b.service) for b in table] == [
        ("gpt2-small", "gpt2-small", False, "inference-gpt2-small"),
        ("llama-3b", "llama-3b", False, "inference-llama-3b"),
        ("support-bot", "llama-3b", True, "inference-llama-3b"),
        ("sql-bot", "llama-3b", True, "inference-llama-3b"),
    ]
    assert {b.port for b in table} == {inf.service_spec(SPEC)["ports"][0]["port"]}


def test_the_rollout_gate_reads_the_releases_the_deployment_fetches() -> None:
    """The gate (infra/ops/health.py) reads the releases off the Deployment these documents build: the base's
    and each adapter's, at their versions; another version is the stack's change not applied."""
    from infra.ops.health import fetched_releases, releases_problem

    deployment = {"spec": inf.deployment_spec(LORA, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)}
    want = {LORA.model_name: VERSION, **{a.release_name: a.release_version for a in LORA.adapters}}
    assert fetched_releases(deployment) == want
    assert releases_problem(deployment, want) is None
    assert releases_problem(deployment, {**want, "sql-lora": "latest"}) is None
    older = "20261120T100100Z-step2"
    assert releases_problem(deployment, {**want, "sql-lora": older}) == (
        f"the rolled-out Deployment serves sql-lora 20261201T000000Z-step9, not {older}: the stack's change "
        "is not applied (run the rollout again)"
    )
    assert "fetches no release 'other'" in str(releases_problem(deployment, {"other": VERSION}))
