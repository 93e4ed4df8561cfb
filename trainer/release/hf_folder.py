"""What a Hugging Face causal-LM folder must be to become a release, checked from JSON and safetensors headers
only: the one validator the publisher (trainer/release/publish.py) runs before it signs and the fetch tool
(inference/fetch.py) runs again after it verified every byte.

Nothing here deserializes anything but JSON: a safetensors file is an 8-byte little-endian header length, a
JSON table of tensors (dtype, shape, byte offsets) and raw bytes (https://github.com/huggingface/safetensors,
"Format"); the table is parsed here, the bytes are only hashed. No torch, no pickle, no ``safetensors``
package, no ``trust_remote_code``: the folder is data written by code we do not trust (a training pod).

Files (:func:`plan_folder`), by name only, before any is opened:

- published: ``config.json``, the weights (``*.safetensors``, with ``model.safetensors.index.json`` when there
  are several), tokenizer files (``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``,
  ``added_tokens.json``, ``vocab.json``, ``merges.txt``, ``tokenizer.model``), ``generation_config.json``, a
  chat template (``chat_template.jinja``, ``chat_template.json``);
- skipped (neither read nor published): ``README.md``, licence files, ``.gitattributes``;
- refused, naming the file: pickle-bearing files (``.bin``, ``.pt``, ``.pth``, ``.pkl``, ``.pickle``,
  ``.ckpt``, ``.joblib``, ``.npy``, ``.npz``), a torch.distributed.checkpoint (its ``.metadata`` is a
  pickle, its ``*.distcp`` hold torch.save'd objects), Python code, sub-folders, anything else.

Content (:func:`check_folder`): ``config.json`` names ``architectures`` the pinned vLLM serves
(trainer/release/vllm_models.py), no ``auto_map`` (remote code) there or in ``tokenizer_config.json``, no
``quantization_config``; every safetensors header is well-formed (offsets contiguous, each tensor's byte
length its shape times its dtype's size, the last one ending at the end of the file), every tensor is
float32, float16 or bfloat16; with several files the index maps every tensor to the one file that holds it.
Shapes: a **generic** check always (the embedding ``[vocab_size, hidden_size]`` is there, layer indices run
0 .. ``num_hidden_layers`` - 1, the weights' dtype is config.json's); the publisher adds the **full** one for
every architecture (every tensor name, shape and dtype the pinned transformers' model of that config has,
tied weights understood, nothing else: trainer/release/architecture.py asks a process of its own, so this
module stays free of torch). The result is the :class:`Serving` facts the manifest records.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from math import prod
from typing import Any, BinaryIO

from trainer.errors import BadInput
from trainer.release.vllm_models import registry

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
WEIGHTS = "model.safetensors"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
# Parsed here as JSON (and only as JSON).
JSON_FILES = frozenset(
    {
        CONFIG,
        INDEX,
        "generation_config.json",
        "tokenizer.json",
        TOKENIZER_CONFIG,
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "chat_template.json",
    }
)
# Published, hashed, never parsed here: what reads them in vLLM is the tokenizers library (merges.txt),
# sentencepiece or tiktoken (tokenizer.model) and a sandboxed Jinja environment (the template): no pickle.
OPAQUE_FILES = frozenset({"merges.txt", "tokenizer.model", "chat_template.jinja"})
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
SAFETENSORS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.safetensors$")
SKIPPED = frozenset(
    {"README.md", "LICENSE", "LICENSE.txt", "LICENSE.md", "NOTICE", "USE_POLICY.md", ".gitattributes"}
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")
DCP_METADATA = ".metadata"  # torch/distributed/checkpoint/filesystem.py: a pickle of the checkpoint's plan
DCP_SUFFIX = ".distcp"
JSON_MAX = 128 << 20  # a large vocabulary's tokenizer.json is tens of MB
HEADER_MAX = 100 << 20  # safetensors caps its JSON header at 100 MB (safetensors/src/tensor.rs)
# safetensors dtype -> (config.json dtype, bytes per element); the float types vLLM serves.
FLOAT_DTYPES = {"F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2)}
# Every safetensors dtype's element size, so a header's offsets are checked whatever it holds.
ITEMSIZE = {
    **{k: v[1] for k, v in FLOAT_DTYPES.items()},
    **dict.fromkeys(("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0"), 1),
    **dict.fromkeys(("I16", "U16"), 2),
    **dict.fromkeys(("I32", "U32"), 4),
    **dict.fromkeys(("I64", "U64", "F64"), 8),
}
CONFIG_DTYPES = {v[0]: k for k, v in FLOAT_DTYPES.items()}
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


class FolderError(BadInput):
    """A folder (or release) that cannot be served; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ------------------------------------------------------------------------------------------------ files
