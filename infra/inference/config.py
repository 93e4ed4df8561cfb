"""Config of model serving on an infer stack: vLLM's OpenAI-compatible server on GPU nodes, the release it
loads (fetched and verified by an init container), its autoscaling (KEDA on vLLM's running + waiting
requests), and HTTPS through the AWS Load Balancer Controller (ALB, ACM, optional WAF).

The API keys clients present are not here: they are the Pulumi secret ``aiplat:inference-api-keys`` (a JSON
list, ``auth.api_key_slots`` long). Checks that look at other sections (the node pools named here, the
certificate's region, the TLS policy, monitoring) are rules (``infra/inference/rules.py``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from infra.core.charts import ChartPin
from infra.core.config import CPU_QUANTITY, Strict, check_image_by_digest, check_log_retention
from infra.core.trainjobs import quantity_mib
from infra.edge.config import GlobalEndpointConfig
from infra.services.config import NAMESPACE_PATTERN

# A model name as trainer.release.publish writes releases under (release/<model>/), e.g. gpt2-small.
MODEL_NAME = r"^[a-z0-9][a-z0-9._-]{0,62}$"
# A release folder name written by trainer.release.publish (trainer/release/manifest.py), e.g.
# 20261130T100100Z-step4.
RELEASE_VERSION = r"^\d{8}T\d{6}Z-step\d+$"
# The fetch tool's moving version: the newest release that verifies (only where model.allow_latest).
LATEST = "latest"
# vLLM release the engine image and every flag the Deployment passes are checked against: PyPI vllm 0.33.0
# (2026-11, wheel commit g4ba787ec9), the newest release when pinned (2026-12-02). Flags and metric names
# of this version: tests/infra/inference/data/vllm-serve-flags.txt, tests/monitoring/emitted/vllm.txt.
VLLM_VERSION = "0.33.0"
# The Pulumi secret holding the API keys (a JSON list of strings): `pulumi config set --secret --path`.
API_KEYS_SECRET = "inference-api-keys"
DIGEST = r"^sha256:[0-9a-f]{64}$"
# Kubernetes quantities this section takes (CPU: cores or millicores; sizes: binary units).
CPU = CPU_QUANTITY
SIZE = r"^[1-9][0-9]*(Mi|Gi|Ti)$"
# A DNS name (RFC 1123 labels, lower case), at least two labels, at most 253 characters (the length is
# checked with max_length: pydantic's regex engine has no look-ahead).
DOMAIN = r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$"
# Route 53 hosted zone IDs: 'Z' followed by upper-case letters and digits.
ZONE_ID = r"^Z[A-Z0-9]{1,31}$"
ACM_ARN = r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$"
WAF_ARN = r"^arn:aws[a-z-]*:wafv2:[a-z0-9-]*:\d{12}:[a-z]+/webacl/[A-Za-z0-9_-]{1,128}/[0-9a-f-]{36}$"
ELB_POLICY = r"^ELBSecurityPolicy-[A-Za-z0-9-]+$"
# The TLS 1.3-only policy with hybrid post-quantum key exchange (ML-KEM), on ALB and NLB:
# https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html
DEFAULT_TLS_POLICY = "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09"


def size_bytes(quantity: str) -> int:
    """Bytes of a ``SIZE`` quantity such as ``20Gi``, read by the model's one quantity parser
    (``trainjobs.quantity_mib``, exact for the Mi/Gi/Ti that ``SIZE`` allows)."""
    return quantity_mib(quantity) * 2**20


class Exposure(StrEnum):
    """Where clients reach the load balancer from: ``internal`` (inside the VPC and networks routed to it;
    the ALB gets private addresses in the private subnets) or ``internet_facing`` (public subnets)."""

    internal = "internal"
    internet_facing = "internet_facing"


class WafMode(StrEnum):
    """``off``: no web ACL (the annotation says ``none``, so one attached by hand is removed); ``create``: a
    regional web ACL made by this stack (AWS managed rule groups and a rate limit); ``arn``: an existing
    regional web ACL."""

    off = "off"
    create = "create"
    arn = "arn"


class ImageConfig(Strict):
    """An image, always by digest (a tag can be moved, a digest cannot).

    By default the image the training stack (``storage.source_stack``) builds into its ``<repository>``
    (its ``images`` output), run from that repository's replica in this region: ECR replication copies it
    with the same digest (``artifactReplicas.<region>.repositories``). ``digest`` picks another image of
    that repository (e.g. the previous one, to roll back); ``ref`` names a prebuilt image anywhere the
    nodes can pull from. At most one of the two."""

    repository: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = Field(
        "inference", description="Repository of the train stack (a name in its registry.repositories)."
    )
    digest: Annotated[str, Field(pattern=DIGEST)] | None = Field(
        None,
        description="sha256:<64 hex> of an image in that repository; None: the one the train stack built.",
    )
    ref: str | None = Field(
        None, description="A prebuilt image by digest, '<registry>/<repository>@sha256:<64 hex>'."
    )

    @field_validator("ref")
    @classmethod
    def _by_digest(cls, v: str | None) -> str | None:
        return check_image_by_digest(v)

    @model_validator(mode="after")
    def _one(self) -> ImageConfig:
        if self.digest is not None and self.ref is not None:
            raise ValueError(
                "set at most one of digest (an image of the train stack's replicated repository) and ref "
                "(a full image reference by digest)"
            )
        return self


class EngineImageConfig(ImageConfig):
    """The vLLM image (see ImageConfig): by default the train stack's build of images/vllm/Dockerfile."""

    repository: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = Field(
        "vllm", description="Repository of the train stack (a name in its registry.repositories)."
    )


