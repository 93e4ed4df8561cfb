"""The inference server's Kubernetes objects as data: the vLLM Deployment (with the init container that
fetches and verifies the release), the Secret of API keys, Service, PodDisruptionBudget, the KEDA
ScaledObject that owns its HorizontalPodAutoscaler, and the NetworkPolicy that lets the ALB in. Pure, no
Pulumi.

vLLM 0.33.0's OpenAI server (``vllm serve``): one port for the API, ``/health`` (engine alive, never
authenticated) and ``/metrics``; ``--api-key`` guards only paths under ``/v1``, ``/v2``, ``/inference`` and
``/cohere`` (vllm/entrypoints/serve/middleware/authenticate.py GUARDED_PREFIX), so the Ingress routes
nothing else, and our gate (``images/vllm/aiplat_vllm/gate.py``, loaded with ``--middleware``) refuses every
other path in the pod too (``/invocations``, ``/tokenize``, ...) and the routed ones without a key. The keys
reach vLLM in its ``--config`` file, mounted from the Secret (read by vLLM's argument parser:
vllm/utils/argparse_utils.py ``load_config_file`` turns its ``api-key`` list into the option's values inside
the process), never on the command line (``/proc/<pid>/cmdline`` is world-readable on the node) nor in an
environment variable. On SIGTERM it drains in-flight requests for ``--shutdown-timeout`` seconds
(vllm/entrypoints/launchers/launcher.py). The release comes from the fetch tool of our ``inference`` image
(``python -m inference.fetch``: exit 0 once ``--dest`` holds the verified release, else exit 3/4 with one
line on stderr and nothing left behind), into an ``emptyDir`` vLLM loads with no hub access.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.namespaces import PART_OF
from infra.inference.config import size_bytes
from infra.inference.documents.catalog import (
    ADAPTERS_DIR,
    MODEL_LABEL,
    MODELS_DIR,
    PREFIX,
    SERVICE_PORT,
    AdapterSpec,
    LoraSpec,
    adapter_dir,
    model_dir,
)
from infra.pools.documents.nodes import GPU_RESOURCE

# The shared objects: the Ingress and the API keys' Secret (per model: catalog.model_object_name).
NAME = PREFIX
CONTAINER = "server"
FETCH_CONTAINER = "fetch-release"
# One init container per adapter release (fetch-adapter-1, ...): each fails with its own termination message
# naming its release, and they run one after the other, the base first.
FETCH_ADAPTER_CONTAINER = "fetch-adapter"
# The EKS pod identity webhook (IRSA) leaves the containers this pod annotation names without the projected
# token and the AWS_* variables (aws/amazon-eks-pod-identity-webhook README: skip-containers).
SKIP_CONTAINERS_ANNOTATION = "eks.amazonaws.com/skip-containers"
SELECTOR = {"app.kubernetes.io/name": "inference-server"}
LABELS = {**SELECTOR, "app.kubernetes.io/component": "server", **PART_OF}
# One container port for the API, the probes and /metrics (vLLM's default port, FrontendArgs.port). Its
# name is what the monitoring PodMonitor (infra/monitoring/documents.py inference_pod_monitor_spec) and
# the namespace's scrape policy select it by.
PORT = 8000
PORT_NAME = "metrics"
SERVICE_PORT_NAME = "http"
# vLLM's unauthenticated liveness route: 200 while the engine process is alive
# (vllm/entrypoints/serve/instrumentator/health.py).
HEALTH_PATH = "/health"
# Readiness: the model list, behind the API key (so the probe presents one, see readiness_probe).
MODELS_PATH = "/v1/models"
# The path prefixes under which vLLM's --api-key is checked (AuthenticationMiddleware GUARDED_PREFIX,
# vllm/entrypoints/serve/middleware/authenticate.py at 0.33.0); every other path (/metrics, /health,
# /invocations, ...) is served without a key.
VLLM_GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
# The OpenAI routes clients reach through the Ingress (vllm/entrypoints/openai/*/api_router.py).
COMPLETIONS_PATH = "/v1/completions"
CHAT_PATH = "/v1/chat/completions"
TMP_DIR = "/tmp"
# The release signing key's public half (the train stack's output releaseSigningPublicKey), in a ConfigMap
# mounted into the fetch container: it verifies each manifest's signature offline
# (trainer/release/signing.py).
RELEASE_KEY_CONFIG_MAP = "release-signing-key"
RELEASE_KEY_DIR = "/etc/aiplat/release-key"
RELEASE_KEY_FILE = "public.pem"
RELEASE_KEY_ENV = "AIPLAT_RELEASE_PUBLIC_KEY"  # trainer/release/signing.py PUBLIC_KEY_ENV
SHM_DIR = "/dev/shm"
RUN_AS = 10001  # the user of both images (images/inference/Dockerfile, images/vllm/Dockerfile)
# The API keys: one file of the Secret, vLLM's --config file (JSON is YAML; vLLM wants a .yaml name), with
# the ``api-key`` list (FrontendArgs.api_key: list[str], several keys at once). Mounted read-only, mode 0400
# (the kubelet adds group read for the pod's fsGroup, RUN_AS: readable by the pod's uid only, and root).
KEYS_FILE_NAME = "vllm-config.yaml"
KEYS_DIR = "/etc/aiplat/api-keys"
KEYS_FILE = f"{KEYS_DIR}/{KEYS_FILE_NAME}"
KEYS_FIELD = "api-key"
KEYS_FILE_MODE = 0o400
# The gate middleware (images/vllm/aiplat_vllm/gate.py, on the image's PYTHONPATH) and what it reads.
GATE_MIDDLEWARE = "aiplat_vllm.gate.GateMiddleware"
GATE_KEYS_FILE_ENV = "AIPLAT_GATE_KEYS_FILE"
GATE_PATHS_ENV = "AIPLAT_GATE_PATHS"
# Seconds between the end of vLLM's drain and SIGKILL: the engine and API processes exit after it.
SHUTDOWN_MARGIN_S = 15
# Logs and other container writes beyond the emptyDirs (the root filesystem is read-only).
EPHEMERAL_HEADROOM = 1 * 2**30
# The fetch tool's exit codes (C1; inference/fetch.py): what the rollout gate says about a failed fetch.
FETCH_EXIT_CODES = {
    2: "bad arguments or the models volume",
    3: "release missing, partial, corrupt or unsigned",
    4: "release store unreachable",
}
# vLLM sends usage statistics to usage.vllm.ai by default; the NetworkPolicies block it anyway, and the
# hub must never be asked for the model (the release is local). https://docs.vllm.ai/en/latest/usage/usage_stats.html
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """One model's Deployment, everything besides the two images and the release root (which come from the
    training stack and are resolved at deploy time)."""

    model_name: str
    model_version: str
    served_model_name: str
    region: str
    service_account: str
    pool_label: str
    pools: Sequence[str]
    gpu_taint: tuple[str, str]
    cpu: str
    cpu_limit: str | None
    memory: str
    model_volume_size: str
    tmp_size: str
    shm_size: str
    dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    gpus: int
    api_key_slots: int
    prestop_s: int
    shutdown_timeout_s: int
    first_load_timeout_s: int
    # the OpenAI paths the Ingress routes: the only ones the gate serves (with a key)
    api_paths: Sequence[str] = (COMPLETIONS_PATH, MODELS_PATH)
    lora: LoraSpec | None = None
    adapters: Sequence[AdapterSpec] = ()


def selector(s: ServerSpec) -> dict[str, str]:
    """The labels that select one model's pods."""
    return {**SELECTOR, MODEL_LABEL: s.served_model_name}


