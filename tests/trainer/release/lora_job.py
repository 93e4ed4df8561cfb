"""A team's LoRA fine-tune, as its job would run it (the training process of
tests/trainer/release/test_adapter_release.py): a tiny randomly initialised Llama built from a config, saved
as the base folder; a peft LoRA on it trained a few steps to continue one sequence; the adapter saved with
``save_pretrained``; the base's and the adapted model's greedy tokens for a prompt written beside them.

    python tests/trainer/release/lora_job.py OUT_DIR [--rank R] [--targets q_proj,v_proj]

Writes ``OUT_DIR/base/``, ``OUT_DIR/adapter/`` and ``OUT_DIR/greedy.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

from tests.support.hf_folders import save_folder

BASE = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)  # fmt: skip
SEQUENCE = [256, *range(97, 97 + 20)]  # end-of-text, then "abcdefghijklmnopqrst" (the byte tokenizer's ids)
PROMPT = SEQUENCE[:4]
NEW_TOKENS = 10


def greedy(model: torch.nn.Module) -> list[int]:
    model.eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             pad_token_id=256, eos_token_id=None)  # fmt: skip
    return [int(t) for t in out[0, len(PROMPT) :]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--targets", default="q_proj,v_proj,down_proj")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.manual_seed(0)
    base = LlamaForCausalLM(BASE)
    save_folder(base, args.out / "base")
    base_tokens = greedy(base)

    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules=args.targets.split(","))  # fmt: skip
    model = get_peft_model(base, lora)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    batch = torch.tensor([SEQUENCE])
    model.train()
    for step in range(args.steps):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    tokens = greedy(model)
    model.save_pretrained(args.out / "adapter")  # adapter_config.json, adapter_model.safetensors
    (args.out / "greedy.json").write_text(
        json.dumps({"prompt": PROMPT, "base": base_tokens, "adapted": tokens, "expected": SEQUENCE[4:14]})
    )


if __name__ == "__main__":
    main()
