"""The one trainer -> Hugging Face GPT-2 mapping (trainer/export/gpt2.py), checked against the trainer's
model and
transformers' own GPT2LMHeadModel (no files: the published folder is tests/trainer/test_hf_release.py's)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from tests.support.hf_folders import expected_here
from trainer.config import ModelConfig
from trainer.export.gpt2 import (
    ByteVocab,
    ReleaseFormatError,
    hf_config,
    tensor_rules,
    to_hf_tensors,
)
from trainer.training.model import GPT

CFG = ModelConfig(size="debug", n_layer=3, d_model=48, n_head=4, seq_len=16, vocab_size=320)
VOCAB = ByteVocab()


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(0)
    return GPT(CFG)


def test_every_trainer_tensor_has_one_gpt2_name(model: GPT) -> None:
    rules = tensor_rules(CFG.n_layer)
    trainer_names = [r.trainer for r in rules]
    assert len(set(trainer_names)) == len(trainer_names) == len({r.hf for r in rules})
    # Everything the trainer saves, except the head that is the embedding (tied), and nothing else.
    assert set(trainer_names) == set(model.state_dict()) - set(GPT.TIED_WEIGHTS)


def test_shapes_are_transformers_gpt2s(model: GPT) -> None:
    """The tensors we write, the shapes the publisher expects (trainer/release/hf_folder.py, less the tied
    head), and
    transformers' own GPT-2 of that config agree."""
    config = hf_config(CFG, VOCAB)
    ours = {k: list(v.shape) for k, v in to_hf_tensors(model.state_dict(), CFG, VOCAB).items()}
    want = expected_here(json.dumps({**config, "architectures": ["GPT2LMHeadModel"]}).encode())
    assert want["optional"] == ["lm_head.weight"]  # tied to the embedding: save_pretrained leaves it out
    assert ours == {k: v["shape"] for k, v in want["tensors"].items() if k not in want["optional"]}
    with torch.device("meta"):
        reference = GPT2LMHeadModel(GPT2Config(**config))
    assert reference.config.tie_word_embeddings
    theirs = {k: list(v.shape) for k, v in reference.state_dict().items() if k != "lm_head.weight"}
    assert ours == theirs
    assert config["vocab_size"] == VOCAB.size < CFG.vocab_size  # the padding rows are left out


def test_conv1d_weights_are_transposed_and_padding_rows_dropped(model: GPT) -> None:
    sd = model.state_dict()
    hf = to_hf_tensors(sd, CFG, VOCAB)
    assert torch.equal(hf["transformer.h.1.attn.c_attn.weight"], sd["blocks.1.attn.qkv.weight"].t())
    assert torch.equal(hf["transformer.h.2.mlp.c_proj.weight"], sd["blocks.2.mlp.2.weight"].t())
    assert torch.equal(hf["transformer.h.0.ln_2.bias"], sd["blocks.0.ln2.bias"])
    assert torch.equal(hf["transformer.wte.weight"], sd["wte.weight"][: VOCAB.size])
    assert all(t.is_contiguous() for t in hf.values())


def test_missing_or_foreign_tensors_are_refused(model: GPT) -> None:
    sd = dict(model.state_dict())
    with pytest.raises(
        ReleaseFormatError, match=r"checkpoint weights hold tensors with no GPT-2 name: \['x'\]"
    ):
        to_hf_tensors({**sd, "x": sd["ln_f.bias"]}, CFG, VOCAB)
    del sd["blocks.2.ln1.bias"]
    with pytest.raises(ReleaseFormatError, match=r"checkpoint weights lack \['blocks.2.ln1.bias'\]"):
        to_hf_tensors(sd, CFG, VOCAB)


@pytest.mark.parametrize(
    ("tokenizer", "message"),
    [
        ({"tokenizer": "gpt2-bpe", "vocab_size": 50257, "eot_token": 50256}, "only the byte tokenizer"),
        ({"tokenizer": "bytes", "vocab_size": 400, "eot_token": 256}, "do not fit .* the model.s 320"),
        ({"tokenizer": "bytes", "vocab_size": 260, "eot_token": 256}, "256 bytes and the end-of-text token"),
    ],
)  # fmt: skip
def test_only_the_byte_tokenizer_that_fits_the_model(tokenizer: dict, message: str) -> None:
    with pytest.raises(ReleaseFormatError, match=message):
        ByteVocab.from_index(tokenizer, CFG.vocab_size)
    assert ByteVocab.from_index(None, CFG.vocab_size) == ByteVocab(eot=256, size=257)