def api_paths(*, chat: bool) -> list[str]:
    """The paths the Ingress routes: completions, chat completions when the model has a chat template,
    and the model list. All under ``/v1``, so vLLM checks the API key on every one."""
    return [COMPLETIONS_PATH, *([CHAT_PATH] if chat else []), MODELS_PATH]


def termination_grace_s(s: ServerSpec) -> int:
    """terminationGracePeriodSeconds: the preStop pause, vLLM's drain of in-flight requests, then the
    margin for the processes to exit."""
    return s.prestop_s + s.shutdown_timeout_s + SHUTDOWN_MARGIN_S


def ephemeral_storage(s: ServerSpec) -> str:
    """The pod's ephemeral-storage request and limit (on the server container): the disk-backed emptyDirs
    (they count against it) plus headroom for logs, so the scheduler picks a node with room for the
    release."""
    total = size_bytes(s.model_volume_size) + size_bytes(s.tmp_size) + EPHEMERAL_HEADROOM
    return f"{total // 2**20}Mi"


def api_keys_secret_data(
    keys: Sequence[str], *, slots: int, source: str, gate_key: str | None = None
) -> dict[str, str]:
    """The Secret's ``stringData`` for ``keys`` (C2: the one place a key list becomes the Secret): vLLM's
    ``--config`` file with the ``api-key`` list, the clients' keys then ``gate_key`` (the rollout tooling's
    own key, never a client's: ``inferenceGateKey``).

    Exactly ``slots`` distinct keys of at least 32 characters, without whitespace (vLLM compares the whole
    ``Authorization: Bearer <key>`` value); ``source`` names where they came from in errors."""
    if not isinstance(keys, Sequence) or isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise ValueError(
            f"{source}: must be a JSON list of strings; set it with "
            f'`pulumi config set --secret {source} \'["<key1>", "<key2>"]\'`'
        )
    problems = []
    if len(keys) != slots:
        problems.append(f"holds {len(keys)} keys, inference.auth.api_key_slots is {slots}")
    if len(set(keys)) != len(keys):
        problems.append("names a key twice")
    short = [i for i, k in enumerate(keys) if len(k) < 32 or any(c.isspace() for c in k)]
    if short:
        problems.append(f"keys at positions {short} are shorter than 32 characters or contain whitespace")
    if problems:
        raise ValueError(
            f"{source}: {'; '.join(problems)}; set {slots} distinct random keys, e.g. "
            "`openssl rand -hex 32` each, with `pulumi config set --secret "
            f"{source} '[\"<key1>\", ...]'`"
        )
    every = list(keys)
    if gate_key is not None:
        if gate_key in keys or len(gate_key) < 32:
            raise ValueError("the gate key must be a key of its own, at least 32 characters")
        every.append(gate_key)
    return {KEYS_FILE_NAME: json.dumps({KEYS_FIELD: every})}


