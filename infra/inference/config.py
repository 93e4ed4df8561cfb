"""Config of model serving on an infer stack: the inference server's Deployment, its autoscaling (KEDA on the
server's in-flight requests), and HTTPS through the AWS Load Balancer Controller (ALB, ACM, optional WAF).

The server's own settings and probes are ``inference/serve.py``'s; what this section decides is where it
runs, how many replicas, how it drains, and how clients reach it. Checks that look at other sections (the
node pools named here, the certificate's region, the TLS policy, monitoring) are rules
(``infra/inference/rules.py``).
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.core.charts import ChartPin
from infra.core.config import CPU_QUANTITY, Strict, check_image_by_digest
from infra.core.trainjobs import quantity_mib
from infra.edge.config import GlobalEndpointConfig
from infra.services.config import NAMESPACE_PATTERN

# The server's model name rule (inference/config.py: INFERENCE_MODEL_NAME).
MODEL_NAME = r"^[a-z0-9][a-z0-9._-]{0,62}$"
# A release folder name written by trainer.publish (trainer/release.py), e.g. 20261130T100100Z-step4.
RELEASE_VERSION = r"^\d{8}T\d{6}Z-step\d+$"
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
    """The server image, always by digest (a tag can be moved, a digest cannot).

    By default the image the training stack (``storage.source_stack``) builds into its ``<repository>``
    (its ``images`` output), run from that repository's replica in this region: ECR replication copies it
    with the same digest (``artifactReplicas.<region>.repositories``). ``digest`` picks another image of
    that repository (e.g. the previous one, to roll back the server); ``ref`` names a prebuilt image
    anywhere the nodes can pull from. At most one of the two."""

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
    """Scale replicas on ``inference_requests_in_flight`` per pod (requests queued or generating: what a
    GPU replica is busy with; CPU use says little about a GPU server), read from Prometheus by KEDA."""

    target_in_flight: Annotated[int, Field(ge=1, le=1024)] = Field(
        8,
        description="Average in-flight requests per replica the HPA aims for (below the server's batch "
        "size, 16, keeps queueing short; above it trades latency for fewer GPUs).",
    )
    scale_down_stabilization_s: Annotated[int, Field(ge=0, le=3600)] = Field(
        300, description="The HPA scales down to the highest recommendation of this window (seconds)."
    )
    keda: KedaChart = Field(default_factory=lambda: KedaChart())


class ResourcesConfig(Strict):
    """Per replica: one GPU always; CPU, memory and the two writable volumes as set here."""

    cpu: Annotated[str, Field(pattern=CPU)] = Field("3", description="CPU request (cores or millicores).")
    cpu_limit: Annotated[str, Field(pattern=CPU)] | None = Field(
        None, description="CPU limit; None: no limit (a CPU limit throttles the tokenizer and batching)."
    )
    memory: Annotated[str, Field(pattern=SIZE)] = Field(
        "12Gi", description="Memory request and limit (equal: the pod is never the first evicted)."
    )
    cache_size: Annotated[str, Field(pattern=SIZE)] = Field(
        "20Gi",
        description="emptyDir at /var/cache/inference: at least twice the model's model.safetensors (two "
        "versions during a swap).",
    )
    tmp_size: Annotated[str, Field(pattern=SIZE)] = Field("2Gi", description="emptyDir at /tmp (HOME).")


class ServerConfig(Strict):
    """Settings handed to the server as ``INFERENCE_*`` variables (inference/config.py), and the pod's
    grace period derived from them."""

    drain_delay_s: Annotated[int, Field(ge=0, le=300)] = Field(
        15,
        description="INFERENCE_DRAIN_DELAY_S: after SIGTERM the pod still serves this long while the ALB "
        "deregisters it (readiness is false at once).",
    )
    graceful_shutdown_s: Annotated[int, Field(ge=1, le=900)] = Field(
        60,
        description="INFERENCE_GRACEFUL_SHUTDOWN_S: then in-flight requests get this long to finish; keep "
        "it at least request_timeout_s.",
    )
    request_timeout_s: Annotated[int, Field(ge=1, le=900)] = Field(
        60, description="INFERENCE_REQUEST_TIMEOUT_S: a generation not done by then is a 504."
    )
    first_load_timeout_s: Annotated[int, Field(ge=300, le=7200)] = Field(
        1800,
        description="How long a new pod may take to become ready (GPU node launch, image pull, model "
        "download and load): the Deployment's progressDeadlineSeconds and how long aiplat rollout's "
        "health gate waits for the rollout (pulumi does not wait for it).",
    )


class HttpsConfig(Strict):
    """HTTPS through the AWS Load Balancer Controller: an ALB with a TLS 1.3 listener on 443, port 80 only
    redirecting to it, the certificate from ACM."""

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
        None, description="With waf: arn, the regional WAFv2 web ACL to attach."
    )
    waf_rate_limit: Annotated[int, Field(ge=10, le=2_000_000_000)] = Field(
        2000, description="With waf: create, requests per client IP per 5 minutes before it is blocked."
    )
    waf_count_rules: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")]] = Field(
        default_factory=lambda: ["SizeRestrictions_BODY"],
        description="With waf: create, rules of AWSManagedRulesCommonRuleSet that only count: its 8 KB "
        "body limit would block prompts the server accepts (up to 6 x INFERENCE_MAX_PROMPT_BYTES + 1 KB).",
    )

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


class InferenceConfig(Strict):
    """Model serving (infer stacks): the inference server on GPU nodes behind HTTPS
    (docs/inference/cluster.md)."""

    model_name: Annotated[str, Field(pattern=MODEL_NAME)] = Field(
        description="INFERENCE_MODEL_NAME: the --model-name releases are published under."
    )
    pin_version: Annotated[str, Field(pattern=RELEASE_VERSION)] | None = Field(
        None, description="INFERENCE_PIN_VERSION: serve exactly this release (rollback); None: the newest."
    )
    image: ImageConfig = Field(
        default_factory=lambda: ImageConfig(), description="The server image, by digest."
    )
    node_pools: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")]] = Field(
        min_length=1,
        description="GPU pools the pods may run on (Karpenter NodePools or managed GPU node groups), by "
        "their aiplat.io/pool label.",
    )
    replicas: ReplicasConfig = Field(default_factory=lambda: ReplicasConfig())
    autoscaling: AutoscalingConfig = Field(default_factory=lambda: AutoscalingConfig())
    resources: ResourcesConfig = Field(default_factory=lambda: ResourcesConfig())
    server: ServerConfig = Field(default_factory=lambda: ServerConfig())
    https: HttpsConfig
    global_endpoint: GlobalEndpointConfig | None = Field(
        None,
        description="One name for every infer stack of the environment, routed to the nearest region that "
        "can serve (docs/inference/global-endpoint.md); None: the regional name only.",
    )

    @field_validator("node_pools")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a pool twice; name each once")
        return v
