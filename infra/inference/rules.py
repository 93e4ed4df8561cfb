"""Rules on model serving (``inference``): what the ALB, ACM, WAF, the scheduler and the autoscaler would
refuse or silently get wrong, checked before any resource.

Config-only rules run before the provider is configured; ``inference-gpu-capacity`` needs the AWS facts (the
GPUs of a managed pool's instance type).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from infra.core import instance_types
from infra.core.config import KubernetesAccess, Role
from infra.inference.config import LATEST, Dtype, InferenceConfig, ServedModelConfig, WafMode
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule, warning
from infra.storage.config.storage import StorageBackend

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

TLS_POLICIES_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html"
)
CERT_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/https-listener-certificates.html"
)
CNAME_DOC = "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/ResourceRecordTypes.html#CNAMEFormat"
ACM_DNS_DOC = "https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html"
WAF_DOC = "https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/ingress/annotations/#wafv2-acl-arn"
LBC_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/aws-load-balancer-controller.html"
KEDA_PROMETHEUS_DOC = "https://keda.sh/docs/2.20/scalers/prometheus/"
NODEPOOL_DOC = "https://karpenter.sh/docs/concepts/nodepools/#speclimits"
SHUTDOWN_DOC = "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination"
BF16_DOC = "https://developer.nvidia.com/cuda-gpus"
PROMOTION_DOC = "docs/how-to/promote-rollback.md"
WAF_BODY_DOC = "https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html"
# AWSManagedRulesCommonRuleSet's SizeRestrictions_BODY: bodies over 8 KB are blocked.
WAF_BODY_LIMIT = 8 * 1024
WAF_BODY_RULE = "SizeRestrictions_BODY"
# The largest completions request a prompt of max_model_len tokens makes: the releases' byte tokenizer
# (one token per byte), JSON-escaped as \uXXXX at worst (6 bytes per byte), plus 1 KB of other fields.
JSON_BYTES_PER_TOKEN = 6
REQUEST_OVERHEAD = 1024

# The ELB security policies that negotiate TLS 1.3 only (the other TLS13-* policies also allow TLS 1.2 or
# older). Names from the AWS CDK SslPolicy enum (aws-cdk-lib aws-elasticloadbalancingv2 shared/enums.ts,
# "TLS1.3 only") and the Security Hub control ELB.17 list; the PQ ones add hybrid ML-KEM key exchange.
TLS13_ONLY_POLICIES = (
    "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
    "ELBSecurityPolicy-TLS13-1-3-FIPS-PQ-2025-09",
    "ELBSecurityPolicy-TLS13-1-3-2021-06",
    "ELBSecurityPolicy-TLS13-1-3-FIPS-2023-04",
)


def _serving(ctx: RuleContext) -> InferenceConfig | None:
    cfg = ctx.cfg
    return cfg.inference if cfg.role is Role.infer else None


def serving_pools(cfg: PlatformConfig) -> list[str]:
    """Every pool some model of the stack runs on, in config order, each once."""
    inf = cfg.inference
    if inf is None:
        return []
    return list(dict.fromkeys(p for m in inf.models.values() for p in m.node_pools))


def pool_instance_types(
    cfg: PlatformConfig, pools: Sequence[str]
) -> dict[str, list[instance_types.GpuInstanceType]]:
    """The GPU instance types each of ``pools`` may launch, from the instance-type table: a managed pool's
    type, or every type of a Karpenter pool's families (the table's, so a type it lacks is not counted)."""
    out: dict[str, list[instance_types.GpuInstanceType]] = {}
    karpenter = cfg.cluster_services.karpenter.node_pools
    for name in pools:
        if name in karpenter:
            families = set(karpenter[name].instance_families)
            rows = [r for r in instance_types.TABLE.values() if instance_types.family(r.name) in families]
        elif name in cfg.node_pools and cfg.node_pools[name].instance_type in instance_types.TABLE:
            rows = [instance_types.TABLE[cfg.node_pools[name].instance_type]]
        else:
            rows = []
        out[name] = rows
    return out


def pool_gpu_models(cfg: PlatformConfig, pools: Sequence[str]) -> dict[str, set[str]]:
    """GPU models each of ``pools`` may launch (:func:`pool_instance_types`)."""
    return {pool: {r.gpu_model for r in rows} for pool, rows in pool_instance_types(cfg, pools).items()}


def engine_dtype(cfg: PlatformConfig, model: ServedModelConfig) -> Dtype:
    """The ``--dtype`` one model's pods run with: its ``engine.dtype``; for ``auto``, ``auto`` (vLLM picks
    from the release's config.json dtype and the GPU, :func:`serving_dtype`) when every GPU its pools may
    launch agrees on bfloat16, else float16: the one dtype all of them compute in, so no two replicas of one
    release compute differently (a pod may land on any of them)."""
    if model.engine.dtype is not Dtype.auto:
        return model.engine.dtype
    models = set().union(*pool_gpu_models(cfg, model.node_pools).values())
    if len({instance_types.BF16.get(m, False) for m in models}) > 1:
        return Dtype.float16
    return Dtype.auto


# vLLM's dtype names -> bytes per element (vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE, 0.33.0).
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def serving_dtype(engine: Dtype, release_dtype: str, gpu_bf16: bool) -> str:
    """The dtype vLLM 0.33.0 runs a release in: ``--dtype`` when it names one; for ``auto`` the release's
    dtype, float32 downcast to the GPU's preferred one (bfloat16 from compute capability 8.0, else
    float16), and bfloat16 on a GPU without it falling back to float16 (vllm/config/model.py
    ``_resolve_auto_dtype``; the GPU's dtypes: vllm/platforms/cuda.py ``supported_dtypes``)."""
    if engine is not Dtype.auto:
        return engine.value
    preferred = "bfloat16" if gpu_bf16 else "float16"
    if release_dtype == "float32" or (release_dtype == "bfloat16" and not gpu_bf16):
        return preferred
    return release_dtype


def _https(*parts: str) -> str:
    return at("inference", "https", *parts)


def _model(name: str, *parts: str) -> str:
    return at("inference", "models", name, *parts)


@rule("inference-tls13-only")
def inference_tls13_only(ctx: RuleContext) -> Iterator[Finding]:
    """The HTTPS listener's security policy negotiates TLS 1.3 only."""
    inf = _serving(ctx)
    if inf is None or inf.https.tls_policy in TLS13_ONLY_POLICIES:
        return
    yield error(
        _https("tls_policy"),
        f"{inf.https.tls_policy} is not a TLS 1.3-only security policy (clients could negotiate TLS 1.2 or "
        "older)",
        f"use one of {', '.join(TLS13_ONLY_POLICIES)} (the first adds post-quantum key exchange)",
        TLS_POLICIES_DOC,
    )


def _arn_region(arn: str) -> tuple[str, str]:
    """(partition, region) of an ARN."""
    parts = arn.split(":")
    return parts[1], parts[3]


@rule("inference-certificate")
def inference_certificate(ctx: RuleContext) -> Iterator[Finding]:
    """The ALB's HTTPS listener has a certificate (an ACM ARN of this region, or one the stack creates)."""
    inf = _serving(ctx)
    if inf is None:
        return
    https = inf.https
    exposure = https.exposure.value.replace("_", "-")
    if https.certificate_arn is None and https.dns_zone_id is None:
        yield error(
            _https("certificate_arn"),
            f"no certificate for {https.domain}: the {exposure} ALB serves HTTPS only and its 443 listener "
            "cannot be created without one",
            "set certificate_arn (an ACM certificate for the domain in this region) or dns_zone_id and "
            "dns_zone_name (the stack creates a DNS-validated certificate)",
            CERT_DOC,
        )
        return
    if https.certificate_arn is not None:
        _, region = _arn_region(https.certificate_arn)
        if region != ctx.cfg.region:
            yield error(
                _https("certificate_arn"),
                f"the certificate is in {region}, the load balancer in {ctx.cfg.region}: an ALB takes ACM "
                "certificates of its own region only",
                f"request or import the certificate in {ctx.cfg.region}, or use dns_zone_id to create it",
                CERT_DOC,
            )


@rule("inference-domain-in-zone")
def inference_domain_in_zone(ctx: RuleContext) -> Iterator[Finding]:
    """With a Route 53 zone, the domain is a name below it (ACM validates there; no CNAME at the apex)."""
    inf = _serving(ctx)
    if inf is None or inf.https.dns_zone_name is None:
        return
    domain, zone = inf.https.domain, inf.https.dns_zone_name
    if domain == zone:
        yield error(
            _https("domain"),
            f"{domain} is the zone apex of {zone}: the stack points the domain at the ALB with a CNAME, "
            "which the zone apex cannot hold",
            f"serve a name below the zone, e.g. inference.{zone}",
            CNAME_DOC,
        )
    elif not domain.endswith("." + zone):
        yield error(
            _https("domain"),
            f"{domain} is not in the zone {zone}: ACM's validation record and the CNAME would go to a zone "
            "that does not answer for the domain, and the certificate would never be issued",
            f"use a name ending in .{zone}, or the zone that holds {domain}",
            ACM_DNS_DOC,
        )


@rule("inference-waf-acl")
def inference_waf_acl(ctx: RuleContext) -> Iterator[Finding]:
    """``waf: arn`` names a regional WAFv2 web ACL of this region (ALBs take no CloudFront-scope ACL), and of
    this account when ``security.account.id`` says which: the load balancer controller may associate web ACLs
    of its own account and region only (infra/services/documents/lbc_waf_shield.py)."""
    inf = _serving(ctx)
    if inf is None or inf.https.waf is not WafMode.arn:
        return
    arn = inf.https.waf_acl_arn
    if arn is None:
        yield error(
            _https("waf_acl_arn"),
            "waf is 'arn' but no web ACL ARN is given",
            "set waf_acl_arn to a regional WAFv2 web ACL of this region, or use waf: create or off",
            WAF_DOC,
        )
        return
    _, region = _arn_region(arn)
    scope = arn.split(":")[5].split("/")[0]
    if scope != "regional" or region != ctx.cfg.region:
        yield error(
            _https("waf_acl_arn"),
            f"the web ACL is {scope} in {region or 'no region'}; an ALB in {ctx.cfg.region} takes only a "
            "regional WAFv2 web ACL of its own region",
            f"create a REGIONAL web ACL in {ctx.cfg.region}, or use waf: create",
            WAF_DOC,
        )
    account = ctx.cfg.security.account.id
    if account and arn.split(":")[4] != account:
        yield error(
            _https("waf_acl_arn"),
            f"the web ACL is account {arn.split(':')[4]}'s; the load balancer controller may attach only web "
            f"ACLs of the stack's account {account}",
            f"create the web ACL in account {account}, or use waf: create",
            WAF_DOC,
        )


@rule("inference-node-pools")
def inference_node_pools(ctx: RuleContext) -> Iterator[Finding]:
    """The pools the server runs on are GPU pools of this stack (Karpenter NodePools or managed GPU pools)."""
    inf = _serving(ctx)
    if inf is None:
        return
    cfg = ctx.cfg
    karpenter = cfg.cluster_services.karpenter.node_pools
    for model_name, model in inf.models.items():
        for i, name in enumerate(model.node_pools):
            managed = cfg.node_pools.get(name)
            if name in karpenter or (managed is not None and managed.gpu):
                continue
            gpu_pools = sorted([*karpenter, *(n for n, p in cfg.node_pools.items() if p.gpu)])
            problem = (
                f"{name!r} is a CPU pool (gpu: false): the server needs a GPU"
                if managed is not None
                else f"{name!r} is not a pool of this stack"
            )
            yield error(
                _model(model_name, "node_pools", str(i)),
                problem,
                f"use one of the GPU pools: {', '.join(gpu_pools) or 'none (add a Karpenter GPU NodePool)'}",
                NODEPOOL_DOC,
            )


@rule("inference-needs-cluster-services")
def inference_needs_cluster_services(ctx: RuleContext) -> Iterator[Finding]:
    """Serving needs the load balancer controller (HTTPS), monitoring (autoscaling reads Prometheus), the
    S3 replica of a train stack (the model) and a reachable Kubernetes API."""
    inf = _serving(ctx)
    if inf is None:
        return
    cfg: PlatformConfig = ctx.cfg
    if not cfg.cluster_services.load_balancer_controller.enabled:
        yield error(
            at("cluster_services", "load_balancer_controller", "enabled"),
            "false, but inference is served through an ALB Ingress that only the controller turns into a "
            "load balancer",
            "enable the controller, or remove the inference section",
            LBC_DOC,
        )
    if not cfg.monitoring.enabled:
        yield error(
            at("monitoring", "enabled"),
            "false, but inference autoscaling reads vLLM's vllm:num_requests_running and "
            "vllm:num_requests_waiting from this stack's Prometheus",
            "enable monitoring, or remove the inference section",
            KEDA_PROMETHEUS_DOC,
        )
    if cfg.storage.backend is not StorageBackend.s3 or not cfg.storage.source_stack:
        yield error(
            at("storage", "source_stack"),
            "inference needs the model replica of a train stack (storage.backend: s3 and "
            "storage.source_stack)",
            "set storage.source_stack to the train stack that replicates release/ to this region",
        )
    if cfg.cluster_services.kubernetes_access is KubernetesAccess.skip:
        yield warning(
            at("cluster_services", "kubernetes_access"),
            "skip: the inference Deployment, its autoscaling and the Ingress are not declared, so nothing is "
            "served and the stack exports no inferenceUrl",
            "switch back to in_vpc and run pulumi up from inside the VPC",
        )


@rule("inference-shutdown-covers-requests")
def inference_shutdown_covers_requests(ctx: RuleContext) -> Iterator[Finding]:
    """Requests in flight at shutdown get as long as a request may take (vLLM's ``--shutdown-timeout``)."""
    inf = _serving(ctx)
    if inf is None:
        return
    s = inf.server
    if s.shutdown_timeout_s < s.request_timeout_s:
        yield warning(
            at("inference", "server", "shutdown_timeout_s"),
            f"{s.shutdown_timeout_s} s is shorter than request_timeout_s ({s.request_timeout_s} s): a pod "
            "stopped by a rollout, a scale-down or a node drain cuts off generations that would have "
            "finished",
            f"set shutdown_timeout_s to at least {s.request_timeout_s}",
            SHUTDOWN_DOC,
        )


@rule("inference-model-version")
def inference_model_version(ctx: RuleContext) -> Iterator[Finding]:
    """Each served release (models and adapters) is named: ``latest`` only where its ``release.allow_latest``
    says so (every model change in production is a reviewed rollout of a new ``release.version``)."""
    inf = _serving(ctx)
    if inf is None:
        return
    for name, model in inf.models.items():
        releases = [(("release",), model.release)]
        releases += [(("adapters", a, "release"), ad.release) for a, ad in model.adapters.items()]
        for path, release in releases:
            if release.version != LATEST or release.allow_latest:
                continue
            yield error(
                _model(name, *path, "version"),
                f"{LATEST!r}: each new pod would serve whatever release is newest when it starts, so a "
                "publish changes production without a rollout, and two replicas may serve different models",
                "name a release version (aiplat rollout promotes it), or set allow_latest: true beside it on "
                "a dev stack",
                PROMOTION_DOC,
            )


@rule("inference-dtype")
def inference_dtype(ctx: RuleContext) -> Iterator[Finding]:
    """``engine.dtype: bfloat16`` only on pools whose every GPU computes in bfloat16."""
    inf = _serving(ctx)
    if inf is None:
        return
    for name, model in inf.models.items():
        if model.engine.dtype is Dtype.bfloat16:
            yield from _bf16_pools(ctx.cfg, name, model)


def _bf16_pools(cfg: PlatformConfig, name: str, model: ServedModelConfig) -> Iterator[Finding]:
    for pool, models in pool_gpu_models(cfg, model.node_pools).items():
        lacking = sorted(m for m in models if not instance_types.BF16.get(m, False))
        if lacking:
            yield error(
                _model(name, "engine", "dtype"),
                f"bfloat16, but pool {pool!r} may launch {', '.join(lacking)} GPUs, which have no bfloat16 "
                "(vLLM refuses to start there)",
                "set dtype: auto (float16 when any GPU lacks bfloat16) or float16, or take those "
                "instance families out of the pool",
                BF16_DOC,
            )


@rule("inference-body-limit")
def inference_body_limit(ctx: RuleContext) -> Iterator[Finding]:
    """With the stack's web ACL, the core rule set's 8 KB body limit blocks; a prompt of
    ``engine.max_model_len`` tokens must fit in it."""
    inf = _serving(ctx)
    if inf is None or inf.https.waf is not WafMode.create or WAF_BODY_RULE in inf.https.waf_count_rules:
        return
    for name, model in inf.models.items():
        yield from _body_limit(name, model.engine.max_model_len)


def _body_limit(name: str, max_model_len: int) -> Iterator[Finding]:
    largest = max_model_len * JSON_BYTES_PER_TOKEN + REQUEST_OVERHEAD
    if largest > WAF_BODY_LIMIT:
        yield warning(
            _model(name, "engine", "max_model_len"),
            f"{max_model_len} tokens make requests of up to {largest} bytes, but the web ACL "
            f"blocks bodies over {WAF_BODY_LIMIT} bytes ({WAF_BODY_RULE}): long prompts get 403",
            f"lower max_model_len to {(WAF_BODY_LIMIT - REQUEST_OVERHEAD) // JSON_BYTES_PER_TOKEN}, or add "
            f"{WAF_BODY_RULE} to https.waf_count_rules (then only vLLM's own limits apply)",
            WAF_BODY_DOC,
        )


@rule("inference-gpu-capacity", needs=[Need.facts])
def inference_gpu_capacity(ctx: RuleContext) -> Iterator[Finding]:
    """The pools hold every model's replicas.max pods of engine.gpus_per_pod GPUs each (else the HPA scales
    to pods that stay Pending): each model on its own pools, and the models that share pools together."""
    inf = _serving(ctx)
    if inf is None:
        return
    assert ctx.facts is not None
    capacity = {}
    for pool in serving_pools(ctx.cfg):
        gpus = _pool_gpus(ctx, pool)
        if gpus is None:
            return  # 'inference-node-pools' names the pool
        capacity[pool] = gpus
    for name, model in inf.models.items():
        gpus = sum(capacity[p] for p in model.node_pools)
        per_pod = model.engine.gpus_per_pod
        if model.replicas.max * per_pod > gpus:
            yield error(
                _model(name, "replicas", "max"),
                f"{model.replicas.max} replicas of {per_pod} GPU(s) need "
                f"{model.replicas.max * per_pod} GPUs, but the pools {model.node_pools} hold at most {gpus} "
                "(Karpenter gpu_limit, managed max_size x GPUs per node): the autoscaler would add pods that "
                "never schedule",
                f"lower replicas.max to {gpus // per_pod} or raise the pools' limits",
                NODEPOOL_DOC,
            )
    # models sharing pools: together at most what those pools hold
    groups: dict[frozenset[str], list[str]] = {}
    for name, model in inf.models.items():
        groups.setdefault(frozenset(model.node_pools), []).append(name)
    for pools, names in groups.items():
        if len(names) < 2:
            continue
        need = sum(inf.models[n].replicas.max * inf.models[n].engine.gpus_per_pod for n in names)
        have = sum(capacity[p] for p in pools)
        if need > have:
            yield warning(
                _model(names[-1], "replicas", "max"),
                f"models {names} share the pools {sorted(pools)}: at their replicas.max they need {need} "
                f"GPUs, the pools hold at most {have}; when all are busy some pods stay Pending",
                "lower some replicas.max, raise the pools' limits, or give a model its own pool",
                NODEPOOL_DOC,
            )


def _pool_gpus(ctx: RuleContext, name: str) -> int | None:
    """The most GPUs ``name`` holds (Karpenter gpu_limit, managed max_size x GPUs per node); None when it
    is no GPU pool of the stack."""
    assert ctx.facts is not None
    cfg = ctx.cfg
    karpenter = cfg.cluster_services.karpenter.node_pools
    if name in karpenter:
        return karpenter[name].gpu_limit
    if name in cfg.node_pools and cfg.node_pools[name].gpu:
        pool = cfg.node_pools[name]
        facts = ctx.facts.instances.get(pool.instance_type)
        per_node = pool.gpus_per_node or (facts.gpu_count if facts is not None else 0)
        return pool.max_size * per_node
    return None


# The Dockerfile each image of the serving pod is built from, for the fix of 'inference-image-built'.
IMAGE_DOCKERFILES = {
    ("image",): "images/inference/Dockerfile",
    ("engine", "image"): "images/vllm/Dockerfile",
    ("router", "image"): "images/router/Dockerfile",
}


@rule("inference-image-built", needs=[Need.stacks])
def inference_image_built(ctx: RuleContext) -> Iterator[Finding]:
    """Without ``digest`` or ``ref`` the pod runs the image the source stack builds (the fetch tool's
    ``image``, vLLM's ``engine.image``, the router's ``router.image``), so the source stack must build it
    (``images.builds.<repository>``)."""
    inf = _serving(ctx)
    assert ctx.stacks is not None
    source = ctx.cfg.storage.source_stack
    if inf is None or not source:
        return
    summary = ctx.stacks.stacks.get(source)
    if summary is None or summary.role != "train" or ctx.cfg.region not in summary.replicate_to:
        return  # 'source-stack-replicates-here' names the problem
    for path, dockerfile in IMAGE_DOCKERFILES.items():
        image = {("image",): inf.image, ("engine", "image"): inf.engine.image}.get(path, inf.router.image)
        if image.digest is not None or image.ref is not None:
            continue
        repo = image.repository
        if repo not in summary.images:
            field = ".".join(("inference", *path))
            yield error(
                at("inference", *path),
                f"{source} builds no {repo!r} image (its images.builds: {list(summary.images) or 'none'}), "
                "so there is no image to run",
                f"add images.builds.{repo} (dockerfile {dockerfile}) to {source}, or set {field}.digest or "
                f"{field}.ref",
            )