@dataclass(frozen=True)
class FolderPlan:
    """The files of a folder to publish (sorted), and those skipped."""

    publish: list[str]
    skipped: list[str]

    @property
    def weights(self) -> list[str]:
        """The safetensors files."""
        return [n for n in self.publish if SAFETENSORS.match(n)]


def _refusal(name: str) -> str | None:
    """Why ``name`` (a path relative to the folder) may not be in a release, or None."""
    base = name.rsplit("/", 1)[-1]
    lower = base.lower()
    if base == DCP_METADATA or lower.endswith(DCP_SUFFIX):
        return (
            f"{name}: part of a torch.distributed.checkpoint (its {DCP_METADATA} is a pickle); a release is "
            "an HF folder of safetensors: convert the checkpoint with python -m trainer.export.hf"
        )
    if lower.endswith(PICKLE_SUFFIXES):
        return (
            f"{name}: a pickle-bearing file ({lower[lower.rindex('.') :]}), which loading would execute; a "
            "release holds weights as safetensors only (save_pretrained(safe_serialization=True)): remove it"
        )
    if lower.endswith((".py", ".pyc", ".so")):
        return f"{name}: code; a release carries no code (vLLM runs no trust_remote_code): remove it"
    if "/" in name:
        return f"{name}: a sub-folder; a release is one flat folder (config.json, *.safetensors, tokenizer)"
    if base in JSON_FILES or base in OPAQUE_FILES or SAFETENSORS.match(base):
        return None
    return (
        f"{name}: not a file a release holds (config, safetensors weights and index, tokenizer, generation "
        "config, chat template); remove it"
    )


def plan_folder(listing: dict[str, int]) -> FolderPlan:
    """The files to publish from a folder's listing (``{relative name: size}``), decided by name alone;
    :class:`FolderError` names the first file that may not be there, or what is missing."""
    publish, skipped = [], []
    for name in sorted(listing):
        if name.rsplit("/", 1)[-1] in SKIPPED and "/" not in name:
            skipped.append(name)
            continue
        if (why := _refusal(name)) is not None:
            raise FolderError(why)
        publish.append(name)
    if CONFIG not in publish:
        raise FolderError(f"no {CONFIG}: not a Hugging Face model folder")
    weights = [n for n in publish if SAFETENSORS.match(n)]
    if not weights:
        raise FolderError("no *.safetensors weights (save_pretrained(safe_serialization=True) writes them)")
    if len(weights) > 1 and INDEX not in publish:
        raise FolderError(f"{len(weights)} safetensors files and no {INDEX} saying which tensor is where")
    if len(weights) == 1 and INDEX not in publish and weights[0] != WEIGHTS:
        raise FolderError(f"{weights[0]}: a single weights file is {WEIGHTS} (or list the shards in {INDEX})")
    if not any(t in publish for t in TOKENIZER_FILES):
        raise FolderError(
            f"no tokenizer ({', '.join(TOKENIZER_FILES)}): vLLM serves text through the folder's tokenizer"
        )
    return FolderPlan(publish=publish, skipped=skipped)


# ------------------------------------------------------------------------------------------ safetensors
@dataclass(frozen=True)
class Tensor:
    """One entry of a safetensors header."""

    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def read_header(f: BinaryIO, name: str, size: int) -> bytes:
    """The 8-byte length and the JSON header of a safetensors file open at its start (nothing more)."""
    head = f.read(8)
    if len(head) < 8 or size < 8:
        raise FolderError(f"{name}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", head)
    if n > HEADER_MAX or 8 + n > size:
        raise FolderError(f"{name}: header length {n} is not that of a safetensors file of {size} bytes")
    body = f.read(n)
    if len(body) < n:
        raise FolderError(f"{name}: ends inside its header")
    return head + body


