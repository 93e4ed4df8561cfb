"""What a LoRA adapter folder must be to become an adapter release, checked from JSON and safetensors headers
only (no torch, no peft, no pickle): the publisher runs :func:`check_adapter` with its base release's
tensors (``full``), the fetch tool again without them (``generic``).

An adapter folder is what peft's ``save_pretrained`` writes: ``adapter_config.json`` and
``adapter_model.safetensors`` (tensors ``base_model.model.<module>.lora_A.weight`` ``[r, in]`` and
``.lora_B.weight`` ``[out, r]``; for an embedding ``lora_embedding_A`` ``[r, vocab]`` and ``lora_embedding_B``
``[hidden, r]``), maybe tokenizer files. vLLM 0.33.0 loads it with ``--lora-modules name=<dir>``; what it
refuses is read from that wheel's ``vllm/lora/peft_helper.py`` (``PEFTHelper._validate_features`` and
``validate_legal``) and ``vllm/config/lora.py`` (``MaxLoRARanks``), and refused here first, by name, with the
fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from functools import cache
from math import prod
from pathlib import Path
from typing import Any

from trainer.release.hf_folder import (
    CHAT_TEMPLATE_FILES,
    FLOAT_DTYPES,
    JSON_FILES,
    OPAQUE_FILES,
    SKIPPED,
    FolderError,
    FolderPlan,
    _object,
    _refusal,
    parse_header,
)
from trainer.storage.hashing import is_sha256_hex

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Tokenizer files an adapter may carry besides its two files (vLLM reads no base config from an adapter).
TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        *CHAT_TEMPLATE_FILES,
        "merges.txt",
        "tokenizer.model",
    }
)
ADAPTER_JSON = frozenset({ADAPTER_CONFIG}) | (TOKENIZER_FILES & JSON_FILES)
# From the pinned vLLM's source (tests/infra/inference/data/record_vllm.py): the values --max-lora-rank takes
# (vllm/config/lora.py MaxLoRARanks; an adapter of a larger rank cannot be served at all) and the
# architectures whose vLLM model class supports LoRA (SupportsLoRA).
LORA_DATA = Path(__file__).resolve().parent / "data" / "vllm-lora-architectures.txt"


@cache
def _lora_data() -> tuple[tuple[int, ...], frozenset[str]]:
    ranks: tuple[int, ...] = ()
    archs = set()
    for line in LORA_DATA.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "max-lora-rank":
            ranks = tuple(int(r) for r in rest.split())
        elif kind == "lora":
            archs.add(rest)
    return ranks, frozenset(archs)


VLLM_MAX_LORA_RANKS = _lora_data()[0]
MAX_LORA_RANK = VLLM_MAX_LORA_RANKS[-1]
# vllm/lora/peft_helper.py _init_is_supported: string inits that only set the initial weights.
INIT_SERVED = frozenset({"gaussian", "eva", "orthogonal", "mica", "lora_ga"})
# peft's save_pretrained names: base_model.model.<module>.<part> (the adapter name stripped)
TENSOR = re.compile(
    r"^base_model\.model\.(?P<module>[A-Za-z0-9_.]+?)\.(?P<part>lora_A\.weight|lora_B\.weight|"
    r"lora_embedding_A|lora_embedding_B)$"
)
# With an embedding among the targets peft also saves the whole input/output embedding as it was (vLLM 0.33.0
# vllm/lora/utils.py is_base_embedding_weights: skipped when loading); it must be the base's shape.
BASE_COPY = re.compile(
    r"^base_model\.model\.(?P<module>[A-Za-z0-9_.]+\.(?:embed_tokens|lm_head))\.base_layer\.weight$"
)


def serving_rank(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM 0.33.0 takes that serves an adapter of ``rank``."""
    return next(r for r in VLLM_MAX_LORA_RANKS if r >= rank)


@dataclass(frozen=True)
class BaseRef:
    """The base release an adapter is for: its model name, version and the sha256 of its signed
    ``manifest.json`` (which names every base file's sha256)."""

    model_name: str
    version: str
    manifest_sha256: str


