"""The one mapping between the trainer's GPT (trainer/training/model.py) and a Hugging Face
``GPT2LMHeadModel``.

A release is a standard GPT-2 folder that ``transformers`` and vLLM load as it is. This module says, once,
how each trainer tensor becomes a GPT-2 tensor (names, transposes, the vocabulary cut), what ``config.json``,
``generation_config.json``, ``tokenizer.json`` and ``tokenizer_config.json`` hold (``python -m
trainer.export.hf`` writes them). Which tensor names and shapes a GPT-2 ``config.json`` needs is the
publisher's check, trainer/release/hf_folder.py. It imports no torch itself (the conversion gets torch
tensors).

GPT-2's attention and MLP layers are ``Conv1D`` modules whose weight is ``[in, out]``, the transpose of
``nn.Linear``'s ``[out, in]``: https://github.com/huggingface/transformers/blob/v5.23.0/src/transformers/pytorch_utils.py
(``Conv1D``); vLLM transposes them back when it loads (vllm/model_executor/models/gpt2.py, ``load_weights``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from trainer.config import ModelConfig

ARCHITECTURE = "GPT2LMHeadModel"
EOT_TEXT = "<|endoftext|>"
# The trainer's MLP is ``nn.GELU(approximate="tanh")`` (trainer/training/model.py); in transformers' ACT2FN
# that is
# "gelu_new" (NewGELUActivation, GPT-2's own), which vLLM's get_act_fn knows too. Plain "gelu" is the erf
# form and gives other logits (tests/trainer/test_hf_release.py's negative control).
ACTIVATION = "gelu_new"
# nn.LayerNorm's default eps, which trainer/training/model.py uses.
LAYER_NORM_EPS = 1e-5
BYTES = "bytes"


class ReleaseFormatError(ValueError):
    """A checkpoint or config.json that cannot be (or is not) the GPT-2 this module describes."""


@dataclass(frozen=True)
class ByteVocab:
    """The trainer's byte tokenizer (trainer/tools/make_shards.py): ids 0-255 are the bytes, ``eot`` ends a
    document; ``size`` ids in all. The model's embedding rows from ``size`` on are padding."""

    eot: int = 256
    size: int = 257

    @classmethod
    def from_index(cls, tokenizer: dict[str, Any] | None, model_vocab: int) -> ByteVocab:
        """The vocabulary a shard index / checkpoint records (``{"tokenizer": "bytes", "vocab_size": 257,
        "eot_token": 256}``; ``None``: a run from before the field existed, the byte tokenizer)."""
        tok = tokenizer or {"tokenizer": BYTES, "vocab_size": 257, "eot_token": 256}
        if tok.get("tokenizer") != BYTES:
            raise ReleaseFormatError(
                f"tokenizer {tok.get('tokenizer')!r}: only the byte tokenizer ({BYTES!r}) can be published"
            )
        size, eot = tok.get("vocab_size"), tok.get("eot_token")
        if not (_is_int(size) and _is_int(eot) and 256 <= eot < size <= model_vocab):
            raise ReleaseFormatError(
                f"tokenizer vocab_size={size!r} eot_token={eot!r} do not fit a byte tokenizer and the "
                f"model's {model_vocab} embeddings"
            )
        if size != eot + 1:
            raise ReleaseFormatError(
                f"tokenizer vocab_size={size} eot_token={eot}: a byte tokenizer has 256 bytes and the "
                "end-of-text token, nothing else"
            )
        return cls(eot=eot, size=size)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------------------------------- tensors
@dataclass(frozen=True)
class TensorRule:
    """One trainer tensor -> one GPT-2 tensor: ``transpose`` for Conv1D weights, ``vocab_rows`` for the
    embedding whose rows beyond the tokenizer's vocabulary are dropped."""

    trainer: str
    hf: str
    transpose: bool = False
    vocab_rows: bool = False


def tensor_rules(n_layer: int) -> list[TensorRule]:
    """Every tensor a release holds, in order. ``lm_head.weight`` is not among them: it is tied to
    ``transformer.wte.weight`` (``tie_word_embeddings``), as in the trainer (``GPT.TIED_WEIGHTS``)."""
    rules = [
        TensorRule("wte.weight", "transformer.wte.weight", vocab_rows=True),
        TensorRule("wpe.weight", "transformer.wpe.weight"),
    ]
    for i in range(n_layer):
        t, h = f"blocks.{i}.", f"transformer.h.{i}."
        rules += [
            TensorRule(t + "ln1.weight", h + "ln_1.weight"),
            TensorRule(t + "ln1.bias", h + "ln_1.bias"),
            TensorRule(t + "attn.qkv.weight", h + "attn.c_attn.weight", transpose=True),
            TensorRule(t + "attn.qkv.bias", h + "attn.c_attn.bias"),
            TensorRule(t + "attn.proj.weight", h + "attn.c_proj.weight", transpose=True),
            TensorRule(t + "attn.proj.bias", h + "attn.c_proj.bias"),
            TensorRule(t + "ln2.weight", h + "ln_2.weight"),
            TensorRule(t + "ln2.bias", h + "ln_2.bias"),
            TensorRule(t + "mlp.0.weight", h + "mlp.c_fc.weight", transpose=True),
            TensorRule(t + "mlp.0.bias", h + "mlp.c_fc.bias"),
            TensorRule(t + "mlp.2.weight", h + "mlp.c_proj.weight", transpose=True),
            TensorRule(t + "mlp.2.bias", h + "mlp.c_proj.bias"),
        ]
    rules += [
        TensorRule("ln_f.weight", "transformer.ln_f.weight"),
        TensorRule("ln_f.bias", "transformer.ln_f.bias"),
    ]
    return rules


