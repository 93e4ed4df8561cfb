"""A team's own training script, as a user would write it: a small Llama-architecture language model, built
from a config with transformers (randomly initialised, never downloaded), trained with torchrun (NCCL on
GPUs, gloo on CPUs) on the text under ``$AIPLAT_DATA_URI``, and left as a Hugging Face folder at
``$AIPLAT_OUTPUT_URI/model/`` for the platform to publish (docs/inference/release.md).

    torchrun --nproc-per-node 2 train.py [--steps N] [--hidden-size H] [--layers L] ...

What it relies on is only the environment every pod of a team job gets (docs/platform/job-contract.md):

- ``AIPLAT_DATA_URI``: ``s3://`` (or a local path) holding ``*.txt`` files, read-only;
- ``AIPLAT_CHECKPOINT_URI``: its own checkpoints, the same for every attempt: a restarted attempt resumes
  from the last committed one (``AIPLAT_ATTEMPT_ID`` tells attempts apart in the log). They are written
  by the platform's checkpoint helper, ``trainer.checkpoint.job`` (the image copies the ``trainer``
  package): one folder per save and attempt, committed by a manifest written last, the newest committed
  one loaded and nothing else;
- ``AIPLAT_OUTPUT_URI``: what it wants released, as an HF folder under ``model/`` (config.json,
  model.safetensors, tokenizer files with a chat template), plus ``greedy.json``: the greedy continuation of
  a prompt by the model as it left training, to check a served copy against;
- ``AIPLAT_PREEMPTION_WINDOW_S``: after SIGTERM (preemption, eviction) there is that long to save: every
  rank stops at the next step and checkpoints it unless the helper finds the save cannot finish in what
  is left of the window (then the last committed checkpoint stands), and the process exits 143;
- torchrun's ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``; ``AWS_REGION`` and, against MinIO or a
  test server, ``AWS_ENDPOINT_URL`` (boto3 reads both).

Imports: the standard library, torch, transformers and boto3 (examples/byo-llama/requirements.txt),
and the platform's checkpoint helper ``trainer.checkpoint.job``. The tokenizer is bytes (ids 0-255,
end-of-text 256), written as a tokenizer.json that transformers' fast tokenizer loads, so nothing is
fetched from the Hub.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trainer.checkpoint.job import JobCheckpoint
from trainer.run.cost import attempt_cost

EOT = "<|endoftext|>"
VOCAB = 257  # 256 bytes + end-of-text
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
PROMPT = "the quick brown"
GREEDY_TOKENS = 16


# ------------------------------------------------------------------------------------------------ storage
class Store:
    """Objects under ``s3://bucket/prefix`` (boto3), or files under a local folder (``file://`` or a path)."""

    def __init__(self, uri: str) -> None:
        self.s3 = uri.startswith("s3://")
        if self.s3:
            import boto3

            self.bucket, _, prefix = uri[5:].partition("/")
            self.prefix = prefix.strip("/")
            # A MinIO or test endpoint has no per-bucket DNS names.
            style = {"addressing_style": "path"} if os.environ.get("AWS_ENDPOINT_URL") else {}
            self.client = boto3.client("s3", config=boto3.session.Config(s3=style))
        else:
            self.root = Path(uri.removeprefix("file://"))

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def names(self) -> list[str]:
        """Every object below the prefix, relative to it."""
        if not self.s3:
            if not self.root.is_dir():
                return []
            return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())
        base = self.prefix + "/" if self.prefix else ""
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            out += [o["Key"][len(base) :] for o in page.get("Contents", [])]
        return sorted(out)

    def read(self, name: str) -> bytes:
        if not self.s3:
            return (self.root / name).read_bytes()
        return self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"].read()

    def put_file(self, name: str, path: Path) -> None:
        """Create ``name`` once: outputs and run records are write-once (the bucket policy refuses a PUT
        without ``If-None-Match: *``, and any overwrite or delete). One PUT takes up to 5 GB; larger files
        would go as a multipart upload whose CompleteMultipartUpload carries the same header."""
        if not self.s3:
            target = self.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as f:
                f.write(path.read_bytes())
        else:
            with open(path, "rb") as f:
                self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=f, IfNoneMatch="*")

    def put(self, name: str, data: bytes) -> None:
        with tempfile.NamedTemporaryFile() as f:
            f.write(data)
            f.flush()
            self.put_file(name, Path(f.name))


def env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        sys.exit(f"train.py: {name} is not set (the platform sets it on every pod of a team job)")
    return value