@dataclass(frozen=True)
class Adapter:
    """The manifest's ``adapter`` object: the base, and what serving needs (the rank ``--max-lora-rank``
    must reach, the modules it adapts); ``shape_check`` ``full`` (against the base's own model) or
    ``generic``."""

    type: str
    base: BaseRef | None
    base_architecture: str | None
    rank: int
    alpha: float
    target_modules: list[str] | str
    modules: int
    dtype: str
    parameters: int
    weight_bytes: int
    shape_check: str

    def as_json(self) -> dict[str, Any]:
        """The manifest's ``adapter`` object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Adapter:
        """A manifest's ``adapter`` object, type-checked (:class:`FolderError` names the field)."""
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            got = sorted(data) if isinstance(data, dict) else data
            raise FolderError(f"adapter must have exactly {sorted(f.name for f in fields(cls))}, not {got}")
        base = data["base"]
        if not (isinstance(base, dict) and set(base) == {"model_name", "version", "manifest_sha256"}
                and all(isinstance(v, str) for v in base.values())
                and is_sha256_hex(base["manifest_sha256"])):  # fmt: skip
            raise FolderError("adapter.base must be {model_name, version, manifest_sha256 (64 hex digits)}")
        for key in ("rank", "modules", "parameters", "weight_bytes"):
            if not (isinstance(data[key], int) and not isinstance(data[key], bool) and data[key] >= 0):
                raise FolderError(f"adapter.{key} must be a count")
        if not isinstance(data["alpha"], int | float) or isinstance(data["alpha"], bool):
            raise FolderError("adapter.alpha must be a number")
        for key in ("type", "base_architecture", "dtype", "shape_check"):
            if not isinstance(data[key], str):
                raise FolderError(f"adapter.{key} must be a string")
        return cls(**{**data, "base": BaseRef(**base)})


# ------------------------------------------------------------------------------------------------ files
def plan_adapter(listing: dict[str, int]) -> FolderPlan:
    """The files of an adapter folder to publish, by name alone (a refused file is never opened):
    ``adapter_config.json``, ``adapter_model.safetensors`` and tokenizer files; a pickle
    (``adapter_model.bin``), code or any other file is refused by name."""
    publish, skipped = [], []
    for name in sorted(listing):
        if name in SKIPPED:
            skipped.append(name)
            continue
        if name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS) or name in TOKENIZER_FILES:
            publish.append(name)
            continue
        why = _refusal(name)
        if why is None or name in JSON_FILES or name in OPAQUE_FILES:
            why = (
                f"{name}: not a file an adapter release holds ({ADAPTER_CONFIG}, {ADAPTER_WEIGHTS}, "
                "tokenizer files; the base's own files are in its release): remove it"
            )
        raise FolderError(why)
    for need in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if need not in publish:
            raise FolderError(f"no {need}: not a LoRA adapter folder (peft's save_pretrained writes it)")
    return FolderPlan(publish=publish, skipped=skipped)


# ------------------------------------------------------------------------------------------------ config
def _config(cfg: dict[str, Any]) -> tuple[int, float, dict[str, int]]:
    """``(r, lora_alpha, rank_pattern)`` of a LoRA ``adapter_config.json`` vLLM serves, else
    :class:`FolderError` naming the field and the fix."""
    where = ADAPTER_CONFIG
    if cfg.get("peft_type") != "LORA":
        raise FolderError(f"{where}: peft_type {cfg.get('peft_type')!r}: vLLM serves LORA adapters only")
    if cfg.get("task_type") not in (None, "CAUSAL_LM"):
        raise FolderError(f"{where}: task_type {cfg['task_type']!r}: an adapter release is for a causal LM")
    r, alpha = cfg.get("r"), cfg.get("lora_alpha")
    if not (isinstance(r, int) and not isinstance(r, bool) and r > 0):
        raise FolderError(f"{where}: r {r!r} must be a positive integer")
    if not (isinstance(alpha, int | float) and not isinstance(alpha, bool)):
        raise FolderError(f"{where}: lora_alpha {alpha!r} must be a number")
    pattern = cfg.get("rank_pattern") or {}
    if not (isinstance(pattern, dict) and all(isinstance(v, int) and v > 0 for v in pattern.values())):
        raise FolderError(f"{where}: rank_pattern {pattern!r} must map module patterns to positive ranks")
    top = max([r, *pattern.values()])
    if top > MAX_LORA_RANK:
        raise FolderError(
            f"{where}: rank {top} is above {MAX_LORA_RANK}, the largest --max-lora-rank vLLM 0.33.0 takes "
            f"{list(VLLM_MAX_LORA_RANKS)}: train with r <= {MAX_LORA_RANK}"
        )
    targets = cfg.get("target_modules")
    if not (isinstance(targets, str) and targets) and not (
        isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets)
    ):
        raise FolderError(f"{where}: target_modules {targets!r} must name the modules (a list, or a regex)")
    patterns = [(f"target_modules {targets!r}", targets)] if isinstance(targets, str) else []
    patterns += [(f"rank_pattern key {k!r}", k) for k in pattern]
    for what, regex in patterns:  # peft and vLLM match these as regular expressions
        try:
            re.compile(regex)
        except re.error as exc:
            raise FolderError(f"{where}: {what} is not a regular expression ({exc})") from None
    # vllm/lora/peft_helper.py _validate_features and validate_legal, in that order
    unsupported = [
        (bool(cfg.get("modules_to_save")), f"modules_to_save {cfg.get('modules_to_save')!r} (vLLM serves "
         "none for a causal LM: train without modules_to_save, or publish a full model)"),
        (bool(cfg.get("use_dora")), "use_dora true (vLLM does not serve DoRA)"),
        (bool(cfg.get("lora_bias")), "lora_bias true (vLLM does not serve LoRA bias)"),
        (str(cfg.get("init_lora_weights", True)).lower() not in {"true", "false", *INIT_SERVED},
         f"init_lora_weights {cfg.get('init_lora_weights')!r} (it changes the base weights: convert it "
         "with peft's path_initial_model_for_weight_conversion)"),
        (bool(cfg.get("alora_invocation_tokens")), "alora_invocation_tokens (vLLM does not serve aLoRA)"),
        (bool(cfg.get("layer_replication")), "layer_replication (vLLM does not serve it)"),
        (bool(cfg.get("use_bdlora")), "use_bdlora (vLLM does not serve block-diagonal LoRA)"),
        (bool(cfg.get("use_qalora")), "use_qalora (vLLM does not serve QALoRA)"),
        (cfg.get("bias", "none") != "none", f"bias {cfg.get('bias')!r} (vLLM serves bias none only)"),
    ]  # fmt: skip
    for bad, what in unsupported:
        if bad:
            raise FolderError(f"{where}: {what}")
    return r, float(alpha), dict(pattern)


