"""The cached, left-padded forward (inference/engine.py) computes what trainer/model.py's GPT computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inference.engine import decode, prefill, sample
from trainer.config import ModelConfig
from trainer.model import GPT


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(size="debug")).eval()


def rand_tokens(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 257, (n,), generator=g).tolist()


def test_logits_match_the_training_forward(model: GPT) -> None:
    """The loss from our logits equals GPT.forward's loss on the same tokens (same weights, same math)."""
    idx = torch.tensor([rand_tokens(17, 1), rand_tokens(17, 2)])
    logits, _ = prefill(model, idx[:, :-1].tolist(), all_logits=True)
    ours = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
    with torch.no_grad():
        theirs = model(idx[:, :-1], idx[:, 1:])
    torch.testing.assert_close(ours, theirs)


def alone(model: GPT, prompt: list[int], n: int) -> tuple[list[int], torch.Tensor]:
    """Reference: no cache, no padding, the whole sequence through the model for every token; returns the
    greedy tokens and the logits each was chosen from."""
    seq, rows = list(prompt), []
    for _ in range(n):
        logits, _ = prefill(model, [seq], all_logits=True)
        rows.append(logits[0, -1])
        seq.append(int(logits[0, -1, :257].argmax()))  # the byte vocabulary (+ EOT)
    return seq[len(prompt) :], torch.stack(rows)


def greedy_alone(model: GPT, prompt: list[int], n: int) -> list[int]:
    """The greedy tokens of :func:`alone`."""
    return alone(model, prompt, n)[0]


def test_padded_batch_with_cache_equals_each_prompt_alone(model: GPT) -> None:
    prompts = [rand_tokens(3, 3), rand_tokens(11, 4), rand_tokens(1, 5), rand_tokens(7, 6)]
    logits, cache = prefill(model, prompts)
    assert cache.width == 11 and cache.pad.tolist() == [8, 0, 10, 4]
    zero, none = torch.zeros(4), torch.zeros(4, dtype=torch.long)
    out: list[list[int]] = [[] for _ in prompts]
    seen = []
    for _ in range(8):
        seen.append(logits)
        tok = sample(logits, zero, none, 257)
        for row, t in enumerate(tok.tolist()):
            out[row].append(t)
        logits, cache = decode(model, cache, tok)
    for row, p in enumerate(prompts):
        tokens, ref_logits = alone(model, p, 8)
        assert out[row] == tokens
        torch.testing.assert_close(torch.stack([s[row] for s in seen]), ref_logits, atol=1e-5, rtol=1e-4)


def test_rows_join_and_leave_between_steps(model: GPT) -> None:
    """A request that joins a running batch, and rows dropped when they finish, keep every row's tokens
    what they would be alone; the cache shrinks to the longest live row."""
    a, b, c = rand_tokens(9, 7), rand_tokens(2, 8), rand_tokens(5, 9)
    zero1, none1 = torch.zeros(1), torch.zeros(1, dtype=torch.long)
    logits, cache = prefill(model, [a, b])
    toks = sample(logits, torch.zeros(2), torch.zeros(2, dtype=torch.long), 257)
    got = {"a": [int(toks[0])], "b": [int(toks[1])], "c": []}
    logits, cache = decode(model, cache, toks)  # a: 10 real + next, b: 3 real + next
    # c joins: prefilled on its own, merged into the batch.
    c_logits, c_cache = prefill(model, [c])
    c_tok = sample(c_logits, zero1, none1, 257)
    got["c"].append(int(c_tok[0]))
    toks = sample(logits, torch.zeros(2), torch.zeros(2, dtype=torch.long), 257)
    got["a"].append(int(toks[0]))
    got["b"].append(int(toks[1]))
    cache = cache.merge(c_cache)
    logits = torch.cat([logits, c_logits])
    logits, cache = decode(model, cache, torch.cat([toks, c_tok]))
    assert cache.rows == 3 and cache.width == 11 and cache.pad.tolist() == [0, 7, 5]
    # a (the longest) finishes: the shared pad columns are cut off.
    cache = cache.select(torch.tensor([1, 2]))
    logits = logits[1:]
    assert cache.width == 6 and cache.pad.tolist() == [2, 0]
    for _ in range(3):
        toks = sample(logits, torch.zeros(2), torch.zeros(2, dtype=torch.long), 257)
        got["b"].append(int(toks[0]))
        got["c"].append(int(toks[1]))
        logits, cache = decode(model, cache, toks)
    assert got["a"] == greedy_alone(model, a, 2)
    assert got["b"] == greedy_alone(model, b, 5)
    assert got["c"] == greedy_alone(model, c, 4)


def test_sampling_respects_vocab_top_k_and_temperature() -> None:
    logits = torch.tensor([[0.0, 5.0, 4.0, 3.0, 9.0], [1.0, 2.0, 3.0, 4.0, 0.0]]).repeat(200, 1)
    rows = logits.shape[0]
    g = torch.Generator().manual_seed(0)
    # vocab=4 hides id 4 (the largest logit in even rows); greedy picks among the rest.
    greedy = sample(logits.clone(), torch.zeros(rows), torch.zeros(rows, dtype=torch.long), 4)
    assert set(greedy[0::2].tolist()) == {1} and set(greedy[1::2].tolist()) == {3}
    top2 = sample(logits.clone(), torch.ones(rows), torch.full((rows,), 2), 4, g)
    assert set(top2[0::2].tolist()) == {1, 2} and set(top2[1::2].tolist()) == {2, 3}
    free = sample(logits.clone(), torch.full((rows,), 5.0), torch.zeros(rows, dtype=torch.long), 4, g)
    assert set(free.tolist()) == {0, 1, 2, 3}  # a high temperature reaches every allowed id, never id 4