class ReplicasConfig(Strict):
    """How many server pods: at least two, spread over zones, so a drained or lost node never stops
    serving."""

    min: Annotated[int, Field(ge=2, le=100)] = Field(
        2, description="Fewest replicas (the HPA's minReplicas)."
    )
    max: Annotated[int, Field(ge=2, le=100)] = Field(8, description="Most replicas (the HPA's maxReplicas).")

    @model_validator(mode="after")
    def _order(self) -> ReplicasConfig:
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}; make max at least min")
        return self


class KedaChart(ChartPin):
    """KEDA: the external metrics adapter behind the HorizontalPodAutoscaler (its ScaledObject creates and
    owns the HPA). Chosen over prometheus-adapter, which SIG Autoscaling is deprecating in favour of KEDA
    (kubernetes-sigs/prometheus-adapter#701)."""

    repo: str = Field(
        "https://kedacore.github.io/charts",
        description="Chart repository: https Helm repository or oci:// registry path.",
    )
    chart: str = Field("keda", description="Chart name.")
    version: str = Field(
        "2.20.2",
        description="Default: kedacore/charts keda/Chart.yaml 2.20.2 (appVersion 2.20.2; tag v2.20.2, "
        "2026-07-31). CRDs are templates of the release (keda/templates/crds) and upgrade with it.",
    )
    namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "keda", description="Namespace of KEDA's operator, metrics server and webhooks."
    )


class AutoscalingConfig(Strict):
    """Scale replicas on vLLM's ``vllm:num_requests_running + vllm:num_requests_waiting`` per pod (what a
    GPU replica is busy with; CPU use says little about a GPU server), read from Prometheus by KEDA."""

    target_requests_per_replica: Annotated[int, Field(ge=1, le=4096)] = Field(
        32,
        description="Average running + waiting requests per replica the HPA aims for. Keep it below "
        "engine.max_num_seqs (requests past that wait for a slot): default 32 of 256, where a GPT-2 "
        "replica's time per output token stays flat.",
    )
    scale_down_stabilization_s: Annotated[int, Field(ge=0, le=3600)] = Field(
        300, description="The HPA scales down to the highest recommendation of this window (seconds)."
    )