def _rank_for(module: str, r: int, pattern: dict[str, int]) -> int:
    # peft's get_pattern_key (and vLLM's PEFTHelper._match_pattern): a key matches a "."-bounded suffix
    for key, rank in pattern.items():
        if re.match(rf"(.*\.)?({key})$", module):
            return rank
    return r


def _targeted(module: str, targets: list[str] | str) -> bool:
    # peft's check_target_module_exists: a regex string matches the whole name; a list entry the last parts
    if isinstance(targets, str):
        return re.fullmatch(targets, module) is not None
    return any(module == t or module.endswith(f".{t}") for t in targets)


# ------------------------------------------------------------------------------------------------ check
def check_adapter(
    files: list[str],
    sizes: dict[str, int],
    read: Callable[[str], bytes],
    head: Callable[[str], bytes],
    base: dict[str, Any] | None = None,
) -> Adapter:
    """Check an adapter folder's published files from ``adapter_config.json`` (``read``) and the header of
    ``adapter_model.safetensors`` (``head``); returns its facts, or raises :class:`FolderError`.
    ``base``: the base release's tensors (``trainer.release.architecture.expected_tensors`` of its
    ``config.json``): then every target module must be one of the base's, and every LoRA pair's shapes its
    layer's in and out features (``shape_check`` full); without it the generic check."""
    cfg = _object(ADAPTER_CONFIG, read(ADAPTER_CONFIG))
    r, alpha, pattern = _config(cfg)
    for name in files:
        if name in ADAPTER_JSON and name != ADAPTER_CONFIG and "auto_map" in _object(name, read(name)):
            raise FolderError(f"{name}: auto_map names tokenizer code (trust_remote_code): remove it")
    tensors = parse_header(ADAPTER_WEIGHTS, head(ADAPTER_WEIGHTS), sizes[ADAPTER_WEIGHTS])
    if not tensors:
        raise FolderError(f"{ADAPTER_WEIGHTS} holds no tensors")
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    copies: dict[str, tuple[int, ...]] = {}  # embeddings peft saved whole (vLLM skips them)
    for key, t in sorted(tensors.items()):
        m = TENSOR.match(key)
        if m is None and (c := BASE_COPY.match(key)) is not None and t.dtype in FLOAT_DTYPES:
            copies[c["module"]] = t.shape
            continue
        if m is None:
            raise FolderError(
                f"{ADAPTER_WEIGHTS}: tensor {key!r} is not a LoRA A/B matrix (base_model.model.<module>."
                "lora_A.weight / lora_B.weight): vLLM serves those only (no modules_to_save, no bias)"
            )
        if t.dtype not in FLOAT_DTYPES:
            raise FolderError(f"{ADAPTER_WEIGHTS}: tensor {key!r} is {t.dtype}: float32, float16 or bfloat16")
        if len(t.shape) != 2:
            raise FolderError(f"{ADAPTER_WEIGHTS}: tensor {key!r} has shape {list(t.shape)}, not a matrix")
        pairs.setdefault(m["module"], {})[m["part"].removesuffix(".weight")[-1]] = t.shape
    if not pairs:
        raise FolderError(f"{ADAPTER_WEIGHTS} holds no LoRA A/B matrices")
    fan_in_fan_out = cfg.get("fan_in_fan_out") is True
    targets = cfg["target_modules"]
    top = 0
    for module, ab in pairs.items():
        if set(ab) != {"A", "B"}:
            raise FolderError(f"{ADAPTER_WEIGHTS}: {module} has lora_{''.join(ab)} only, not A and B")
        a, b = ab["A"], ab["B"]
        want = _rank_for(module, r, pattern)
        if a[0] != want or b[1] != want:
            raise FolderError(
                f"{ADAPTER_WEIGHTS}: {module} has rank {a[0]} (lora_A {list(a)}, lora_B {list(b)}), "
                f"{ADAPTER_CONFIG} says r {want}: publish the folder save_pretrained wrote, unedited"
            )
        top = max(top, want)
        if not _targeted(module, targets):
            raise FolderError(f"{ADAPTER_WEIGHTS}: {module} is not one of target_modules {targets!r}")
    architecture = None
    if base is not None:
        architecture = base.get("architecture")
        _fit_base(pairs, copies, targets, base, fan_in_fan_out)
    dtypes: dict[str, int] = {}
    for t in tensors.values():
        dtypes[t.dtype] = dtypes.get(t.dtype, 0) + t.nbytes
    return Adapter(
        type="lora",
        base=None,
        base_architecture=architecture,
        rank=top,
        alpha=alpha,
        target_modules=list(targets) if isinstance(targets, list) else targets,
        modules=len(pairs),
        dtype=FLOAT_DTYPES[max(dtypes, key=lambda k: dtypes[k])][0],
        parameters=sum(prod(t.shape) for t in tensors.values()),
        weight_bytes=sum(t.nbytes for t in tensors.values()),
        shape_check="full" if base is not None else "generic",
    )