# -------------------------------------------------------------------------------------------- tokenizer
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte (what tokenizers' ByteLevel pre-tokenizer uses)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {b: chr(b) for b in keep}
    extra = iter(range(256, 512))
    for b in range(256):
        out.setdefault(b, chr(next(extra)))
    return out


def write_tokenizer(folder: Path, context: int) -> None:
    """tokenizer.json (one token per byte, no merges, end-of-text added) and tokenizer_config.json with a
    chat template, for ``PreTrainedTokenizerFast``."""
    table = _bytes_to_unicode()
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": 256,
                "content": EOT,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": level,
        "post_processor": None,
        "decoder": level,
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
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOT,
        "eos_token": EOT,
        "pad_token": EOT,
        "model_max_length": context,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


# ------------------------------------------------------------------------------------------------ train
def load_corpus(uri: str) -> torch.Tensor:
    store = Store(uri)
    texts = [store.read(n) for n in store.names() if n.endswith(".txt")]
    if not texts:
        sys.exit(f"train.py: no *.txt files under {uri} (AIPLAT_DATA_URI)")
    data = b"\n".join(texts)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=8, help="sequences per rank per step")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--hidden-size", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--checkpoint-every", type=int, default=50)
    args = ap.parse_args()

    data_uri, ckpt_uri, out_uri = (
        env("AIPLAT_DATA_URI"),
        env("AIPLAT_CHECKPOINT_URI"),
        env("AIPLAT_OUTPUT_URI"),
    )
    attempt = os.environ.get("AIPLAT_ATTEMPT_ID", "local")
    started = time.monotonic()
    cuda = torch.cuda.is_available()
    # A bounded wait: a peer that is gone ends a collective with an error, not a hang.
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)

    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=args.hidden_size,
        intermediate_size=4 * args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=4 * args.seq_len,
        bos_token_id=256,
        eos_token_id=256,
        pad_token_id=256,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(device)
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr)
    # Every rank writes its shard; the SIGTERM handler is the helper's (it records when the window began).
    ckpt = JobCheckpoint(model, optim, uri=ckpt_uri, model_config=config.to_dict())
    start = ckpt.restore()  # the newest committed checkpoint's step, 0 on a fresh start
    ddp = DistributedDataParallel(model)
    tokens = load_corpus(data_uri)
    if rank == 0:
        print(
            f"attempt {attempt}: {world} ranks, {tokens.numel()} tokens, steps {start}..{args.steps}",
            flush=True,
        )

    def stopped(step: int) -> int:
        """SIGTERM, agreed by every rank before ``step``: save it unless it is committed already or
        cannot finish within the window (the helper says which), then leave."""
        if ckpt.last_committed_step != step:
            ckpt.save(step)
        ckpt.close()
        dist.destroy_process_group()
        if rank == 0:
            last = ckpt.last_committed_step
            print(f"SIGTERM at step {step}: the last committed checkpoint is step {last}", flush=True)
        return 143

    ddp.train()
    for step in range(start, args.steps):
        # Every rank asks at the same point (one all-reduce), so every rank stops at the same step.
        if ckpt.stop_requested():
            return stopped(step)
        g = torch.Generator().manual_seed(step * world + rank)  # each rank its own windows
        at = torch.randint(0, tokens.numel() - args.seq_len, (args.batch_size,), generator=g)
        batch = torch.stack([tokens[i : i + args.seq_len] for i in at.tolist()]).to(device)
        loss = ddp(input_ids=batch, labels=batch).loss  # the model shifts the labels itself
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
        if (step + 1) % args.checkpoint_every == 0 and step + 1 < args.steps:
            ckpt.save(step + 1)
    if ckpt.stop_requested():  # SIGTERM during the last step: the final save is the window's
        return stopped(args.steps)
    if ckpt.last_committed_step != args.steps:
        ckpt.save(args.steps)
    # Every rank leaves the process groups here, together: what follows is rank 0's alone and has no
    # collective, so no rank waits on another's output writing.
    ckpt.close()
    dist.destroy_process_group()

    if rank == 0:  # the model as training left it: an HF folder to publish, and its own greedy tokens
        model.eval()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            model.save_pretrained(folder)  # config.json, generation_config.json, model.safetensors
            write_tokenizer(folder, config.max_position_embeddings)
            tok = PreTrainedTokenizerFast.from_pretrained(folder)
            ids = tok(PROMPT, return_tensors="pt").input_ids.to(device)
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=GREEDY_TOKENS, do_sample=False, pad_token_id=256)
            greedy = {
                "prompt": PROMPT,
                "prompt_ids": ids[0].tolist(),
                "tokens": out[0, ids.shape[1] :].tolist(),
            }
            output = Store(out_uri)
            for p in sorted(folder.iterdir()):
                output.put_file(f"model/{p.name}", p)
            output.put("greedy.json", json.dumps(greedy).encode())
        print(f"wrote {out_uri.rstrip('/')}/model/ and greedy.json", flush=True)
        # The run record the publisher takes the job and its image from (the job contract): written last,
        # once; with its GPU hours and what they cost at the price the runtime gives the pod ($AIPLAT_PRICE)
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        hours = round(
            (world // per_node) * (per_node if cuda else 0) * (time.monotonic() - started) / 3600, 6
        )
        record = {
            "status": "finished",
            "exit": {"code": 0},
            "image_digest": os.environ.get("AIPLAT_IMAGE_DIGEST", ""),
            "workload": {"trainjob": os.environ.get("AIPLAT_TRAINJOB", "")},
            "attempt": attempt,
            "steps": args.steps,
            "ended_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resources": {
                "nodes": world // per_node,
                "gpus_per_node": per_node if cuda else 0,
                "gpu_hours": hours,
            },
            "cost": attempt_cost(hours),
        }
        Store(ckpt_uri).put(f"run-records/{attempt}.json", json.dumps(record).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
