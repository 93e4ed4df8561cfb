"""The one GPU check (run it through ``bash bench/gpu/run.sh``, which installs what it needs).

1. The trainer (``python -m trainer.train``, trainer/configs/gpt2_124m.toml: gpt2-124m, bf16, torch.compile)
   trains on token shards made from this repository's docs; its own step lines give tokens/s and MFU
   (yardstick: llm.c's ~460k tokens/s per H100, about 40 % MFU).
2. Its checkpoint is exported as a Hugging Face folder (``python -m trainer.export_hf``) and published as a
   release (``python -m trainer.publish --from``), fetched and verified into a
   folder (``python -m inference.fetch``), and served by vLLM's OpenAI server (``vllm serve <dir>``, no hub).
3. 1, 16 and 64 concurrent streaming clients (bench/gpu/load.py) measure output tokens/s and p50/p99 time to
   first token, each printed also as a ratio to the single-client run.

Figures go to stdout, and as JSON to ``$WORK/figures.json``. Everything runs against a deadline (the whole
check within 8 minutes, installs included): a phase that would overrun is stopped and reported.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.gpu.load import run_levels  # noqa: E402
from bench.gpu.stats import format_rows, serving_table, steady_training, trainer_steps  # noqa: E402

MODEL = "gpt2-bench"
LLMC_TOKENS_PER_S = 460e3  # llm.c GPT-2 (124M) on one H100 (github.com/karpathy/llm.c discussion #481)


def sh(cmd: list[str], deadline: float, log: Path, env: dict[str, str] | None = None) -> str:
    """Run ``cmd`` to completion by ``deadline`` (monotonic); its output goes to ``log`` and is returned."""
    left = deadline - time.monotonic()
    if left <= 5:
        raise SystemExit(f"out of time before: {' '.join(cmd[:4])}")
    with open(log, "w") as out:
        r = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=left)
    text = log.read_text()
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({r.returncode}):\n{text[-3000:]}")
    return text


def release_key_env(folder: Path) -> dict[str, str]:
    """A new P-256 key pair in ``folder`` and the variables trainer.publish and inference.fetch read it
    from (trainer/signing.py)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / "release.key.pem", folder / "release.pub.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return {"AIPLAT_RELEASE_SIGNING_KEY": f"file:{private}", "AIPLAT_RELEASE_PUBLIC_KEY": str(public)}


def corpus(path: Path, size: int) -> None:
    """``size`` bytes of English text: the repository's own docs, repeated (no download)."""
    text = "\n\n".join(p.read_text() for p in sorted((REPO / "docs").rglob("*.md")))
    path.write_text((text * (size // len(text) + 1))[:size])


def wait_http(url: str, deadline: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"vllm exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"vllm not ready at {url} in time:\n{log.read_text()[-3000:]}")
        time.sleep(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=420, help="time left for this script (after installs)")
    ap.add_argument("--train-steps", type=int, default=40)
    ap.add_argument("--port", type=int, default=8011)
    args = ap.parse_args()
    t0 = time.monotonic()
    end = t0 + args.seconds
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    figures: dict[str, object] = {}

    # 1. Train: bf16 + torch.compile from the gpt2-124m config; 16 x 1024 tokens x 4 micro-batches a step.
    corpus(work / "corpus.txt", 24 << 20)
    sh([py, "-m", "trainer.tools.make_shards", str(work / "corpus.txt"), str(work / "shards"),
        "--shard-tokens", str(8 << 20)], end, work / "shards.log", env)  # fmt: skip
    sets = [
        f"data.source={work / 'shards'}",
        f"data.cache_dir={work / 'cache'}",
        f"checkpoint.uri={work / 'ckpt'}",
        f"train.steps={args.train_steps}",
        f"checkpoint.interval={args.train_steps}",
        "checkpoint.async_save=false",
        "metrics.port_base=0",
        "metrics.log_interval=1",
        "optim.warmup_steps=5",
    ]
    cmd = [py, "-m", "trainer.train", "--config", str(REPO / "trainer/configs/gpt2_124m.toml")]
    for kv in sets:
        cmd += ["--set", kv]
    t = time.monotonic()
    out = sh(cmd, min(end, t + 240), work / "train.log", env)
    train = steady_training(trainer_steps(out), warmup=10)
    figures["train"] = {
        "steps_measured": train.steps,
        "tokens_per_s": train.tokens_per_s,
        "mfu": train.mfu,
        "vs_llmc_460k": train.tokens_per_s / LLMC_TOKENS_PER_S,
        "wall_s": time.monotonic() - t,
    }
    print(f"trainer gpt2-124m bf16 compile: {train.tokens_per_s:,.0f} tokens/s, MFU "
          f"{(train.mfu or 0) * 100:.1f}% ({train.tokens_per_s / LLMC_TOKENS_PER_S:.2f}x llm.c's 460k/s)",
          flush=True)  # fmt: skip

    # 2. Publish (signed with a throwaway local key: the stacks use the KMS key), fetch (verified), serve
    #    with vLLM from the local folder.
    env = {**env, **release_key_env(work / "release-key")}
    sh([py, "-m", "trainer.export_hf", "--checkpoint", str(work / "ckpt"), "--output", str(work / "hf")],
       end, work / "export.log", env)  # fmt: skip
    sh([py, "-m", "trainer.publish", "--from", str(work / "hf"), "--release-root", str(work / "rel"),
        "--model-name", MODEL], end, work / "publish.log", env)  # fmt: skip
    (work / "node").mkdir(exist_ok=True)
    dest = work / "node" / "model"
    fetch = [py, "-m", "inference.fetch", "--root", str(work / "rel"), "--model", MODEL]
    fetched = sh([*fetch, "--version", "latest", "--dest", str(dest)], end, work / "fetch.log", env)
    version = fetched.strip().splitlines()[-1]
    figures["release"] = version
    vlog = work / "vllm.log"
    with open(vlog, "w") as out_f:
        proc = subprocess.Popen(
            [py, "-m", "vllm.entrypoints.openai.api_server", "--model", str(dest),
             "--served-model-name", MODEL, "--dtype", "bfloat16", "--max-model-len", "1024",
             "--port", str(args.port), "--host", "127.0.0.1", "--gpu-memory-utilization", "0.5",
             "--max-num-seqs", "64"],
            cwd=work, env={**env, "HF_HUB_OFFLINE": "1"}, stdout=out_f, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        t = time.monotonic()
        wait_http(f"http://127.0.0.1:{args.port}/v1/models", min(end - 60, t + 180), proc, vlog)
        figures["vllm_start_s"] = time.monotonic() - t
        runs = run_levels("127.0.0.1", args.port, MODEL, levels=(1, 16, 64), max_tokens=128,
                          deadline=end - 5)  # fmt: skip
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    rows = serving_table(runs)
    figures["serving"] = rows
    print(f"vLLM serving {MODEL}/{version} (bf16, 128 output tokens a request, streamed):")
    print(format_rows(rows))
    figures["total_s"] = time.monotonic() - t0
    (work / "figures.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
