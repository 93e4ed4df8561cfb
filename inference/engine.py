"""Batched text generation with a key/value cache over the trainer's ``GPT`` (trainer/model.py).

Runs ``GPT``'s sub-modules one new token per row per step, with left padding (per-row pad counts, position
ids and an attention mask, so a padded row computes what it would alone), a per-layer key/value cache,
and rows merged and dropped between steps (:meth:`KVCache.merge`, :meth:`KVCache.select`; the cache is
trimmed to the longest live row, so it never grows past the context). The math must match
``trainer/model.py``; tests/inference/test_engine.py compares it with ``GPT.forward``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class KVCache:
    """Keys and values of every layer for a batch of left-padded rows.

    ``k[i]``/``v[i]``: ``(B, n_head, T, head_dim)`` for layer ``i``; ``pad[b]``: leading pad columns of row
    ``b``; ``length[b]``: real tokens of row ``b`` (its next position id).
    """

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    pad: torch.Tensor
    length: torch.Tensor

    @property
    def rows(self) -> int:
        """Rows in the batch."""
        return int(self.pad.shape[0])

    @property
    def width(self) -> int:
        """Columns (pad + real tokens of the longest row)."""
        return int(self.k[0].shape[2])

    def select(self, keep: torch.Tensor) -> KVCache:
        """The rows at indices ``keep``, with the pad columns all of them share cut off."""
        pad = self.pad.index_select(0, keep)
        cut = int(pad.min()) if pad.numel() else 0
        return KVCache(
            k=[t.index_select(0, keep)[:, :, cut:] for t in self.k],
            v=[t.index_select(0, keep)[:, :, cut:] for t in self.v],
            pad=pad - cut,
            length=self.length.index_select(0, keep),
        )

    def merge(self, other: KVCache) -> KVCache:
        """``self``'s rows followed by ``other``'s, the narrower cache left-padded to the wider one."""
        width = max(self.width, other.width)

        def widen(c: KVCache) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
            extra = width - c.width
            if extra == 0:
                return c.k, c.v, c.pad
            return (
                [F.pad(t, (0, 0, extra, 0)) for t in c.k],
                [F.pad(t, (0, 0, extra, 0)) for t in c.v],
                c.pad + extra,
            )

        ka, va, pa = widen(self)
        kb, vb, pb = widen(other)
        return KVCache(
            k=[torch.cat([a, b]) for a, b in zip(ka, kb, strict=True)],
            v=[torch.cat([a, b]) for a, b in zip(va, vb, strict=True)],
            pad=torch.cat([pa, pb]),
            length=torch.cat([self.length, other.length]),
        )


def _attend(attn: torch.nn.Module, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None,
            mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """``CausalSelfAttention`` of trainer/model.py with an explicit mask and a cache; returns
    ``(output, keys, values)`` where keys/values include ``past``."""
    b, t, c = x.shape
    h = attn.n_head
    q, k, v = attn.qkv(x).split(c, dim=2)
    q, k, v = (y.view(b, t, h, c // h).transpose(1, 2) for y in (q, k, v))
    if past is not None:
        k = torch.cat([past[0], k], dim=2)
        v = torch.cat([past[1], v], dim=2)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return attn.proj(y.transpose(1, 2).contiguous().view(b, t, c)), k, v


def _run(model: torch.nn.Module, x: torch.Tensor, past: KVCache | None, mask: torch.Tensor
         ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:  # fmt: skip
    ks, vs = [], []
    for i, block in enumerate(model.blocks):
        a, k, v = _attend(block.attn, block.ln1(x), None if past is None else (past.k[i], past.v[i]), mask)
        x = x + a
        x = x + block.mlp(block.ln2(x))
        ks.append(k)
        vs.append(v)
    return model.lm_head(model.ln_f(x)), ks, vs


@torch.inference_mode()
def prefill(model: torch.nn.Module, prompts: list[list[int]], *, all_logits: bool = False
            ) -> tuple[torch.Tensor, KVCache]:  # fmt: skip
    """Run left-padded ``prompts`` (each at least one token) through ``model``.

    Returns the logits of the next token of every row, ``(B, vocab)`` (or of every position,
    ``(B, T, vocab)``, with ``all_logits``), and the cache to continue from.
    """
    dev = model.wte.weight.device
    sizes = [len(p) for p in prompts]
    if min(sizes) < 1:
        raise ValueError("every prompt needs at least one token")
    width = max(sizes)
    # Built on the host and copied once: no per-row copy, no device sync to read the lengths back.
    idx = torch.tensor([[0] * (width - len(p)) + p for p in prompts], dtype=torch.long, device=dev)
    lens = torch.tensor(sizes, device=dev)
    pad = width - lens
    cols = torch.arange(width, device=dev)
    pos = (cols[None, :] - pad[:, None]).clamp(min=0)
    real = cols[None, :] >= pad[:, None]  # (B, T) key is a real token
    causal = torch.ones(width, width, dtype=torch.bool, device=dev).tril()
    # A pad query attends to itself only, so its row of the softmax is never empty (no NaN); real queries
    # never see pad keys. Pad outputs are never read.
    mask = (causal[None] & real[:, None, :]) | torch.eye(width, dtype=torch.bool, device=dev)[None]
    x = model.wte(idx) + model.wpe(pos)
    logits, ks, vs = _run(model, x, None, mask[:, None])
    cache = KVCache(k=ks, v=vs, pad=pad, length=lens.clone())
    return (logits if all_logits else logits[:, -1]), cache


@torch.inference_mode()
def decode(model: torch.nn.Module, cache: KVCache, tokens: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
    """Feed one new token per row (``tokens``: ``(B,)``); returns the next logits ``(B, vocab)`` and the
    cache with the token appended."""
    dev = model.wte.weight.device
    x = model.wte(tokens.to(dev)[:, None]) + model.wpe(cache.length[:, None])
    cols = torch.arange(cache.width + 1, device=dev)
    mask = (cols[None, :] >= cache.pad[:, None])[:, None, None, :]  # (B, 1, 1, T+1)
    logits, ks, vs = _run(model, x, cache, mask)
    return logits[:, -1], KVCache(k=ks, v=vs, pad=cache.pad, length=cache.length + 1)


@torch.inference_mode()
def sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    vocab: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per row: greedy where ``temperature <= 0``, else softmax sampling at that temperature
    among the ``top_k`` most likely tokens (0 = all). Ids ``>= vocab`` (the embedding's padding rows beyond
    the tokenizer's vocabulary) are never chosen."""
    # Decided on the tensors as given (the batcher's are on the host), before moving them: deciding on
    # the GPU would wait for the forward that produced ``logits`` at every step.
    all_greedy, any_top_k = bool((temperature <= 0).all()), bool((top_k > 0).any())
    logits = logits.float()
    if vocab < logits.shape[-1]:
        beyond = torch.arange(logits.shape[-1], device=logits.device) >= vocab
        logits = logits.masked_fill(beyond, float("-inf"))
    greedy = logits.argmax(dim=-1)
    if all_greedy:
        return greedy
    temperature = temperature.to(logits.device)
    top_k = top_k.to(logits.device)
    scaled = logits / temperature.clamp(min=1e-6)[:, None]
    if any_top_k:
        k = torch.where(top_k > 0, top_k, vocab).clamp(1, vocab)
        kth = scaled.sort(dim=-1, descending=True).values.gather(1, (k - 1)[:, None])
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    drawn = torch.multinomial(scaled.softmax(dim=-1), 1, generator=generator)[:, 0]
    return torch.where(temperature <= 0, greedy, drawn)