class ResourcesConfig(Strict):
    """Per replica: engine.gpus_per_pod GPUs; CPU, memory and the writable volumes as set here."""

    cpu: Annotated[str, Field(pattern=CPU)] = Field("3", description="CPU request (cores or millicores).")
    cpu_limit: Annotated[str, Field(pattern=CPU)] | None = Field(
        None, description="CPU limit; None: no limit (a CPU limit throttles tokenization and scheduling)."
    )
    memory: Annotated[str, Field(pattern=SIZE)] = Field(
        "16Gi",
        description="Memory request and limit (equal: the pod is never the first evicted). vLLM holds the "
        "weights in host memory while loading them, plus its CUDA graphs and tokenizer.",
    )
    model_volume_size: Annotated[str, Field(pattern=SIZE)] = Field(
        "20Gi",
        description="emptyDir at /models the init container downloads the release into (one release, "
        "plus the fetch tool's temporary sibling folder while it verifies).",
    )
    tmp_size: Annotated[str, Field(pattern=SIZE)] = Field(
        "10Gi",
        description="emptyDir at /tmp (HOME): vLLM's torch.compile and Triton caches live under ~/.cache.",
    )
    shm_size: Annotated[str, Field(pattern=SIZE)] = Field(
        "2Gi",
        description="Memory-backed emptyDir at /dev/shm (counts against memory): NCCL between the "
        "tensor-parallel workers and vLLM's process communication need more than the runtime's 64 MiB.",
    )


class ServerConfig(Strict):
    """How a pod stops and starts: a preStop pause while the ALB deregisters it, then vLLM's own drain
    (``--shutdown-timeout``); the pod's termination grace period is derived from both."""

    prestop_s: Annotated[int, Field(ge=0, le=300)] = Field(
        15,
        description="preStop sleep: after the pod is marked terminating it keeps serving this long while "
        "the ALB deregisters it (new requests stop arriving), before vLLM gets SIGTERM.",
    )
    shutdown_timeout_s: Annotated[int, Field(ge=1, le=900)] = Field(
        60,
        description="vLLM --shutdown-timeout: after SIGTERM in-flight requests get this long to finish "
        "(vllm/config/vllm.py shutdown_timeout, 0.33.0: 0 aborts them); keep it at least "
        "request_timeout_s.",
    )
    request_timeout_s: Annotated[int, Field(ge=1, le=900)] = Field(
        60,
        description="The longest generation clients wait for: the ALB's idle timeout is this plus a "
        "margin (non-streamed responses are silent until answered).",
    )
    first_load_timeout_s: Annotated[int, Field(ge=300, le=7200)] = Field(
        1800,
        description="How long a new pod may take to become ready (GPU node launch, image pull, release "
        "download and verification, model load and CUDA graph capture): the Deployment's "
        "progressDeadlineSeconds and how long aiplat rollout's health gate waits for the rollout (pulumi "
        "does not wait for it).",
    )