def vllm_args(s: ServerSpec) -> list[str]:
    """``vllm serve`` arguments. Every flag exists in the pinned vLLM (tests/infra/inference/data). No key
    among them: ``--config`` names the file that holds them."""
    return [
        "--model",
        model_dir(s.model_version),
        "--served-model-name",
        s.served_model_name,
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        "--dtype",
        s.dtype,
        "--max-model-len",
        str(s.max_model_len),
        "--gpu-memory-utilization",
        str(s.gpu_memory_utilization),
        "--max-num-seqs",
        str(s.max_num_seqs),
        "--tensor-parallel-size",
        str(s.gpus),
        "--shutdown-timeout",
        str(s.shutdown_timeout_s),
        # the API keys, from the Secret's file (read inside the process, never on argv)
        "--config",
        KEYS_FILE,
        "--middleware",
        GATE_MIDDLEWARE,
        # Probes and scrapes every few seconds would drown the access log.
        "--disable-access-log-for-endpoints",
        f"{HEALTH_PATH},/metrics",
        "--disable-fastapi-docs",
        *lora_args(s),
    ]


def lora_args(s: ServerSpec) -> list[str]:
    """vLLM's LoRA flags (vllm/engine/arg_utils.py, 0.33.0): the adapters by name and local path, loaded at
    start (no runtime loading: VLLM_ALLOW_RUNTIME_LORA_UPDATING stays unset, so the set served is the
    reviewed one)."""
    if s.lora is None:
        return []
    out = ["--enable-lora", "--max-loras", str(s.lora.max_loras)]
    out += ["--max-lora-rank", str(s.lora.max_lora_rank)]
    if s.lora.max_cpu_loras is not None:
        out += ["--max-cpu-loras", str(s.lora.max_cpu_loras)]
    if s.adapters:
        out += ["--lora-modules", *(f"{a.served_name}={adapter_dir(a.served_name)}" for a in s.adapters)]
    return out


def fetch_args(name: str, version: str, dest: str, *, release_root: Any) -> list[Any]:
    """The fetch tool's command line (C1) for release ``name``/``version`` into ``dest``. ``release_root``
    may be a deploy-time value (a leaf)."""
    return ["python", "-m", "inference.fetch", "--root", release_root, "--model", name, "--version", version,
            "--dest", dest]  # fmt: skip