def parse_header(name: str, head: bytes, size: int) -> dict[str, Tensor]:
    """The tensors of a safetensors file of ``size`` bytes whose header bytes (8-byte length + JSON, maybe
    followed by more of the file) are ``head``; :class:`FolderError` unless the table is well-formed and
    covers the data exactly, as the safetensors library requires (``validate``, safetensors/src/tensor.rs)."""
    if len(head) < 8:
        raise FolderError(f"{name}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", head[:8])
    if n > HEADER_MAX or 8 + n > size or len(head) < 8 + n:
        raise FolderError(f"{name}: header length {n} is not that of a safetensors file of {size} bytes")
    try:
        table = json.loads(head[8 : 8 + n])
    except (ValueError, UnicodeDecodeError):
        raise FolderError(f"{name}: the header is not JSON (not a safetensors file)") from None
    if not isinstance(table, dict):
        raise FolderError(f"{name}: the header is not a JSON object")
    meta = table.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise FolderError(f"{name}: __metadata__ must map names to strings")
    spans: list[tuple[int, int, str]] = []
    out: dict[str, Tensor] = {}
    for key, entry in table.items():
        if not isinstance(entry, dict):
            raise FolderError(f"{name}: tensor {key!r} is not an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in ITEMSIZE:
            raise FolderError(f"{name}: tensor {key!r} has unknown dtype {dtype!r}")
        if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
            raise FolderError(f"{name}: tensor {key!r} shape {shape!r} is not a list of sizes")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise FolderError(f"{name}: tensor {key!r} data_offsets {offsets!r} is not [begin, end]")
        begin, end = offsets
        nbytes = prod(shape) * ITEMSIZE[dtype]
        if not 0 <= begin <= end or end - begin != nbytes:
            raise FolderError(
                f"{name}: tensor {key!r} spans bytes {begin}..{end}, but {dtype} {shape} is {nbytes} bytes"
            )
        spans.append((begin, end, key))
        out[key] = Tensor(dtype=dtype, shape=tuple(shape), nbytes=nbytes)
    at = 0
    for begin, end, key in sorted(spans):
        if begin != at:
            raise FolderError(f"{name}: tensor {key!r} starts at byte {begin}, not {at} (a hole or overlap)")
        at = end
    if at != size - 8 - n:
        raise FolderError(f"{name}: the tensors end at byte {at} of {size - 8 - n} data bytes")
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------- serving
@dataclass(frozen=True)
class Serving:
    """What serving needs to know about a release (recorded in its manifest): the architecture, the dtype of
    its weights, their size, the attention geometry the KV cache is sized from, the longest context and
    whether the tokenizer has a chat template. ``None`` where the config does not say (e.g. attention-free
    models have no KV heads). ``shape_check``: ``full`` or ``generic`` (module docstring)."""

    architecture: str
    model_type: str | None
    dtype: str
    parameters: int
    weight_bytes: int
    layers: int | None
    hidden_size: int | None
    attention_heads: int | None
    kv_heads: int | None
    head_dim: int | None
    vocab_size: int | None
    max_positions: int | None
    chat_template: bool
    shape_check: str

    def as_json(self) -> dict[str, Any]:
        """The manifest's ``serving`` object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str = "serving") -> Serving:
        """A manifest's ``serving`` object, type-checked (:class:`FolderError` names the field)."""
        if not isinstance(data, dict):
            raise FolderError(f"{where} must be an object")
        want = {f.name for f in fields(cls)}
        if set(data) != want:
            raise FolderError(f"{where} must have exactly the fields {sorted(want)}, not {sorted(data)}")
        for key in ("architecture", "dtype", "shape_check"):
            if not isinstance(data[key], str):
                raise FolderError(f"{where}.{key} must be a string")
        if data["model_type"] is not None and not isinstance(data["model_type"], str):
            raise FolderError(f"{where}.model_type must be a string or null")
        for key in ("parameters", "weight_bytes"):
            if not (_is_int(data[key]) and data[key] >= 0):
                raise FolderError(f"{where}.{key} must be a count")
        for key in ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
                    "max_positions"):  # fmt: skip
            if data[key] is not None and not (_is_int(data[key]) and data[key] > 0):
                raise FolderError(f"{where}.{key} must be a positive integer or null")
        if not isinstance(data["chat_template"], bool):
            raise FolderError(f"{where}.chat_template must be true or false")
        return cls(**data)