class HttpsConfig(Strict):
    """HTTPS through the AWS Load Balancer Controller: an ALB with a TLS 1.3 listener on 443 and no other
    (no port-80 listener, not even a redirect), the certificate from ACM."""

    domain: Annotated[str, Field(pattern=DOMAIN, max_length=253)] = Field(
        description="Name clients use (the certificate's and the Ingress host), e.g. hk.api.example.com."
    )
    certificate_arn: Annotated[str, Field(pattern=ACM_ARN)] | None = Field(
        None, description="An existing ACM certificate for domain, in this stack's region."
    )
    dns_zone_id: Annotated[str, Field(pattern=ZONE_ID)] | None = Field(
        None,
        description="Route 53 hosted zone of dns_zone_name: the stack creates a DNS-validated ACM "
        "certificate for domain and a CNAME from domain to the ALB.",
    )
    dns_zone_name: Annotated[str, Field(pattern=DOMAIN, max_length=253)] | None = Field(
        None, description="Name of that zone (domain must be below it); with dns_zone_id."
    )
    exposure: Exposure = Field(
        Exposure.internal, description="internal or internet_facing (public subnets, public addresses)."
    )
    inbound_cidrs: list[str] = Field(
        default_factory=lambda: ["0.0.0.0/0"],
        min_length=1,
        description="Client CIDRs the ALB's security group admits on 80 and 443.",
    )
    tls_policy: Annotated[str, Field(pattern=ELB_POLICY)] = Field(
        DEFAULT_TLS_POLICY,
        description="ELB security policy of the HTTPS listener, TLS 1.3 only. Default: TLS 1.3 with hybrid "
        "post-quantum key exchange (ML-KEM); the controller's own default, ELBSecurityPolicy-2016-08, "
        "allows TLS 1.0. https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
        "describe-ssl-policies.html",
    )
    waf: WafMode = Field(WafMode.off, description="off, create or arn (see waf_acl_arn).")
    waf_acl_arn: Annotated[str, Field(pattern=WAF_ARN)] | None = Field(
        None,
        description="With waf: arn, the regional WAFv2 web ACL to attach, of the stack's region and account "
        "(the load balancer controller may attach no other).",
    )
    waf_rate_limit: Annotated[int, Field(ge=10, le=2_000_000_000)] = Field(
        2000, description="With waf: create, requests per client IP per 5 minutes before it is blocked."
    )
    waf_log_retention_days: int = Field(
        365,
        description="With waf: create, days the web ACL's request logs (CloudWatch Logs group "
        "aws-waf-logs-<stack>-inference, under the logs key, Authorization header redacted) are kept.",
    )
    waf_count_rules: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")]] = Field(
        default_factory=list,
        description="With waf: create, rules of AWSManagedRulesCommonRuleSet that only count instead of "
        "blocking. Default none: its 8 KB body limit (SizeRestrictions_BODY) blocks, and a prompt of "
        "engine.max_model_len tokens fits in it (rule inference-body-limit).",
    )

    @field_validator("waf_log_retention_days")
    @classmethod
    def _waf_retention(cls, v: int) -> int:
        return check_log_retention(v)

    @field_validator("inbound_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for c in v:
            try:
                ipaddress.ip_network(c, strict=True)
            except ValueError as exc:
                raise ValueError(f"{c!r} is not a CIDR ({exc})") from None
        return v

    @model_validator(mode="after")
    def _zone_pair(self) -> HttpsConfig:
        if (self.dns_zone_id is None) != (self.dns_zone_name is None):
            raise ValueError("dns_zone_id and dns_zone_name go together; set both or neither")
        if self.waf_acl_arn is not None and self.waf is not WafMode.arn:
            raise ValueError(f"waf_acl_arn is set but waf is {self.waf.value!r}; set waf: arn or remove it")
        return self


class ModelConfig(Strict):
    """The release served: ``release/<name>/<version>/`` of the region's replica bucket. Promotion and
    rollback are a change of ``version`` rolled out with ``aiplat rollout``; no pod follows ``release/``
    by itself."""

    name: Annotated[str, Field(pattern=MODEL_NAME)] = Field(
        description="The --model-name releases are published under (trainer.release.publish)."
    )
    version: str = Field(
        description="The release version, e.g. 20261130T100100Z-step4; 'latest' (the newest release that "
        "verifies, resolved when a pod starts) only with allow_latest."
    )
    allow_latest: bool = Field(
        False,
        description="Allow version: latest (a dev stack); production names a version, so every model "
        "change is a reviewed rollout.",
    )

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v != LATEST and not re.match(RELEASE_VERSION, v):
            raise ValueError(
                f"{v!r} is not a release version; use a folder name under release/<model>/ such as "
                f"20261130T100100Z-step4, or {LATEST!r} (with allow_latest)"
            )
        return v


class Dtype(StrEnum):
    """vLLM ``--dtype``. ``auto``: follow the release: vLLM runs its config.json dtype, a float32 release in
    bfloat16 where the GPU has it and float16 where not (T4), a bfloat16 release in float16 on a GPU without
    bfloat16 (vllm/config/model.py ``_resolve_auto_dtype``, 0.33.0); where the pools mix GPUs with and
    without bfloat16 (the instance-type table, ``infra/core/instance_types.py``) the pods get float16, the
    one dtype all of them compute in."""

    auto = "auto"
    bfloat16 = "bfloat16"
    float16 = "float16"


class EngineConfig(Strict):
    """The vLLM release and image every model of the stack runs (one image: each model's engine settings
    are flags of its own Deployment, ``ModelEngineConfig``)."""

    vllm_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        VLLM_VERSION,
        description="vLLM release of the image (images/vllm/Dockerfile, vllm/vllm-openai:v<version>). "
        "Default: PyPI vllm 0.33.0 (2026-11), the newest on 2026-12-02.",
    )
    image: EngineImageConfig = Field(
        default_factory=lambda: EngineImageConfig(),
        description="The vLLM image: by default the train stack's build of images/vllm/Dockerfile "
        "(repository vllm), replicated to this region by ECR.",
    )