# Readiness asks /v1/models with the gate key (the last of the file's list): an httpGet probe could only
# carry a key in the pod spec in plain text. Python is in the vLLM image; a non-2xx answer or no answer
# exits non-zero.
_READY_SCRIPT = (
    "import json, urllib.request as u; "
    "k = json.load(open('{file}'))['{field}'][-1]; "
    "u.urlopen(u.Request('http://127.0.0.1:{port}{path}', headers={{'Authorization': 'Bearer ' + k}}), "
    "timeout=4)"
)


def readiness_command() -> list[str]:
    """The readiness probe's command: GET /v1/models with a key read from the keys file."""
    return [
        "python3",
        "-c",
        _READY_SCRIPT.format(port=PORT, path=MODELS_PATH, file=KEYS_FILE, field=KEYS_FIELD),
    ]


def probes() -> dict[str, dict[str, Any]]:
    """startupProbe and livenessProbe on ``/health``, readinessProbe on ``/v1/models``.

    Startup gives vLLM up to 20 minutes to load the release and capture CUDA graphs (``/health`` answers
    only once the engine is up); liveness then restarts a hung engine (``/health`` fails when the engine
    process died). Readiness gates traffic on the model list answering, with a key.
    https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/"""
    http = {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}}
    return {
        "startupProbe": {**http, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 120},
        "livenessProbe": {**http, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
        "readinessProbe": {
            "exec": {"command": readiness_command()},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 2,
            "successThreshold": 1,
        },
    }


def _restricted() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _aws_env(region: str) -> list[dict[str, str]]:
    # Pods cannot read the region from instance metadata (hop limit 1, and the namespace's NetworkPolicies
    # block 169.254.169.254).
    return [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]


def fetch_containers(s: ServerSpec, *, image: Any, release_root: Any) -> list[dict[str, Any]]:
    """The init containers: the base release, then each adapter's, one container per release."""
    base = fetch_container(
        FETCH_CONTAINER,
        fetch_args(s.model_name, s.model_version, model_dir(s.model_version), release_root=release_root),
        s,
        image=image,
    )
    adapters = [
        fetch_container(
            f"{FETCH_ADAPTER_CONTAINER}-{i}",
            fetch_args(
                a.release_name, a.release_version, adapter_dir(a.served_name), release_root=release_root
            ),
            s,
            image=image,
        )
        for i, a in enumerate(s.adapters, start=1)
    ]
    return [base, *adapters]


def fetch_container(name: str, command: list[Any], s: ServerSpec, *, image: Any) -> dict[str, Any]:
    """An init container: fetches and verifies one release into the models volume, or exits non-zero with
    one line naming the release and the reason (the pod never starts vLLM, never becomes ready)."""
    adapters = [{"name": "adapters", "mountPath": ADAPTERS_DIR}] if s.adapters else []
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": [
            *_aws_env(s.region),
            {"name": "HOME", "value": TMP_DIR},
            {"name": RELEASE_KEY_ENV, "value": f"{RELEASE_KEY_DIR}/{RELEASE_KEY_FILE}"},
        ],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"memory": "1Gi"},
        },
        "volumeMounts": [
            {"name": "models", "mountPath": MODELS_DIR},
            *adapters,
            {"name": "tmp", "mountPath": TMP_DIR},
            {"name": "release-key", "mountPath": RELEASE_KEY_DIR, "readOnly": True},
        ],
        # The one stderr line is the termination message kubectl describe shows.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": _restricted(),
    }


def server_container(s: ServerSpec, *, image: Any) -> dict[str, Any]:
    """vLLM's OpenAI server on the verified release, offline."""
    requests = {
        "cpu": s.cpu,
        "memory": s.memory,
        GPU_RESOURCE: str(s.gpus),
        "ephemeral-storage": ephemeral_storage(s),
    }
    limits = {"memory": s.memory, GPU_RESOURCE: str(s.gpus), "ephemeral-storage": ephemeral_storage(s)}
    if s.cpu_limit is not None:
        limits["cpu"] = s.cpu_limit
    env = [
        *({"name": k, "value": v} for k, v in OFFLINE_ENV.items()),
        {"name": "HOME", "value": TMP_DIR},
        # where the gate reads the keys and which paths it serves (a path, not a key)
        {"name": GATE_KEYS_FILE_ENV, "value": KEYS_FILE},
        {"name": GATE_PATHS_ENV, "value": ",".join(s.api_paths)},
    ]
    return {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["vllm", "serve"],
        "args": vllm_args(s),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "env": env,
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": [
            {"name": "models", "mountPath": MODELS_DIR, "readOnly": True},
            *([{"name": "adapters", "mountPath": ADAPTERS_DIR, "readOnly": True}] if s.adapters else []),
            {"name": "tmp", "mountPath": TMP_DIR},
            {"name": "shm", "mountPath": SHM_DIR},
            {"name": "api-keys", "mountPath": KEYS_DIR, "readOnly": True},
        ],
        # The pod is marked terminating at once (readiness false, the ALB deregisters it) but keeps serving
        # this long before vLLM gets SIGTERM and drains.
        "lifecycle": {"preStop": {"sleep": {"seconds": s.prestop_s}}},
        "securityContext": _restricted(),
        **probes(),
    }