def _fit_base(
    pairs: dict[str, dict[str, tuple[int, ...]]],
    copies: dict[str, tuple[int, ...]],
    targets: list[str] | str,
    base: dict[str, Any],
    fan: bool,
) -> None:
    """vLLM serves LoRA on the base's architecture, every target module names layers of the base, and every
    adapted module's A and B fit its weight."""
    arch = base.get("architecture")
    if arch not in _lora_data()[1]:
        raise FolderError(
            f"the base's architecture {arch} is one vLLM 0.33.0 serves without LoRA adapters (its model "
            "class does not support LoRA): merge the adapter into the base (peft merge_and_unload) and "
            "publish that as a model"
        )
    weights = {
        k.removesuffix(".weight"): tuple(v["shape"])
        for k, v in base["tensors"].items()
        if k.endswith(".weight") and len(v["shape"]) == 2
    }
    names = sorted(weights)
    if isinstance(targets, str):
        if not any(_targeted(n, targets) for n in names):
            raise FolderError(
                f"{ADAPTER_CONFIG}: target_modules {targets!r} matches no layer of the base ({arch}): "
                "train the adapter on this base"
            )
    else:
        for t in targets:
            if not any(_targeted(n, [t]) for n in names):
                leaves = sorted({n.rsplit(".", 1)[-1] for n in names if "." in n})
                raise FolderError(
                    f"{ADAPTER_CONFIG}: target module {t!r} is not a layer of the base ({arch}, whose layers "
                    f"are {leaves[:12]}): train the adapter on this base, or name its layers"
                )
    for module, shape in sorted(copies.items()):
        if weights.get(module) != shape:
            raise FolderError(
                f"{ADAPTER_WEIGHTS}: {module} is saved whole as {list(shape)}, the base's is "
                f"{list(weights.get(module, ()))}: vLLM serves the base's embedding (a resized vocabulary "
                "is not served); train without resizing it"
            )
    for module, ab in sorted(pairs.items()):
        if module not in weights:
            raise FolderError(
                f"{ADAPTER_WEIGHTS}: {module} is not a layer of the base ({arch}): the adapter was trained "
                "on another model; train it on this base"
            )
        w = weights[module]
        a, b = ab["A"], ab["B"]
        embedding = module.rsplit(".", 1)[-1] in ("embed_tokens", "wte", "word_embeddings")
        if embedding:  # lora_embedding_A [r, num_embeddings], lora_embedding_B [embedding_dim, r]
            fits, in_, out = a[1] == w[0] and b[0] == w[1], w[0], w[1]
        else:  # nn.Linear weight [out, in]; with fan_in_fan_out (GPT-2's Conv1D) [in, out]
            out, in_ = (w[1], w[0]) if fan else w
            fits = a[1] == in_ and b[0] == out
        if not fits:
            raise FolderError(
                f"{ADAPTER_WEIGHTS}: {module}: lora_A {list(a)} and lora_B {list(b)} do not fit the base's "
                f"layer ({in_} in, {out} out features, weight {list(w)}): the adapter was trained on another "
                "size of model; train it on this base"
            )
