"""trainer/release/adapter.py without a store: what vLLM 0.33.0 serves LoRA on and up to which rank (recorded
from the wheel's source), and an adapter on a base whose vLLM model has no LoRA support refused by name."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from infra.inference.config import VLLM_VERSION
from tests.support.hf_folders import expected_here
from trainer.release import adapter as ad
from trainer.release.hf_folder import FolderError, read_header

REPO = Path(__file__).resolve().parents[3]


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_vllm_lora", REPO / "tests/infra/inference/data/record_vllm.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["record_vllm_lora"] = module
    spec.loader.exec_module(module)
    return module


def test_the_lora_facts_are_the_pinned_vllms() -> None:
    head = ad.LORA_DATA.read_text().splitlines()[0]
    assert head.startswith(f"# vLLM {VLLM_VERSION} (PyPI wheel vllm-{VLLM_VERSION})")  # re-record on a bump
    ranks, archs = ad._lora_data()
    assert ranks == tuple(sorted(ranks)) and ranks[-1] == ad.MAX_LORA_RANK
    assert ad.serving_rank(ranks[1] - 1) == ranks[1] and ad.serving_rank(ranks[1]) == ranks[1]
    # the example's Llama and the Transformers backend's architectures take adapters; vLLM's GPT-2 does not
    assert {"LlamaForCausalLM", "GPTNeoXForCausalLM"} <= archs and "GPT2LMHeadModel" not in archs


def test_recorder_follows_the_model_classes_to_supports_lora(tmp_path: Path) -> None:
    rec = _recorder()
    models = tmp_path / "vllm/model_executor/models"
    (models / "transformers").mkdir(parents=True)
    (models / "registry.py").write_text(
        '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), '
        '"MistralForCausalLM": ("mistral", "MistralForCausalLM"), '
        '"GPT2LMHeadModel": ("gpt2", "GPT2LMHeadModel")}\n'
        '_TRANSFORMERS_SUPPORTED_MODELS = {"PhiForCausalLM": ("transformers", "TransformersForCausalLM")}\n'
    )
    (models / "llama.py").write_text("class LlamaForCausalLM(nn.Module, SupportsLoRA, SupportsPP): ...\n")
    (models / "mistral.py").write_text("class MistralForCausalLM(LlamaForCausalLM): ...\n")
    (models / "gpt2.py").write_text("class GPT2LMHeadModel(nn.Module, SupportsPP): ...\n")
    (models / "transformers/base.py").write_text("class Base(nn.Module, SupportsLoRA): ...\n")
    (models / "transformers/__init__.py").write_text("class TransformersForCausalLM(CausalMixin): ...\n")
    (models / "transformers/causal.py").write_text("class CausalMixin(Base): ...\n")
    served = ["GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "PhiForCausalLM"]
    assert rec.lora_architectures(tmp_path, served) == [
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "PhiForCausalLM",
    ]


def _check(folder: Path, base: dict | None = None) -> ad.Adapter:
    listing = {p.name: p.stat().st_size for p in folder.iterdir()}
    plan = ad.plan_adapter(listing)

    def head(name: str) -> bytes:
        with open(folder / name, "rb") as f:
            return read_header(f, name, listing[name])

    return ad.check_adapter(plan.publish, listing, lambda n: (folder / n).read_bytes(), head, base)


def test_embedding_targets_and_rank_patterns(tmp_path: Path) -> None:
    """peft's embedding LoRA (lora_embedding_A/B) and the whole embedding it saves beside it (vLLM skips that
    copy), and a per-module rank: checked against the base's own shapes."""
    config = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=300,
                         architectures=["LlamaForCausalLM"])  # fmt: skip
    lora = LoraConfig(r=8, target_modules=["embed_tokens", "o_proj"], rank_pattern={"o_proj": 4})
    get_peft_model(LlamaForCausalLM(config), lora).save_pretrained(tmp_path)
    got = _check(tmp_path, expected_here(config.to_json_string().encode()))
    assert (got.rank, got.modules, got.shape_check) == (8, 3, "full")  # the embedding and 2 o_proj
    wider = LlamaConfig(**{**config.to_dict(), "vocab_size": 320})
    whole = (
        "adapter_model.safetensors: model.embed_tokens is saved whole as [300, 32], the base's is [320, 32]"
    )
    with pytest.raises(FolderError, match=re.escape(whole)):
        _check(tmp_path, expected_here(wider.to_json_string().encode()))


def test_an_adapter_on_a_base_vllm_serves_without_lora_is_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=300, n_positions=64,
                        architectures=["GPT2LMHeadModel"], bos_token_id=0, eos_token_id=0)  # fmt: skip
    peft_model = get_peft_model(GPT2LMHeadModel(config), LoraConfig(r=4, target_modules=["c_attn"],
                                                                      fan_in_fan_out=True))  # fmt: skip
    peft_model.save_pretrained(tmp_path)
    generic = _check(tmp_path)  # what the fetch tool checks
    assert (generic.rank, generic.modules, generic.shape_check) == (4, 2, "generic")
    base = expected_here(config.to_json_string().encode())
    refusal = "the base's architecture GPT2LMHeadModel is one vLLM 0.33.0 serves without LoRA adapters"
    with pytest.raises(FolderError, match="^" + re.escape(refusal)):
        _check(tmp_path, base)
