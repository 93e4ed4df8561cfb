"""A published release is a GPT-2 that transformers loads as it is (and so vLLM's loader, which reads the same
names and layouts): a debug model with non-default LayerNorm and bias weights is exported with
trainer.export.hf and published with trainer.release.publish, then ``GPT2LMHeadModel.from_pretrained`` on the
folder gives the trainer model's logits and greedy text, and the tokenizer files give the trainer's ids. A
wrong GELU flavour in config.json must fail."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel, PreTrainedTokenizerFast

from tests.trainer._support import Job
from trainer.export.hf import export
from trainer.release.manifest import CONFIG, verify
from trainer.release.publish import publish
from trainer.tools.make_shards import EOT, encode
from trainer.training.distributed import DistInfo
from trainer.training.model import GPT

ATOL = 1e-5
TEXTS = ["the quick brown fox", "naïve café, Größe, 東京", "emoji 🎉👍🏽 and a tab\tend", "  leading spaces"]


def shake(model: GPT, seed: int = 2) -> None:
    """Weights no initialisation gives: LayerNorm gains around 1 and shifts, biases, larger matrices, so the
    MLP's GELU sees inputs of a few units (where its tanh and erf forms differ by ~1e-3)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.3 * noise)
            elif name.endswith("bias"):
                p.copy_(0.5 * noise)
            else:
                p.copy_(0.3 * noise)


def trainer_greedy(model: GPT, prompt: list[int], n: int, vocab: int) -> list[int]:
    """Greedy continuation by the trainer's model over the tokenizer's ids, ending at end-of-text."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model.logits(torch.tensor([ids]))[0, -1, :vocab].argmax())
            ids.append(nxt)
            if nxt == EOT:
                break
    return ids[len(prompt) :]


@pytest.fixture(scope="module")
def release(info: DistInfo, trainer_tmp_root: Path) -> tuple[GPT, Path]:
    """The shaken debug model, checkpointed and published; returns the model and the release folder."""
    work = Path(tempfile.mkdtemp(prefix="hf-release-", dir=trainer_tmp_root))
    job = Job(0)
    shake(job.model)
    ck = job.ckpt(str(work / "ckpt"), info, keep=2, async_save=False)
    res = ck.save(1, blocking=True, metrics={"step": 1, "loss": 5.0})
    assert res is not None and res.committed
    ck.close()
    export(str(work / "ckpt"), 1, str(work / "out"))
    rel = publish(str(work / "out"), str(work / "rel"), "gpt-debug", step=1)
    assert verify(str(work / "rel"), "gpt-debug", rel.version).version == rel.version
    return job.model.eval(), work / "rel" / "release" / "gpt-debug" / rel.version


def max_logit_error(model: GPT, folder: Path) -> float:
    hf = GPT2LMHeadModel.from_pretrained(folder).eval()
    vocab = hf.config.vocab_size
    x = torch.tensor([[EOT, *encode(t).tolist()[:-1]][:16] for t in TEXTS[:2]])
    with torch.no_grad():
        ours = model.logits(x)[..., :vocab]
        theirs = hf(x).logits
    assert theirs.shape == ours.shape
    return float((ours - theirs).abs().max())


def test_transformers_gives_the_trainer_models_logits_and_greedy_text(release: tuple[GPT, Path]) -> None:
    model, folder = release
    assert max_logit_error(model, folder) <= ATOL
    hf = GPT2LMHeadModel.from_pretrained(folder).eval()
    assert not hasattr(hf.config, "n_ctx") or hf.config.n_positions == model.cfg.seq_len
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()  # tied, as in the trainer
    tok = AutoTokenizer.from_pretrained(folder)
    for text in TEXTS[:3]:
        prompt = tok(text[:8]).input_ids
        want = trainer_greedy(model, prompt, 12, hf.config.vocab_size)
        assert len(set(want)) >= 3, want  # a continuation that says something, not one token repeated
        with torch.no_grad():
            out = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False)
        assert out[0, len(prompt) :].tolist() == want, text


def test_wrong_gelu_flavour_fails_the_tolerance(release: tuple[GPT, Path], work_dir: Path) -> None:
    """Negative control: the same weights with the erf GELU ("gelu") in config.json are not the trainer's
    model, and the comparison above sees it."""
    model, folder = release
    wrong = work_dir / "wrong"
    shutil.copytree(folder, wrong)
    cfg = json.loads((wrong / CONFIG).read_text())
    assert cfg["activation_function"] == "gelu_new"
    cfg["activation_function"] = "gelu"
    (wrong / CONFIG).write_text(json.dumps(cfg))
    assert max_logit_error(model, wrong) > 10 * ATOL


def test_tokenizer_files_give_the_trainers_ids(release: tuple[GPT, Path]) -> None:
    _, folder = release
    tok = AutoTokenizer.from_pretrained(folder)
    assert isinstance(tok, PreTrainedTokenizerFast) and tok.is_fast
    assert (tok.eos_token_id, tok.bos_token_id, len(tok)) == (EOT, EOT, EOT + 1)
    for text in TEXTS:
        trainer_ids = encode(text).tolist()  # the document's bytes, then end-of-text
        assert trainer_ids[-1] == EOT
        assert tok(text, add_special_tokens=False).input_ids == trainer_ids[:-1], text
        # A prompt starts a new document: after an end-of-text, as every training document does.
        assert tok(text).input_ids == [EOT, *trainer_ids[:-1]], text
        assert tok.decode(tok(text).input_ids, skip_special_tokens=True) == text
