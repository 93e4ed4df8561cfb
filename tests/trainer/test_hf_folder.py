"""The publisher's folder check (trainer/release/hf_folder.py) on folders transformers itself wrote: each
architecture
of the full shape check accepts exactly what transformers' model of a config saves, and the facts it
records are that config's; pickles, checkpoints, code, remote code, unsupported architectures and weights
that disagree with config.json are refused with one line naming the file or field."""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from tests.support.hf_folders import CHAT_TEMPLATE, check_local, edit_json, expected_here, save_folder
from trainer.release.hf_folder import FolderError, Serving, parse_header, plan_folder

SMALL = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 300, "max_position_embeddings": 64}  # fmt: skip

# Every architecture of the full check, each with a config that exercises its options.
MODELS: dict[str, Callable[[], Any]] = {
    "GPT2LMHeadModel": lambda: GPT2LMHeadModel(
        GPT2Config(
            n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=300, bos_token_id=0, eos_token_id=0
        )  # fmt: skip
    ),
    "LlamaForCausalLM": lambda: LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **SMALL)),
    "LlamaForCausalLM-bias-tied": lambda: LlamaForCausalLM(
        LlamaConfig(
            num_hidden_layers=1, attention_bias=True, mlp_bias=True, tie_word_embeddings=True, **SMALL
        )
    ),
    "MistralForCausalLM": lambda: MistralForCausalLM(
        MistralConfig(num_hidden_layers=2, head_dim=16, **SMALL)
    ),
    "Qwen2ForCausalLM": lambda: Qwen2ForCausalLM(Qwen2Config(num_hidden_layers=2, **SMALL)),
    "Qwen3ForCausalLM": lambda: Qwen3ForCausalLM(Qwen3Config(num_hidden_layers=2, head_dim=8, **SMALL)),
}


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="hf-folder-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def folders(root: Path) -> dict[str, tuple[Any, Path]]:
    """One saved folder per model of MODELS (and its model), written once for the module."""
    torch.manual_seed(0)
    out = {}
    for name, make in MODELS.items():
        model = make()
        out[name] = (model, save_folder(model, root / name))
    return out


@pytest.fixture()
def copy(folders: dict[str, tuple[Any, Path]], tmp_path: Path) -> Callable[[str], Path]:
    """A fresh copy of one of the saved folders, to break."""

    def get(name: str) -> Path:
        return Path(shutil.copytree(folders[name][1], tmp_path / name))

    return get


def refused(folder: Path, match: str) -> str:
    with pytest.raises(FolderError) as info:
        check_local(folder)
    assert "\n" not in info.value.reason
    assert match in info.value.reason, info.value.reason
    return info.value.reason


@pytest.mark.parametrize("name", sorted(MODELS))
def test_transformers_folders_pass_the_full_check_with_their_configs_facts(
    folders: dict[str, tuple[Any, Path]], name: str
) -> None:
    model, folder = folders[name]
    serving = check_local(folder)
    cfg = model.config
    stored = load_file(folder / "model.safetensors")  # the safetensors library's own reading
    assert serving.architecture == name.split("-")[0] and serving.shape_check == "full"
    assert serving.parameters == sum(t.numel() for t in stored.values())
    assert serving.weight_bytes == sum(t.numel() * t.element_size() for t in stored.values())
    assert serving.dtype == "float32" and serving.chat_template is False
    text = cfg.get_text_config()
    assert serving.layers == text.num_hidden_layers
    assert serving.attention_heads == text.num_attention_heads
    assert serving.kv_heads == getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    want_head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    assert serving.head_dim == want_head_dim
    assert serving.max_positions == text.max_position_embeddings
    # What the check expects is exactly transformers' parameters of that model, read from the model class
    expected = expected_here((folder / "config.json").read_bytes())["tensors"]
    theirs = {k: list(v.shape) for k, v in model.state_dict().items()}
    assert {k: v["shape"] for k, v in expected.items()} == theirs


def test_other_architectures_get_the_generic_check(root: Path) -> None:
    folder = save_folder(
        GPTNeoXForCausalLM(
            GPTNeoXConfig(
                hidden_size=32,
                intermediate_size=48,
                num_hidden_layers=3,
                num_attention_heads=4,
                vocab_size=300,
            )
        ),  # fmt: skip
        root / "neox",
    )
    s = check_local(folder, full=False)
    assert (s.architecture, s.shape_check, s.layers, s.kv_heads) == ("GPTNeoXForCausalLM", "generic", 3, 4)
    assert check_local(folder).shape_check == "full"  # the publisher checks every architecture fully
    edit_json(folder / "config.json", num_hidden_layers=4)
    with pytest.raises(FolderError, match=r"layers 0..2 \(3\), config says num_hidden_layers 4"):
        check_local(folder, full=False)
    edit_json(folder / "config.json", num_hidden_layers=3, hidden_size=64)
    with pytest.raises(FolderError, match=r"no embedding of shape \[300, 64\]"):
        check_local(folder, full=False)