def _first_int(cfg: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = cfg.get(k)
        if _is_int(v) and v > 0:
            return v
    return None


def _json(name: str, raw: bytes) -> Any:
    if len(raw) > JSON_MAX:
        raise FolderError(f"{name}: {len(raw)} bytes, more than the {JSON_MAX >> 20} MiB a JSON file may be")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FolderError(f"{name} is not valid JSON ({exc})") from None


def _object(name: str, raw: bytes) -> dict[str, Any]:
    data = _json(name, raw)
    if not isinstance(data, dict):
        raise FolderError(f"{name} must be a JSON object")
    return data


def _has_chat_template(files: list[str], sizes: dict[str, int], tok_cfg: dict[str, Any] | None,
                       read: Callable[[str], bytes]) -> bool:  # fmt: skip
    if "chat_template.jinja" in files and sizes.get("chat_template.jinja", 0) > 0:
        return True
    if "chat_template.json" in files:
        tpl = _object("chat_template.json", read("chat_template.json")).get("chat_template")
        if isinstance(tpl, str) and tpl.strip():
            return True
    tpl = (tok_cfg or {}).get("chat_template")
    return bool(tpl.strip()) if isinstance(tpl, str) else bool(isinstance(tpl, list) and tpl)


# ------------------------------------------------------------------------------------------------ shapes
def _architecture_check(arch: str, want: dict[str, Any], tensors: dict[str, Tensor]) -> None:
    """Every tensor the architecture's own model has (``want``: trainer/release/architecture.py), with its
    shape and dtype, and nothing else; of a tied group (one parameter under several names, e.g. the
    embedding and ``lm_head``) the name ``save_pretrained`` writes suffices (the others are ``optional``)."""
    expected = want["tensors"]
    optional = set(want.get("optional", []))
    missing = sorted(set(expected) - set(tensors) - optional)
    extra = sorted(set(tensors) - set(expected))
    shaped = sorted(k for k in set(expected) & set(tensors) if list(tensors[k].shape) != expected[k]["shape"])
    fp32 = set(want.get("fp32", []))
    typed = sorted(
        k
        for k in set(expected) & set(tensors)
        if FLOAT_DTYPES.get(tensors[k].dtype, ("",))[0] != expected[k]["dtype"]
        and not (k in fp32 and tensors[k].dtype == "F32")
    )
    parts = []
    if missing:
        parts.append(f"missing {missing[:3]}" + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    if extra:
        parts.append(f"unexpected {extra[:3]}" + (f" and {len(extra) - 3} more" if len(extra) > 3 else ""))
    for k in shaped[:3]:
        parts.append(f"{k} is {list(tensors[k].shape)}, the model has {expected[k]['shape']}")
    for k in typed[:3]:
        parts.append(f"{k} is {tensors[k].dtype}, config.json's dtype is {expected[k]['dtype']}")
    if parts:
        raise FolderError(f"the weights do not match {CONFIG} ({arch}'s own model): {'; '.join(parts)}")


def _generic_check(arch: str, facts: dict[str, int | None], tensors: dict[str, Tensor]) -> None:
    vocab, hidden, layers = facts["vocab_size"], facts["hidden_size"], facts["layers"]
    if vocab is not None:
        dims = [t.shape for t in tensors.values() if len(t.shape) == 2]
        ok = any(s[0] == vocab and (hidden is None or s[1] == hidden) for s in dims)
        if not ok:
            want = f"[{vocab}, {hidden}]" if hidden is not None else f"[{vocab}, ...]"
            raise FolderError(
                f"the weights do not match {CONFIG} ({arch}): no embedding of shape {want} (vocab_size, "
                "hidden_size)"
            )
    indices = {int(m.group(1)) for k in tensors for m in [LAYER_INDEX.search(k)] if m}
    if layers is not None and indices and indices != set(range(layers)):
        found = f"{min(indices)}..{max(indices)}" if indices else "none"
        raise FolderError(
            f"the weights do not match {CONFIG} ({arch}): layers {found} ({len(indices)}), config says "
            f"num_hidden_layers {layers}"
        )


# --------------------------------------------------------------------------------------------- the check
def check_folder(
    files: list[str],
    sizes: dict[str, int],
    read: Callable[[str], bytes],
    head: Callable[[str], bytes],
    expected: Callable[[bytes], dict[str, Any]] | None = None,
) -> Serving:
    """Check a folder's published files (``files``, as :func:`plan_folder` chose them; ``sizes`` their byte
    counts) from the JSON files ``read(name)`` returns whole and the safetensors headers ``head(name)``
    returns (:func:`read_header`); returns the serving facts, or raises :class:`FolderError`.
    ``expected``: the tensors the architecture's own model has, given ``config.json``
    (``trainer.release.architecture.expected_tensors``): every name, shape and dtype is then checked
    (``shape_check`` full); without it (the fetch tool, which verifies a signed release) the generic
    check."""
    cfg = _object(CONFIG, read(CONFIG))
    if "auto_map" in cfg:
        raise FolderError(
            f"{CONFIG}: auto_map names code in the folder (trust_remote_code); releases run only the "
            "architectures vLLM ships: remove auto_map and use a built-in architecture"
        )
    if cfg.get("quantization_config") is not None:
        raise FolderError(
            f"{CONFIG}: quantization_config is set; this publisher checks and sizes float32, float16 and "
            "bfloat16 weights only"
        )
    archs = cfg.get("architectures")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
        raise FolderError(f"{CONFIG}: architectures {archs!r} must be a list naming the model class")
    reg = registry()
    for a in archs:
        if (why := reg.refusal(a)) is not None:
            raise FolderError(f"{CONFIG}: architectures: {why}")
    arch = archs[0]
    tok_cfg = None
    for name in files:
        if name in JSON_FILES and name != CONFIG:
            data = _object(name, read(name))
            if name == TOKENIZER_CONFIG:
                tok_cfg = data
    if tok_cfg is not None and "auto_map" in tok_cfg:
        raise FolderError(
            f"{TOKENIZER_CONFIG}: auto_map names tokenizer code in the folder (trust_remote_code): remove it"
        )

    # the weights: every tensor once, in the file the index says
    shards = [n for n in files if SAFETENSORS.match(n)]
    tensors: dict[str, Tensor] = {}
    where: dict[str, str] = {}
    for shard in shards:
        for key, t in parse_header(shard, head(shard), sizes[shard]).items():
            if key in where:
                raise FolderError(f"tensor {key!r} is in both {where[key]} and {shard}")
            where[key], tensors[key] = shard, t
    if INDEX in files:
        wmap = _object(INDEX, read(INDEX)).get("weight_map")
        if not (isinstance(wmap, dict) and all(isinstance(v, str) for v in wmap.values())):
            raise FolderError(f"{INDEX}: weight_map must map tensor names to file names")
        if unknown := sorted(set(wmap.values()) - set(shards)):
            raise FolderError(f"{INDEX}: names {unknown[:3]}, which the folder does not hold")
        if unused := sorted(set(shards) - set(wmap.values())):
            raise FolderError(f"{INDEX}: does not name {unused[:3]}")
        if wrong := sorted(k for k in set(wmap) | set(where) if wmap.get(k) != where.get(k)):
            k = wrong[0]
            raise FolderError(
                f"{INDEX}: tensor {k!r} is in {where.get(k) or 'no file'}, the index says {wmap.get(k)}"
            )
    if not tensors:
        raise FolderError("the safetensors files hold no tensors")
    if bad := sorted(k for k, t in tensors.items() if t.dtype not in FLOAT_DTYPES):
        raise FolderError(
            f"tensor {bad[0]!r} is {tensors[bad[0]].dtype}: a release holds float32, float16 or bfloat16 only"
        )

    # dtype: config.json's (dtype in transformers v5, torch_dtype before), else the weights'
    by_dtype: dict[str, int] = {}
    for t in tensors.values():
        by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
    main = FLOAT_DTYPES[max(by_dtype, key=lambda k: by_dtype[k])][0]
    declared = cfg.get("dtype", cfg.get("torch_dtype"))
    if declared is not None and declared not in CONFIG_DTYPES:
        raise FolderError(f"{CONFIG}: dtype {declared!r} is not float32, float16 or bfloat16")
    dtype = declared or main
    full = expected is not None
    if not full and main != dtype:
        raise FolderError(f"the weights are mostly {main}, {CONFIG} says dtype {dtype}")

    heads = _first_int(cfg, "num_attention_heads", "n_head")
    hidden = _first_int(cfg, "hidden_size", "n_embd", "d_model")
    kv = _first_int(cfg, "num_key_value_heads")
    if kv is None and cfg.get("multi_query") is True:
        kv = 1
    facts: dict[str, int | None] = {
        "layers": _first_int(cfg, "num_hidden_layers", "n_layer", "num_layers"),
        "hidden_size": hidden,
        "attention_heads": heads,
        "kv_heads": kv or heads,
        "head_dim": _first_int(cfg, "head_dim") or (hidden // heads if hidden and heads else None),
        "vocab_size": _first_int(cfg, "vocab_size"),
        "max_positions": _first_int(
            cfg, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"
        ),
    }
    if expected is None:
        _generic_check(arch, facts, tensors)
    else:
        from trainer.release.architecture import ExpectedError

        try:
            want = expected(read(CONFIG))
        except ExpectedError as exc:
            raise FolderError(f"{CONFIG}: {exc}") from None
        _architecture_check(arch, want, tensors)
    model_type = cfg.get("model_type")
    return Serving(
        architecture=arch,
        model_type=model_type if isinstance(model_type, str) else None,
        dtype=dtype,
        parameters=sum(prod(t.shape) for t in tensors.values()),
        weight_bytes=sum(t.nbytes for t in tensors.values()),
        chat_template=_has_chat_template(files, sizes, tok_cfg, read),
        shape_check="full" if full else "generic",
        **facts,  # type: ignore[arg-type]
    )