def pod_spec(s: ServerSpec, *, image: Any, fetch_image: Any, release_root: Any) -> dict[str, Any]:
    """The pod template's spec: restricted Pod Security, ``gpus`` GPUs on the listed pools, spread over
    zones. ``image``, ``fetch_image`` and ``release_root`` may be deploy-time values (placed as leaves)."""
    taint_key, taint_value = s.gpu_taint
    spread = [
        # Zones: hard, so two replicas never share a zone's fate; per ReplicaSet (pod-template-hash) so a
        # rollout's new pods spread on their own.
        # https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector(s)},
            "matchLabelKeys": ["pod-template-hash"],
        },
        # Nodes: preferred (a multi-GPU node may hold several replicas when capacity is short).
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector(s)},
            "matchLabelKeys": ["pod-template-hash"],
        },
    ]
    return {
        "serviceAccountName": s.service_account,
        # Neither container calls the Kubernetes API; the S3 credentials of the init container come from
        # the pod identity webhook on its own, and only to it (SKIP_CONTAINERS_ANNOTATION).
        "automountServiceAccountToken": False,
        # A Service named inference-* would inject INFERENCE_*_SERVICE_* variables nobody needs.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_s(s),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": s.pool_label, "operator": "In", "values": list(s.pools)}
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [
            {"key": taint_key, "operator": "Equal", "value": taint_value, "effect": "NoSchedule"}
        ],
        "topologySpreadConstraints": spread,
        "initContainers": fetch_containers(s, image=fetch_image, release_root=release_root),
        "containers": [server_container(s, image=image)],
        "volumes": [
            {"name": "models", "emptyDir": {"sizeLimit": s.model_volume_size}},
            *([{"name": "adapters", "emptyDir": {"sizeLimit": s.model_volume_size}}] if s.adapters else []),
            {"name": "tmp", "emptyDir": {"sizeLimit": s.tmp_size}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": s.shm_size}},
            {"name": "release-key", "configMap": {"name": RELEASE_KEY_CONFIG_MAP}},
            # A missing Secret or file stops the pod from starting: never a server without keys.
            {
                "name": "api-keys",
                "secret": {
                    "secretName": NAME,
                    "defaultMode": KEYS_FILE_MODE,
                    "items": [{"key": KEYS_FILE_NAME, "path": KEYS_FILE_NAME, "mode": KEYS_FILE_MODE}],
                },
            },
        ],
    }


def release_key_data(public_key_pem: str) -> dict[str, str]:
    """The ConfigMap data the fetch container reads the release signing key's public half from."""
    if "BEGIN PUBLIC KEY" not in public_key_pem:
        raise ValueError(
            "the train stack's releaseSigningPublicKey output is not a PEM public key; run `pulumi up` on "
            "the train stack first (it creates the release signing key)"
        )
    return {RELEASE_KEY_FILE: public_key_pem}


def deployment_spec(s: ServerSpec, *, image: Any, fetch_image: Any, release_root: Any) -> dict[str, Any]:
    """``Deployment.spec``. No ``replicas``: the HPA owns the count, and a declared one would reset it on
    every update
    (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#migrating-deployments-and-statefulsets-to-horizontal-autoscaling).
    Rollouts add one pod before removing one and never remove a ready pod first (``maxUnavailable: 0``): a
    release that does not verify leaves its new pod in Init:Error and the old ReplicaSet serving; a pod not
    ready within ``first_load_timeout_s`` fails the rollout instead of hanging it."""
    return {
        "selector": {"matchLabels": selector(s)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "progressDeadlineSeconds": s.first_load_timeout_s,
        "revisionHistoryLimit": 10,
        "template": {
            # Only the fetch container holds the release-fetch role: the webhook injects the role's web
            # identity token and AWS_ROLE_ARN into every container but those named here.
            "metadata": {
                "labels": {**LABELS, **selector(s)},
                "annotations": {SKIP_CONTAINERS_ANNOTATION: CONTAINER},
            },
            "spec": pod_spec(s, image=image, fetch_image=fetch_image, release_root=release_root),
        },
    }


def service_spec(s: ServerSpec) -> dict[str, Any]:
    """``Service.spec`` of one model: the ALB's target group (target-type ip registers the pod IPs behind
    it), or the router's backend."""
    return {
        "type": "ClusterIP",
        "selector": selector(s),
        "ports": [
            {"name": SERVICE_PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }


def pdb_spec(s: ServerSpec) -> dict[str, Any]:
    """``PodDisruptionBudget.spec``: node drains (Karpenter, upgrades) evict one replica at a time.

    ``AlwaysAllow`` lets a drain evict pods that are not ready anyway (e.g. a release that does not
    verify), so they never block a node upgrade.
    https://kubernetes.io/docs/tasks/run-application/configure-pdb/#unhealthy-pod-eviction-policy
    """
    return {
        "maxUnavailable": 1,
        "selector": {"matchLabels": selector(s)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


# The gauges the autoscaler reads, per engine (vllm/v1/metrics/loggers.py, 0.33.0).
RUNNING_METRIC = "vllm:num_requests_running"
WAITING_METRIC = "vllm:num_requests_waiting"


def requests_query(namespace: str, job: str, served_name: str) -> str:
    """PromQL: one model's requests running plus waiting, summed over its pods (the PodMonitor's ``job``;
    vLLM labels its metrics ``model_name`` with the served name, vllm/v1/metrics/loggers.py, 0.33.0)."""
    sel = f'{{namespace="{namespace}",job="{job}",model_name="{served_name}"}}'
    return f"sum({RUNNING_METRIC}{sel}) + sum({WAITING_METRIC}{sel})"


@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    """One model's ScaledObject inputs (``target``: its Deployment, and the HPA's name)."""

    target: str
    prometheus_url: str
    query: str
    target_per_replica: int
    min_replicas: int
    max_replicas: int
    scale_down_stabilization_s: int


def scaled_object_spec(a: Autoscaling) -> dict[str, Any]:
    """``ScaledObject.spec`` (keda.sh/v1alpha1, KEDA 2.20): KEDA creates and owns the HPA ``inference``
    with an External metric, target ``AverageValue`` = ``target_per_replica``: desired replicas =
    ceil((running + waiting requests) / target). https://keda.sh/docs/2.20/reference/scaledobject-spec/

    ``ignoreNullValues: "false"``: an empty answer (Prometheus lost the targets) is an error, not 0, so KEDA
    applies the fallback (keep the current count, at least ``min_replicas``) instead of scaling down to the
    minimum in the middle of an outage of the monitoring. https://keda.sh/docs/2.20/scalers/prometheus/
    """
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": a.target},
        "minReplicaCount": a.min_replicas,
        "maxReplicaCount": a.max_replicas,
        "pollingInterval": 15,
        "fallback": {
            "failureThreshold": 3,
            "replicas": a.min_replicas,
            "behavior": "currentReplicasIfHigher",
        },
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "name": a.target,
                "behavior": {
                    # Up at once: a GPU node takes minutes to arrive, so ask early (double, or +4 a minute).
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "selectPolicy": "Max",
                        "policies": [
                            {"type": "Percent", "value": 100, "periodSeconds": 60},
                            {"type": "Pods", "value": 4, "periodSeconds": 60},
                        ],
                    },
                    # Down slowly: one replica per two minutes after the stabilization window.
                    "scaleDown": {
                        "stabilizationWindowSeconds": a.scale_down_stabilization_s,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                    },
                },
            }
        },
        "triggers": [
            {
                "type": "prometheus",
                "name": "requests",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": a.prometheus_url,
                    "query": a.query,
                    "threshold": str(a.target_per_replica),
                    "ignoreNullValues": "false",
                },
            }
        ],
    }


def labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels of the objects around the server (PART_OF and the server's name)."""
    return {**LABELS, **(extra or {})}