def test_sharded_weights_and_the_index(root: Path) -> None:
    torch.manual_seed(1)
    folder = save_folder(
        LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **SMALL)), root / "sharded", max_shard_size="20KB"
    )
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    assert len(shards) > 1 and (folder / "model.safetensors.index.json").exists()
    assert check_local(folder).shape_check == "full"
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    wmap = index["weight_map"]
    name = next(k for k, f in wmap.items() if list(wmap.values()).count(f) > 1)  # its shard keeps others
    wmap[name] = next(f for f in shards if f != wmap[name])
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    refused(folder, f"model.safetensors.index.json: tensor {name!r} is in")
    (folder / "model.safetensors.index.json").unlink()
    refused(folder, "safetensors files and no model.safetensors.index.json")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ("pytorch_model.bin", "pytorch_model.bin: a pickle-bearing file (.bin)"),
        ("optimizer.pt", "optimizer.pt: a pickle-bearing file (.pt)"),
        ("training_args.pkl", "training_args.pkl: a pickle-bearing file (.pkl)"),
        (".metadata", ".metadata: part of a torch.distributed.checkpoint"),
        ("__0_0.distcp", "__0_0.distcp: part of a torch.distributed.checkpoint"),
        ("modeling_custom.py", "modeling_custom.py: code"),
        ("original/consolidated.00.pth", "original/consolidated.00.pth: a pickle-bearing file"),
        ("original/params.json", "original/params.json: a sub-folder"),
        ("notes.txt", "notes.txt: not a file a release holds"),
    ],
)
def test_files_are_refused_by_name_before_any_is_opened(
    folders: dict[str, tuple[Any, Path]], extra: str, match: str
) -> None:
    listing = {p.name: p.stat().st_size for p in folders["LlamaForCausalLM"][1].iterdir()}
    assert "README.md" in plan_folder({**listing, "README.md": 10}).skipped
    with pytest.raises(FolderError) as info:
        plan_folder({**listing, extra: 1})
    assert info.value.reason.startswith(match), info.value.reason


@pytest.mark.parametrize(
    ("drop", "match"),
    [
        ("config.json", "no config.json: not a Hugging Face model folder"),
        ("model.safetensors", "no *.safetensors weights"),
        ("tokenizer.json", "no tokenizer (tokenizer.json, tokenizer.model, vocab.json)"),
    ],
)
def test_what_a_folder_needs(folders: dict[str, tuple[Any, Path]], drop: str, match: str) -> None:
    listing = {p.name: p.stat().st_size for p in folders["LlamaForCausalLM"][1].iterdir()}
    del listing[drop]
    with pytest.raises(FolderError) as info:
        plan_folder(listing)
    assert info.value.reason.startswith(match), info.value.reason


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"architectures": ["FooForCausalLM"]}, "'FooForCausalLM' is not an architecture vLLM 0.33.0"),
        ({"architectures": ["MPTForCausalLM"]}, "'MPTForCausalLM' was served by vLLM up to 0.28.0, not by"),
        ({"architectures": "LlamaForCausalLM"}, "architectures 'LlamaForCausalLM' must be a list"),
        ({"auto_map": {"AutoModelForCausalLM": "modeling.Model"}}, "auto_map names code in the folder"),
        ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config is set"),
        ({"dtype": "int8"}, "dtype 'int8' is not float32, float16 or bfloat16"),
        ({"dtype": "bfloat16"}, "lm_head.weight is F32, config.json's dtype is bfloat16"),
        ({"num_key_value_heads": 4}, "layers.0.self_attn.k_proj.weight is [16, 32], the model has [32, 32]"),
        ({"num_hidden_layers": 3}, "missing ['model.layers.2.input_layernorm.weight'"),
        ({"intermediate_size": "48"}, "config.json: Validation error for field 'intermediate_size'"),
    ],
)  # fmt: skip
def test_config_refusals_name_the_field(copy: Callable[[str], Path], changes: dict, match: str) -> None:
    folder = copy("LlamaForCausalLM")
    edit_json(folder / "config.json", **changes)
    refused(folder, match)


def test_remote_code_in_the_tokenizer_config_is_refused(copy: Callable[[str], Path]) -> None:
    folder = copy("LlamaForCausalLM")
    edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": ["tok.Tokenizer", None]})
    refused(folder, "tokenizer_config.json: auto_map names tokenizer code")