class _Tensor(Protocol):
    shape: Any

    def t(self) -> Any: ...

    def contiguous(self) -> Any: ...

    def __getitem__(self, key: Any) -> Any: ...


def to_hf_tensors(weights: dict[str, Any], cfg: ModelConfig, vocab: ByteVocab) -> dict[str, Any]:
    """The trainer's ``state_dict`` (torch tensors) as GPT-2 tensors, contiguous (safetensors needs that).
    A missing or unexpected trainer tensor is :class:`ReleaseFormatError`."""
    rules = tensor_rules(cfg.n_layer)
    tied = {"lm_head.weight"}
    if missing := [r.trainer for r in rules if r.trainer not in weights]:
        raise ReleaseFormatError(f"checkpoint weights lack {missing[:3]}")
    if extra := sorted(set(weights) - {r.trainer for r in rules} - tied):
        raise ReleaseFormatError(f"checkpoint weights hold tensors with no GPT-2 name: {extra[:3]}")
    out = {}
    for r in rules:
        w = weights[r.trainer]
        if r.vocab_rows:
            w = w[: vocab.size]
        if r.transpose:
            w = w.t()
        out[r.hf] = w.contiguous()
    return out


# ---------------------------------------------------------------------------------------------- configs
def hf_config(cfg: ModelConfig, vocab: ByteVocab) -> dict[str, Any]:
    """``config.json`` of a ``GPT2LMHeadModel`` equal to ``GPT(cfg)`` on the tokenizer's ids: field names
    of transformers' GPT2Config (models/gpt2/configuration_gpt2.py at v5.23.0)."""
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "gpt2",
        "vocab_size": vocab.size,
        "n_positions": cfg.seq_len,
        "n_embd": cfg.d_model,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_inner": 4 * cfg.d_model,
        "activation_function": ACTIVATION,
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "initializer_range": 0.02,
        # SDPA's default scale is 1/sqrt(head_dim), GPT-2's scale_attn_weights; the other two GPT-2
        # variants are off (and vLLM asserts they are).
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": vocab.eot,
        "eos_token_id": vocab.eot,
        "dtype": "float32",
    }


def generation_config(vocab: ByteVocab) -> dict[str, Any]:
    """``generation_config.json``: generation stops at end-of-text; no pad token of its own."""
    return {"bos_token_id": vocab.eot, "eos_token_id": vocab.eot, "pad_token_id": vocab.eot}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte, which the ByteLevel pre-tokenizer and decoder use
    (tokenizers' ``ByteLevel`` and openai/gpt-2 ``encoder.py`` ``bytes_to_unicode``)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + n)
            n += 1
    return out


def tokenizer_json(vocab: ByteVocab) -> dict[str, Any]:
    """``tokenizer.json`` (the ``tokenizers`` serialization) of the byte tokenizer: a BPE model with one
    token per byte and no merges behind a ByteLevel pre-tokenizer, so every UTF-8 byte is its own id; the
    end-of-text token is added as ``<|endoftext|>`` and put before every sequence (training documents follow
    one, so a prompt is the start of a new document, as the trainer sees it)."""
    table = _bytes_to_unicode()
    eot = {"id": EOT_TEXT, "ids": [vocab.eot], "tokens": [EOT_TEXT]}
    seq = {"type_id": 0}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": vocab.eot,
                "content": EOT_TEXT,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": False,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": EOT_TEXT, "type_id": 0}}, {"Sequence": {"id": "A", **seq}}],
            "pair": [
                {"SpecialToken": {"id": EOT_TEXT, "type_id": 0}},
                {"Sequence": {"id": "A", **seq}},
                {"SpecialToken": {"id": EOT_TEXT, "type_id": 0}},
                {"Sequence": {"id": "B", **seq}},
            ],
            "special_tokens": {EOT_TEXT: eot},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {table[b]: b for b in range(256)},
            "merges": [],
        },
    }


def tokenizer_config(vocab: ByteVocab, context: int) -> dict[str, Any]:
    """``tokenizer_config.json``: a fast tokenizer (``PreTrainedTokenizerFast`` over tokenizer.json) whose
    bos/eos is end-of-text, up to the model's context."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOT_TEXT,
        "eos_token": EOT_TEXT,
        "unk_token": EOT_TEXT,
        "pad_token": EOT_TEXT,
        "model_max_length": context,
        "clean_up_tokenization_spaces": False,
    }
