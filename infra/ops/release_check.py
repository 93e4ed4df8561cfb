"""The rollout's release check, before an infer stack's update (production ``ReleaseCheck``): the release
each model of ``inference.models`` names (``release.version``) must be servable as that model's engine
settings say, judged from its signed manifest (``infra/io/releases.py``); ``engine`` below is
``inference.models.<name>.engine``:

- **tensor parallelism**: ``engine.gpus_per_pod`` divides the release's attention heads (vLLM refuses
  otherwise: vllm/config/model.py ``verify_with_parallel_config``, 0.33.0);
- **context**: ``engine.max_model_len`` is at most the release's max positions (vLLM refuses more);
- **chat**: ``engine.serve_chat`` only with a release whose tokenizer has a chat template;
- **memory**: on every GPU instance type the pools may launch (with at least ``gpus_per_pod`` GPUs), the
  weights (the release's parameters in the dtype vLLM will run them in, ``serving_dtype``, split over the
  tensor-parallel GPUs) plus the KV cache of one ``max_model_len`` sequence (2 x layers x KV heads per GPU x
  head dim x dtype bytes per token: vLLM's full-attention page size, vllm/v1/kv_cache_interface.py; vLLM
  refuses to start when one sequence does not fit, vllm/v1/core/kv_cache_planning.py
  ``_check_enough_kv_cache_memory``) fit in the GPU's memory times ``engine.gpu_memory_utilization``. That
  is a lower bound: activations, CUDA graphs and the non-torch allocations come on top (vLLM's profiler
  measures them on the GPU); a release that fails it can never start.

Every LoRA adapter of a model (``inference.models.<name>.adapters``) is read from its signed manifest too and
refused when it is no adapter release, when it was published for another base release than the one the
model serves (name and version, and the sha256 of the base's signed manifest the adapter recorded; the fetch
tool refuses such a pair on the pod), or when its rank is above ``lora.max_lora_rank`` (vLLM refuses to load
it: vllm/lora/peft_helper.py ``validate_legal``, 0.33.0). More adapters than ``lora.max_loras`` is no
refusal: that is the number in one batch, the others wait in vLLM's LRU caches (vllm/lora/models.py).

A stack whose train stack is not deployed yet, or whose region holds no release yet, passes with the reason
(nothing to judge before there is something to serve). Refusals carry the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.core import instance_types
from infra.core.config import Role
from infra.inference.config import LATEST, LORA_RANKS
from infra.inference.rules import DTYPE_BYTES, engine_dtype, pool_instance_types, serving_dtype
from infra.io.aws_live import Clients
from infra.io.releases import (
    S3_ERRORS,
    AdapterFacts,
    ReleaseFacts,
    ReleaseUnreadable,
    list_versions,
    newest_readable,
    read_adapter,
    read_release,
)
from infra.ops.rollout import GateCheck
from infra.schema.platform import PlatformConfig
from infra.storage.config.storage import RELEASE_PREFIX

NAME = "release-fit"
GIB = 2**30
Outputs = Callable[[str], Mapping[str, Any]]
"""``outputs(stack)`` -> the stack's current outputs (empty before its first deploy)."""


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def kv_bytes_per_token(facts: ReleaseFacts, tp: int, dtype: str) -> int | None:
    """KV cache bytes one token takes on one GPU (None when the release's config does not give the
    attention geometry, e.g. an attention-free model)."""
    if facts.layers is None or facts.kv_heads is None or facts.head_dim is None:
        return None
    kv_heads = max(1, facts.kv_heads // tp)  # vLLM replicates KV heads below one per GPU (get_num_kv_heads)
    return 2 * facts.layers * kv_heads * facts.head_dim * DTYPE_BYTES[dtype]


def fit_problems(cfg: PlatformConfig, model: str, facts: ReleaseFacts) -> list[str]:
    """Why ``facts``' release cannot be served with the engine settings of the stack's model ``model``
    (empty: it can)."""
    inf = cfg.inference
    assert inf is not None
    eng = inf.models[model].engine
    tp = eng.gpus_per_pod
    field = f"inference.models.{model}.engine"
    problems: list[str] = []
    if facts.attention_heads is not None and facts.attention_heads % tp:
        problems.append(
            f"{field}.gpus_per_pod {tp}: vLLM splits the release's {facts.attention_heads} "
            f"attention heads over the tensor-parallel GPUs, and {tp} does not divide them; use a divisor "
            f"of {facts.attention_heads}"
        )
    if facts.max_positions is not None and eng.max_model_len > facts.max_positions:
        problems.append(
            f"{field}.max_model_len {eng.max_model_len} is above the release's max positions "
            f"{facts.max_positions} (vLLM refuses it); lower it to at most {facts.max_positions}"
        )
    if eng.serve_chat and not facts.chat_template:
        problems.append(
            f"{field}.serve_chat is true but release {facts.version} has no chat template: "
            "every /v1/chat/completions request would get 400; set serve_chat: false or publish a "
            "tokenizer with one"
        )
    failed: set[str] = set()
    for row in fit_rows(cfg, model, facts):
        if row.fits or row.pool in failed:
            continue  # the smallest GPU of the pool that fails; larger ones may still fit
        failed.add(row.pool)
        kv_text = (
            f"KV cache {_gib(row.kv_bytes)} for one {eng.max_model_len}-token sequence"
            if row.kv_bytes is not None
            else "no KV cache counted (the release gives no attention geometry)"
        )
        kv = row.kv_bytes or 0
        problems.append(
            f"release {facts.version} ({facts.architecture}, {facts.parameters:,} parameters, "
            f"{_gib(facts.weight_bytes)} of {facts.dtype} weights) does not fit pool {row.pool!r}'s "
            f"{row.instance_type} ({row.gpu_model}, {_gib(row.gpu_bytes)} per GPU): weights "
            f"{_gib(row.weight_bytes)} in {row.dtype} over {tp} GPU(s) + {kv_text} = "
            f"{_gib(row.weight_bytes + kv)} per GPU, above {_gib(row.gpu_bytes)} x gpu_memory_utilization "
            f"{eng.gpu_memory_utilization} = {_gib(row.budget_bytes)}; raise engine.gpus_per_pod, lower "
            "engine.max_model_len, or take that instance type out of the pool"
        )
    return problems


@dataclass(frozen=True)
class FitRow:
    """One instance type a serving pool may launch, and whether the release fits its GPUs (the numbers)."""

    pool: str
    instance_type: str
    gpu_model: str
    gpu_bytes: int
    dtype: str  # what vLLM runs the release in there (serving_dtype)
    weight_bytes: float  # per GPU
    kv_bytes: int | None  # one max_model_len sequence per GPU; None without the attention geometry
    budget_bytes: float  # GPU memory x gpu_memory_utilization
    fits: bool
    warning: str  # "" or why it fits but may not serve well


def fit_rows(cfg: PlatformConfig, model: str, facts: ReleaseFacts) -> list[FitRow]:
    """Every (pool, instance type) of model ``model``'s pools with at least ``gpus_per_pod`` GPUs, smallest
    GPU first per pool."""
    inf = cfg.inference
    assert inf is not None
    served = inf.models[model]
    eng = served.engine
    tp = eng.gpus_per_pod
    dtype_flag = engine_dtype(cfg, served)
    out: list[FitRow] = []
    for pool, rows in pool_instance_types(cfg, served.node_pools).items():
        for row in sorted(
            (r for r in rows if r.gpus >= tp), key=lambda r: (r.gpu_memory_mib, r.gpus, r.vcpus, r.name)
        ):
            bf16 = instance_types.BF16.get(row.gpu_model, False)
            dtype = serving_dtype(dtype_flag, facts.dtype, bf16)
            weights = facts.parameters * DTYPE_BYTES[dtype] / tp
            per_token = kv_bytes_per_token(facts, tp, dtype)
            kv = per_token * eng.max_model_len if per_token is not None else None
            gpu = row.gpu_memory_mib * 2**20
            budget = gpu * eng.gpu_memory_utilization
            warning = ""
            if facts.dtype == "bfloat16" and dtype == "float16":
                # bfloat16 keeps float32's exponent range, float16 tops out at 65504: activations a
                # bf16-trained model reaches can overflow to inf (vllm/config/model.py warns the same)
                warning = (
                    f"{row.gpu_model} has no bfloat16: the bfloat16 weights run as float16, whose range ends "
                    "at 65504; check the outputs, or serve on a pool with bfloat16 GPUs"
                )
            out.append(
                FitRow(
                    pool=pool,
                    instance_type=row.name,
                    gpu_model=row.gpu_model,
                    gpu_bytes=gpu,
                    dtype=dtype,
                    weight_bytes=weights,
                    kv_bytes=kv,
                    budget_bytes=budget,
                    fits=weights + (kv or 0) <= budget,
                    warning=warning,
                )
            )
    return out


def fit_check(cfg: PlatformConfig, model: str, facts: ReleaseFacts) -> GateCheck:
    """The check's verdict on model ``model``'s release."""
    problems = fit_problems(cfg, model, facts)
    if problems:
        return GateCheck(NAME, False, f"{model}: " + "; ".join(problems))
    assert cfg.inference is not None
    eng = cfg.inference.models[model].engine
    return GateCheck(
        NAME,
        True,
        f"{model}: release {facts.version} ({facts.architecture}, {facts.dtype}, {facts.parameters:,} "
        f"parameters) fits {eng.gpus_per_pod} GPU(s) per pod at max_model_len {eng.max_model_len}"
        + (", chat template present" if facts.chat_template else ""),
    )


def adapter_problems(
    cfg: PlatformConfig, model: str, label: str, facts: AdapterFacts, base: ReleaseFacts | None
) -> tuple[list[str], list[str]]:
    """Why the adapter ``facts`` (``label``: where it is named) cannot be served on the stack's model
    ``model``, whose release read from the region is ``base`` (None: not read), and what could not be
    checked: (problems, caveats)."""
    assert cfg.inference is not None
    served = cfg.inference.models[model]
    field = f"inference.models.{model}"
    if not facts.is_adapter:
        return [
            f"{label} {facts.version} is a model release, not a LoRA adapter (its manifest has no adapter "
            "section): name an adapter release (published with --base NAME@VERSION), or serve it as a model "
            "of inference.models"
        ], []
    problems: list[str] = []
    caveats: list[str] = []
    want, have = served.release, f"{facts.base_name}/{facts.base_version}"
    served_version = base.version if base is not None else want.version
    republish = f"or publish the adapter again with --base {want.name}@{served_version}"
    if facts.base_name != want.name or (want.version != LATEST and facts.base_version != want.version):
        problems.append(
            f"{label} {facts.version} is for base {have}, but {field}.release is "
            f"{want.name}/{want.version}: its A and B matrices were trained on other weights (the fetch tool "
            f"refuses the pair); serve it on the model that serves {have}, {republish}"
        )
    elif want.version == LATEST and base is None:
        caveats.append(
            f"{field}.release.version is latest and no base release was read: whether the pods' base is "
            f"{have} is not checked"
        )
    elif want.version == LATEST and base is not None and base.version != facts.base_version:
        problems.append(
            f"{label} {facts.version} is for base {have}, but {field}.release.version latest "
            f"resolves to {base.version} now (the fetch tool refuses the pair): pin {field}.release.version "
            f"{facts.base_version}, {republish}"
        )
    elif want.version == LATEST:
        caveats.append(
            f"{field}.release.version latest is {have} now; a base published before the pods start would not "
            "match"
        )
    if (
        base is not None
        and (facts.base_name, facts.base_version) == (want.name, base.version)
        and base.manifest_sha256
        and base.manifest_sha256 != facts.base_manifest_sha256
    ):
        problems.append(
            f"{label} {facts.version} recorded base {have}'s manifest sha256 "
            f"{facts.base_manifest_sha256[:12]}..., the region's {have} has {base.manifest_sha256[:12]}... "
            "(another release under that name and version; the fetch tool refuses the pair): publish the "
            f"adapter again against this base (--base {want.name}@{served_version})"
        )
    lora = served.lora
    rank = next((r for r in LORA_RANKS if r >= facts.rank), LORA_RANKS[-1])  # the smallest that serves it
    if lora is None:
        problems.append(
            f"{field}.lora is not set: vLLM serves adapters only with --enable-lora; add lora: "
            f"{{max_lora_rank: {rank}}}"
        )
    elif facts.rank > lora.max_lora_rank:
        problems.append(
            f"{label} {facts.version} has rank {facts.rank}, above {field}.lora.max_lora_rank "
            f"{lora.max_lora_rank}: vLLM refuses to load it (vllm/lora/peft_helper.py validate_legal); raise "
            f"max_lora_rank to {rank}"
        )
    return problems, caveats


def adapter_check(
    cfg: PlatformConfig, model: str, adapter: str, facts: AdapterFacts, base: ReleaseFacts | None
) -> GateCheck:
    """The check's verdict on adapter ``adapter`` of model ``model``."""
    label = f"inference.models.{model}.adapters.{adapter}.release"
    problems, caveats = adapter_problems(cfg, model, label, facts, base)
    if problems:
        return GateCheck(NAME, False, f"{model}/{adapter}: " + "; ".join(problems))
    detail = (
        f"{model}/{adapter}: LoRA adapter {facts.version} (rank {facts.rank}) on base {facts.base_name}/"
        f"{facts.base_version}"
    )
    return GateCheck(NAME, True, "; ".join([detail, *caveats]))


class AwsReleaseCheck:
    """``ReleaseCheck`` against the region's replica bucket, with the credentials of ``clients``; the bucket
    and the public key come from the train stack's outputs (``artifactReplicas``,
    ``releaseSigningPublicKey``)."""

    def __init__(self, clients: Clients, outputs: Outputs) -> None:
        self.clients, self.outputs = clients, outputs

    def check(self, stack: str, cfg: PlatformConfig) -> GateCheck | None:
        """Every model's release (one verdict: failed when any model's is, each model's detail)."""
        if cfg.role is not Role.infer or cfg.inference is None:
            return None
        source = cfg.storage.source_stack or ""
        outs = self.outputs(source) if source else {}
        replica = (outs.get("artifactReplicas") or {}).get(cfg.region) or {}
        pem = outs.get("releaseSigningPublicKey")
        if not replica.get("bucket") or not pem:
            why = f"{source or 'no source stack'} has no replica in {cfg.region} or release key deployed yet"
            return GateCheck(NAME, True, f"not checked: {why}")
        checks = [
            self.check_model(cfg, name, str(replica["bucket"]), str(pem)) for name in cfg.inference.models
        ]
        return GateCheck(NAME, all(c.ok for c in checks), "; ".join(c.detail for c in checks))

    def check_model(self, cfg: PlatformConfig, name: str, bucket: str, pem: str) -> GateCheck:
        """Model ``name``'s release and its adapters', read from the region's replica ``bucket``."""
        assert cfg.inference is not None
        s3 = self.clients("s3", cfg.region)
        verdict, facts = self._base(cfg, name, s3, bucket, pem)
        checks = [verdict]
        for adapter in cfg.inference.models[name].adapters:
            checks.append(self._adapter(cfg, name, adapter, s3, bucket, pem, facts))
        return GateCheck(NAME, all(c.ok for c in checks), "; ".join(c.detail for c in checks))

    def _base(
        self, cfg: PlatformConfig, name: str, s3: Any, bucket: str, pem: str
    ) -> tuple[GateCheck, ReleaseFacts | None]:
        assert cfg.inference is not None
        release = cfg.inference.models[name].release
        model, version = release.name, release.version
        where = f"s3://{bucket}/{RELEASE_PREFIX}/{model}/"
        try:
            versions = list_versions(s3, bucket, model)
            if not versions:
                return GateCheck(
                    NAME, True, f"{name}: no model release yet under {where}: nothing to check"
                ), None
            if version == LATEST:
                facts, skipped = newest_readable(s3, bucket, model, versions, pem)
                if facts is None:
                    why = f"{name}: no release under {where} is signed and readable: {skipped[0]}"
                    return GateCheck(NAME, False, why), None
            elif version not in versions:
                return GateCheck(
                    NAME,
                    False,
                    f"inference.models.{name}.release.version {version} is not under {where} (newest there: "
                    f"{versions[-1]}): fix the version or wait for replication",
                ), None
            else:
                facts = read_release(s3, bucket, model, version, pem)
        except ReleaseUnreadable as exc:
            return GateCheck(NAME, False, f"{name}: release {version} under {where}: {exc.reason}"), None
        except S3_ERRORS as exc:
            return GateCheck(NAME, False, f"{name}: cannot read {where}: {exc}"), None
        return fit_check(cfg, name, facts), facts

    def _adapter(
        self, cfg: PlatformConfig, name: str, adapter: str, s3: Any, bucket: str, pem: str,
        base: ReleaseFacts | None,
    ) -> GateCheck:  # fmt: skip
        """Adapter ``adapter`` of model ``name``, judged against the base release read (``base``)."""
        assert cfg.inference is not None
        release = cfg.inference.models[name].adapters[adapter].release
        field = f"inference.models.{name}.adapters.{adapter}.release"
        where = f"s3://{bucket}/{RELEASE_PREFIX}/{release.name}/"
        try:
            versions = list_versions(s3, bucket, release.name)
            if not versions and base is None:
                return GateCheck(NAME, True, f"{name}/{adapter}: no adapter release yet under {where}")
            if release.version == LATEST and versions:
                facts, skipped = newest_readable(s3, bucket, release.name, versions, pem, read_adapter)
                if facts is None:
                    why = f"{name}/{adapter}: no release under {where} is signed and readable: {skipped[0]}"
                    return GateCheck(NAME, False, why)
            elif release.version not in versions:
                newest = f"newest there: {versions[-1]}" if versions else "none there"
                return GateCheck(
                    NAME,
                    False,
                    f"{name}/{adapter}: {field}.version {release.version} is not under {where} ({newest}): "
                    "the pods' adapter fetch would fail; publish it, fix the version or wait for replication",
                )
            else:
                facts = read_adapter(s3, bucket, release.name, release.version, pem)
        except ReleaseUnreadable as exc:
            return GateCheck(
                NAME, False, f"{name}/{adapter}: release {release.version} under {where}: {exc.reason}"
            )
        except S3_ERRORS as exc:
            return GateCheck(NAME, False, f"{name}/{adapter}: cannot read {where}: {exc}")
        return adapter_check(cfg, name, adapter, facts, base)
