"""The architecture list the publisher checks (trainer/release/data/vllm-architectures.txt) is the pinned
vLLM's: its
header names the version the inference stack pins, and the recorder reads exactly the registry's
text-generation table and its Transformers-backend causal LMs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from infra.inference.config import VLLM_VERSION
from trainer.release.vllm_models import DATA, parse, registry

REPO = Path(__file__).resolve().parents[2]


def _recorder():  # tests/infra/inference/data/record_vllm.py, a script
    path = REPO / "tests/infra/inference/data/record_vllm.py"
    spec = importlib.util.spec_from_file_location("record_vllm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["record_vllm"] = module
    spec.loader.exec_module(module)
    return module


def test_the_list_is_the_pinned_vllms() -> None:
    reg = registry()
    assert reg.version == VLLM_VERSION  # bump the pin: re-record (record_vllm.py) with that wheel
    head = DATA.read_text().splitlines()[:2]
    assert head[0].startswith(f"# vLLM {VLLM_VERSION} (PyPI wheel vllm-{VLLM_VERSION})")
    assert "vllm/model_executor/models/registry.py (sha256 " in head[1]
    # The architectures this platform's own releases and the example use, and one served only through
    # vLLM's Transformers backend.
    assert {"GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM", "GPTNeoXForCausalLM"} <= reg.serves
    assert reg.refusal("LlamaForCausalLM") is None
    assert not set(reg.removed) & reg.serves


def test_recorder_reads_the_registry_tables(tmp_path: Path) -> None:
    rec = _recorder()
    registry_py = tmp_path / "vllm/model_executor/models/registry.py"
    registry_py.parent.mkdir(parents=True)
    registry_py.write_text(
        '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), '
        '"GPT2LMHeadModel": ("gpt2", "GPT2LMHeadModel")}\n'
        '_EMBEDDING_MODELS = {"BertModel": ("bert", "BertEmbeddingModel")}\n'
        '_TRANSFORMERS_SUPPORTED_MODELS = {"PhiForCausalLM": ("transformers", "TransformersForCausalLM"), '
        '"Emu3ForConditionalGeneration": ("transformers", "TransformersMultiModalForCausalLM")}\n'
        '_PREVIOUSLY_SUPPORTED_MODELS = {"MPTForCausalLM": "0.28.0", "GPT2LMHeadModel": "0.1.0"}\n'
    )
    served, removed = rec.architectures(tmp_path)
    assert served == ["GPT2LMHeadModel", "LlamaForCausalLM", "PhiForCausalLM"]
    assert removed == {"MPTForCausalLM": "0.28.0"}  # served again is not removed


def test_a_file_without_its_version_is_refused() -> None:
    with pytest.raises(ValueError, match="must name the vLLM version"):
        parse("serves LlamaForCausalLM\n")
    reg = parse("# vLLM 9.9.9 (test)\nserves A\nremoved B 1.0.0\n")
    assert reg.refusal("B") == "'B' was served by vLLM up to 1.0.0, not by the pinned 9.9.9"
    assert "is not an architecture vLLM 9.9.9 serves" in (reg.refusal("C") or "")