class ModelEngineConfig(Strict):
    """One model's vLLM engine settings (``vllm serve`` flags; each one exists in ``engine.vllm_version``:
    tested against the flags that version registers). Defaults: vLLM's own where it has a good one, with the
    source named."""

    dtype: Dtype = Field(Dtype.auto, description="--dtype: auto, bfloat16 or float16 (see Dtype).")
    max_model_len: Annotated[int, Field(ge=16, le=1_048_576)] = Field(
        1024,
        description="--max-model-len: prompt + completion tokens. Default: GPT-2's n_positions (1024); "
        "vLLM refuses more than the release's config.json allows.",
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=0.98)] = Field(
        0.9,
        description="--gpu-memory-utilization: share of GPU memory for weights, activations and the KV "
        "cache (vLLM's default 0.9, vllm/config/cache.py).",
    )
    max_num_seqs: Annotated[int, Field(ge=1, le=4096)] = Field(
        256,
        description="--max-num-seqs: sequences one replica runs at once; more wait (the scaling metric "
        "counts both). 256: vLLM's default for the OpenAI server on GPUs below 70 GiB "
        "(vllm/engine/arg_utils.py, 0.33.0).",
    )
    gpus_per_pod: Annotated[int, Field(ge=1, le=8)] = Field(
        1, description="GPUs per replica = --tensor-parallel-size (all on one node)."
    )
    serve_chat: bool = Field(
        False,
        description="Route /v1/chat/completions too: only for a release whose tokenizer has a chat template "
        "(its manifest's serving.chat_template; aiplat rollout refuses it otherwise, as vLLM would answer "
        "every chat request 400). The bundled trainer's GPT-2 releases have none.",
    )


# --max-lora-rank takes only these ranks: vLLM's MaxLoRARanks (vllm/config/lora.py,
# https://github.com/vllm-project/vllm/blob/a78dc92f43ae2471dd40675a47079aa1a9a157c1/vllm/config/lora.py).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class LoraConfig(Strict):
    """vLLM's LoRA serving of one base model (``--enable-lora``): how many adapters run in one batch and the
    largest rank any of them may have (vLLM sizes its LoRA buffers by both at start)."""

    max_loras: Annotated[int, Field(ge=1, le=64)] = Field(
        4, description="--max-loras: adapters in one batch (vLLM's default 1, vllm/config/lora.py)."
    )
    max_lora_rank: int = Field(
        16,
        description=f"--max-lora-rank: the largest adapter rank served, one of {list(LORA_RANKS)} "
        "(vLLM's MaxLoRARanks; default 16, vLLM's).",
    )
    max_cpu_loras: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        None,
        description="--max-cpu-loras: adapters kept in host memory (at least max_loras); None: vLLM's "
        "default, max_loras.",
    )

    @field_validator("max_lora_rank")
    @classmethod
    def _rank(cls, v: int) -> int:
        if v not in LORA_RANKS:
            raise ValueError(f"{v} is not a rank vLLM accepts; use one of {list(LORA_RANKS)}")
        return v

    @model_validator(mode="after")
    def _cpu(self) -> LoraConfig:
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras {self.max_cpu_loras} < max_loras {self.max_loras} (vLLM refuses it); "
                "raise max_cpu_loras or leave it unset"
            )
        return self


