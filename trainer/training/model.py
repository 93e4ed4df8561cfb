"""A small GPT-2 style decoder (pre-LayerNorm, GELU MLP, tied embeddings) using fused SDPA attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import ModelConfig


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention through ``F.scaled_dot_product_attention`` (flash/memory-efficient
    kernels on GPU: https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    """Transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only language model; ``forward(idx, targets)`` returns the mean cross-entropy loss."""

    # state_dict names that are the same tensor as another name (weight tying as in GPT-2).
    TIED_WEIGHTS = {"lm_head.weight": "wte.weight"}

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying as in GPT-2
        self.apply(self._init_weights)
        # GPT-2 scales residual projections by 1/sqrt(2 * n_layer).
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``[batch, time, vocab_size]`` of the token ids ``idx`` ``[batch, time]``."""
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.logits(idx)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    def num_params(self, exclude_embeddings: bool = True) -> int:
        """Parameter count (tied weights counted once); position embeddings excluded as in the MFU formula."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if exclude_embeddings else n

    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6N plus attention 12*L*d*T (PaLM paper, appendix B,
        https://arxiv.org/abs/2204.02311), as used by nanoGPT/llm.c for MFU."""
        c = self.cfg
        return 6.0 * self.num_params() + 12.0 * c.n_layer * c.d_model * c.seq_len