def test_chat_template_is_found_where_transformers_keeps_it(copy: Callable[[str], Path]) -> None:
    folder = copy("Qwen2ForCausalLM")
    assert check_local(folder).chat_template is False
    edit_json(folder / "tokenizer_config.json", chat_template=CHAT_TEMPLATE)
    assert check_local(folder).chat_template is True
    edit_json(folder / "tokenizer_config.json", chat_template=None)
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    assert check_local(folder).chat_template is True


def test_bfloat16_weights_and_a_dtype_that_disagrees(root: Path) -> None:
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **SMALL)).to(torch.bfloat16)
    folder = save_folder(model, root / "bf16")
    s = check_local(folder)
    assert (s.dtype, s.weight_bytes) == ("bfloat16", 2 * s.parameters)
    edit_json(folder / "config.json", dtype="float16")
    refused(folder, "lm_head.weight is BF16, config.json's dtype is float16")


def _write_header(path: Path, table: dict[str, Any], data: bytes) -> None:
    raw = json.dumps(table).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_malformed_safetensors_are_refused(
    folders: dict[str, tuple[Any, Path]], copy: Callable[[str], Path]
) -> None:
    folder = copy("LlamaForCausalLM")
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) - 4])
    refused(folder, "the tensors end at byte")
    weights.write_bytes(b"\x80\x04\x95" + good[3:])  # a pickle's first bytes
    refused(folder, "header length")
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    _write_header(weights, {"a": entry, "b": {**entry, "data_offsets": [4, 12]}}, b"\0" * 12)
    with pytest.raises(FolderError, match="tensor 'b' starts at byte 4, not 8"):
        parse_header("model.safetensors", weights.read_bytes(), weights.stat().st_size)
    _write_header(weights, {"a": {**entry, "shape": [3]}}, b"\0" * 8)
    with pytest.raises(FolderError, match=r"spans bytes 0..8, but F32 \[3\] is 12 bytes"):
        parse_header("model.safetensors", weights.read_bytes(), weights.stat().st_size)
    # A non-float tensor: refused even where the shapes would pass.
    state = load_file(folders["LlamaForCausalLM"][1] / "model.safetensors")
    state["model.norm.weight"] = state["model.norm.weight"].to(torch.int64)
    save_file(state, str(weights), metadata={"format": "pt"})
    refused(folder, "tensor 'model.norm.weight' is I64: a release holds float32, float16 or bfloat16 only")


def test_serving_facts_round_trip_and_are_type_checked(folders: dict[str, tuple[Any, Path]]) -> None:
    s = check_local(folders["Qwen3ForCausalLM"][1])
    assert Serving.from_json(json.loads(json.dumps(s.as_json()))) == s
    with pytest.raises(FolderError, match=r"serving.kv_heads must be a positive integer or null"):
        Serving.from_json({**s.as_json(), "kv_heads": 0})
    with pytest.raises(FolderError, match="serving must have exactly the fields"):
        Serving.from_json({**s.as_json(), "extra": 1})


# Architectures outside the old hand-kept table: what they must hold comes from their own model classes.
OTHERS: dict[str, Callable[[], Any]] = {
    "Phi3ForCausalLM": lambda: Phi3ForCausalLM(
        Phi3Config(num_hidden_layers=2, pad_token_id=0, **{**SMALL, "num_key_value_heads": 4})
    ),
    "Gemma2ForCausalLM": lambda: Gemma2ForCausalLM(Gemma2Config(num_hidden_layers=2, head_dim=8, **SMALL)),
    "GPTNeoXForCausalLM": lambda: GPTNeoXForCausalLM(
        GPTNeoXConfig(
            hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, vocab_size=300
        )
    ),
}


@pytest.mark.parametrize("name", sorted({**MODELS, **OTHERS}))
def test_one_tensor_missing_or_misshaped_is_refused_by_name_for_any_architecture(
    root: Path, name: str
) -> None:
    torch.manual_seed(2)
    folder = save_folder({**MODELS, **OTHERS}[name](), root / f"any-{name}")
    assert check_local(folder).shape_check == "full"  # the complete folder passes
    weights = load_file(folder / "model.safetensors")
    matrices = sorted(k for k in weights if k.endswith("weight") and weights[k].dim() == 2 and ".0." in k)
    victim = max(matrices)  # a matrix of a layer (the last layer's when there are several)
    victim = victim.replace(".0.", ".1.") if victim.replace(".0.", ".1.") in weights else victim
    # the safetensors library writes what a broken export would: the same file, one tensor short
    save_file({k: v for k, v in weights.items() if k != victim}, folder / "model.safetensors")
    refused(folder, f"missing [{victim!r}]")
    assert check_local(folder, full=False).architecture == name.split("-")[0]  # the generic check cannot tell
    wrong = {**weights, victim: weights[victim][:, :-1].contiguous()}
    save_file(wrong, folder / "model.safetensors")
    refused(folder, f"{victim} is {list(wrong[victim].shape)}, the model has {list(weights[victim].shape)}")