class AdapterConfig(Strict):
    """A LoRA adapter release served by its base model's Deployment under the adapter's map key."""

    release: ModelConfig = Field(
        description="The adapter's release (release/<name>/<version>/: adapter_config.json and "
        "adapter_model.safetensors, its manifest naming the base release)."
    )


PoolName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")]
# The name clients send (``"model": ...``), the key of inference.models and of adapters: a MODEL_NAME that
# also ends in a letter or digit, so it is a Kubernetes label value (the model's pods carry it).
SERVED_NAME = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
ServedName = Annotated[str, Field(pattern=SERVED_NAME)]


class ServedModelConfig(Strict):
    """One base model of the stack: its release, engine settings, GPU pools, replicas and autoscaling, and
    the LoRA adapters its Deployment serves. Each model is its own vLLM Deployment, Service, PDB and KEDA
    ScaledObject, named after the model's key."""

    release: ModelConfig
    engine: ModelEngineConfig = Field(default_factory=lambda: ModelEngineConfig())
    node_pools: list[PoolName] = Field(
        min_length=1,
        description="GPU pools the model's pods may run on (Karpenter NodePools or managed GPU node groups), "
        "by their aiplat.io/pool label.",
    )
    replicas: ReplicasConfig = Field(default_factory=lambda: ReplicasConfig())
    autoscaling: AutoscalingConfig = Field(default_factory=lambda: AutoscalingConfig())
    resources: ResourcesConfig = Field(default_factory=lambda: ResourcesConfig())
    lora: LoraConfig | None = Field(
        None, description="LoRA serving (--enable-lora); required when adapters names any."
    )
    adapters: dict[ServedName, AdapterConfig] = Field(
        default_factory=dict,
        description="LoRA adapters this model's pods serve, keyed by the name clients send "
        "(--lora-modules name=path); each fetched and verified by the init container like the base.",
    )

    @field_validator("node_pools")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a pool twice; name each once")
        return v

    @model_validator(mode="after")
    def _lora(self) -> ServedModelConfig:
        if self.adapters and self.lora is None:
            raise ValueError(
                f"adapters {sorted(self.adapters)} need LoRA serving; add lora: {{max_loras: "
                f"{max(len(self.adapters), 4)}, max_lora_rank: 16}} (max_lora_rank at least the adapters' "
                "rank)"
            )
        return self


class AuthConfig(Strict):
    """Who may call the API: API keys checked by vLLM (``--api-key``, several at once), held in the Pulumi
    secret ``aiplat:inference-api-keys`` (a JSON list). Rotation: replace one key at a time."""

    api_key_slots: Annotated[int, Field(ge=2, le=8)] = Field(
        2,
        description="How many keys the secret holds (each a slot of the Kubernetes Secret and of "
        "--api-key). At least two, so a new key is valid before the old one goes.",
    )


# The per-model keys of the single-model section (before inference.models), and the engine fields that moved
# into each model's engine: what the migration message moves.
_OLD_MODEL_KEYS = ("node_pools", "replicas", "resources")
_SHARED_ENGINE_KEYS = ("vllm_version", "image")


def migrated_section(old: Mapping[str, Any]) -> dict[str, Any]:
    """The ``models`` form of a single-model ``inference`` section (with ``model:``): what the refusal
    tells the user to write instead."""
    new = {k: v for k, v in old.items() if k not in ("model", "engine", "autoscaling", *_OLD_MODEL_KEYS)}
    model = dict(old.get("model") or {})
    engine = dict(old.get("engine") or {})
    autoscaling = dict(old.get("autoscaling") or {})
    served = engine.pop("served_model_name", None) or model.get("name", "<model>")
    one: dict[str, Any] = {"release": model}
    own_engine = {k: v for k, v in engine.items() if k not in _SHARED_ENGINE_KEYS}
    if own_engine:
        one["engine"] = own_engine
    one.update({k: old[k] for k in _OLD_MODEL_KEYS if k in old})
    if "keda" in autoscaling:
        new["keda"] = autoscaling.pop("keda")
    if autoscaling:
        one["autoscaling"] = autoscaling
    shared_engine = {k: v for k, v in engine.items() if k in _SHARED_ENGINE_KEYS}
    if shared_engine:
        new["engine"] = shared_engine
    return {"models": {served: one}, **new}


class InferenceConfig(Strict):
    """Model serving (infer stacks): vLLM on GPU nodes behind HTTPS (docs/inference/cluster.md), one
    Deployment per model of ``models``; the ALB, certificate, API keys, KEDA and the global name are
    shared."""

    models: dict[ServedName, ServedModelConfig] = Field(
        min_length=1,
        description="The base models served, keyed by the name clients send (the OpenAI 'model' field, "
        "vLLM's --served-model-name). Adding a model adds its own objects; it never replaces another's.",
    )
    image: ImageConfig = Field(
        default_factory=lambda: ImageConfig(),
        description="The image of the release fetch tool (python -m inference.fetch), the init containers.",
    )
    engine: EngineConfig = Field(default_factory=lambda: EngineConfig())
    keda: KedaChart = Field(
        default_factory=lambda: KedaChart(), description="KEDA, which scales every model's Deployment."
    )
    auth: AuthConfig = Field(default_factory=lambda: AuthConfig())
    server: ServerConfig = Field(default_factory=lambda: ServerConfig())
    https: HttpsConfig
    router: RouterConfig = Field(
        default_factory=lambda: RouterConfig(),
        description="The model-name router the Ingress sends every request to (docs/inference/router.md).",
    )
    global_endpoint: GlobalEndpointConfig | None = Field(
        None,
        description="One name for every infer stack of the environment, routed to the nearest region that "
        "can serve (docs/inference/global-endpoint.md); None: the regional name only.",
    )

    @model_validator(mode="before")
    @classmethod
    def _single_model(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "model" in data:
            # JSON is YAML's flow style: the message's section pastes into the stack file as it is
            new = json.dumps({"inference": migrated_section(data)})
            raise ValueError(
                "'model' is the single-model form: an infer stack now serves a map of models keyed by the "
                "name clients send, each with its own release, engine settings (dtype, max_model_len, "
                "gpu_memory_utilization, max_num_seqs, gpus_per_pod, serve_chat), node_pools, replicas, "
                "autoscaling and resources, while engine.vllm_version/image and keda (was "
                f"autoscaling.keda) stay shared; write the section as {new}"
            )
        return data

    @model_validator(mode="after")
    def _names(self) -> InferenceConfig:
        seen = {name: f"models.{name}" for name in self.models}
        for name, model in self.models.items():
            for adapter in model.adapters:
                where = f"models.{name}.adapters.{adapter}"
                if adapter in seen:
                    raise ValueError(
                        f"{where}: the served name {adapter!r} is also {seen[adapter]}: clients pick a model "
                        "by this name, so it must be unique in the stack; rename one"
                    )
                seen[adapter] = where
        return self

    def served_names(self) -> dict[str, str]:
        """Every name clients may send -> the base model (key of ``models``) whose pods answer it."""
        out = {}
        for name, model in self.models.items():
            out[name] = name
            out.update({adapter: name for adapter in model.adapters})
        return out


# The router's section subclasses ImageConfig above, so it is imported once this module has defined it.
from infra.inference.router.config import RouterConfig  # noqa: E402

InferenceConfig.model_rebuild()
