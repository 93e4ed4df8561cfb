"""Part 3 of the GPU check: a Llama-family release and one LoRA adapter served by one vLLM, measured with
``vllm bench serve`` at 1, 16 and 64 concurrent requests, straight to vLLM and through the model-name
router (``vllm-router``), each model on each path: output tokens/s and p99 time to first token, and the
router's ratios to the direct path.

    python bench/gpu/serve_models.py --work DIR [--seconds 480] [--dry-run]

1. A ``LlamaForCausalLM`` built from a config with random weights (seed 0; bfloat16, the byte tokenizer of
   trainer/export/gpt2.py) is saved with ``save_pretrained``, published as a release by our publisher
   (``python -m trainer.release.publish``, a throwaway signing key) and fetched, verified
   (``python -m inference.fetch``): the path a team's Llama takes, not a GPT-2.
2. One LoRA adapter on it (peft ``LoraConfig`` r=8 on q_proj/v_proj, ``init_lora_weights=False`` so it
   changes the outputs), saved with ``save_pretrained`` beside it.
3. ``vllm serve <release> --enable-lora --lora-modules <adapter>=<folder> --max-lora-rank 8``
   (https://docs.vllm.ai/en/latest/features/lora.html), then ``vllm-router --worker-urls <vllm>`` (the
   binary of the vllm-router wheel, vllm-project/router: it learns the models from the worker's
   ``/v1/models``), then the benchmark: base and adapter, direct and through the router.

What it needs on a machine without network, each part skipped with one line when it is missing: vLLM (the
pinned wheel is ~400 MB, so it must be preinstalled: ``run.sh`` checks it) for everything; peft for the
adapter (pure Python, <1 MiB: carry its wheel in ``$WHEELS``); ``vllm-router`` for the router path (the
vllm-router wheel, a Rust extension of ~60 MiB installed: carry the wheel in ``$WHEELS`` if it fits the
64 MiB a device call carries, else have it preinstalled or on PATH). ``run.sh`` installs what
``$WHEELS`` holds with ``pip --no-index --find-links``.

``--dry-run`` (CPU, no vLLM): steps 1 and 2 with a tiny config, the adapter checked to change greedy tokens
through peft, and the command lines it would run (the router's flags checked against ``vllm-router --help``
when the binary is there); one JSON object either way.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.gpu.serve_bench import LEVELS, bench_cmd, release_key_env, sh, vllm_cli, wait_http  # noqa: E402
from bench.gpu.stats import serving_rows  # noqa: E402

BASE, ADAPTER = "llama-bench", "llama-bench-lora"
RANK = 8
# A Llama-shaped model big enough that the GPU, not Python, bounds it (~0.4 B parameters), and a tiny one
# for the CPU dry run. The byte tokenizer has 257 ids; the embedding is padded to a multiple of 64.
GPU_SHAPE = {"hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 16,
             "num_attention_heads": 12, "num_key_value_heads": 4, "vocab_size": 320,
             "max_position_embeddings": 2048}  # fmt: skip
CPU_SHAPE = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 320, "max_position_embeddings": 512}  # fmt: skip
ROUTER_FLAGS = ("--host", "--port", "--worker-urls", "--policy")


def build_model(folder: Path, shape: dict[str, int], dtype: str) -> Any:
    """A random-weight Llama saved as a Hugging Face folder with the byte tokenizer; the model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer.export.gpt2 import ByteVocab, tokenizer_json

    torch.manual_seed(0)
    cfg = LlamaConfig(**shape, bos_token_id=256, eos_token_id=256, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(ByteVocab())))
    tok = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|endoftext|>",
        "bos_token": "<|endoftext|>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tok))
    return model


def build_adapter(model: Any, folder: Path) -> dict[str, Any]:
    """A random LoRA adapter (peft) on ``model`` saved in ``folder``; greedy tokens with and without it."""
    import torch
    from peft import LoraConfig, get_peft_model

    prompt = torch.tensor([[256, 72, 101, 108, 108, 111]])
    with torch.no_grad():
        plain = model.generate(prompt, max_new_tokens=8, do_sample=False).tolist()[0][6:]
    cfg = LoraConfig(
        r=RANK, lora_alpha=2 * RANK, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    torch.manual_seed(1)
    peft_model = get_peft_model(model, cfg)
    with torch.no_grad():
        adapted = peft_model.generate(input_ids=prompt, max_new_tokens=8, do_sample=False).tolist()[0][6:]
    peft_model.save_pretrained(folder)
    return {"rank": RANK, "greedy_base": plain, "greedy_adapter": adapted}


def router_binary() -> str | None:
    """``vllm-router`` beside this Python (its wheel's script) or on PATH."""
    beside = Path(sys.executable).with_name("vllm-router")
    return str(beside) if beside.exists() else shutil.which("vllm-router")


def serve_cmd(vllm: str, release: Path, adapter: Path | None, port: int) -> list[str]:
    cmd = [vllm, "serve", str(release), "--served-model-name", BASE, "--dtype", "bfloat16",
           "--max-model-len", "1024", "--port", str(port), "--host", "127.0.0.1",
           "--gpu-memory-utilization", "0.6", "--max-num-seqs", str(max(LEVELS))]  # fmt: skip
    if adapter is not None:
        cmd += ["--enable-lora", "--lora-modules", f"{ADAPTER}={adapter}", "--max-lora-rank", str(RANK),
                "--max-loras", "1"]  # fmt: skip
    return cmd


def router_cmd(router: str, port: int, worker_port: int) -> list[str]:
    return [router, "--host", "127.0.0.1", "--port", str(port),
            "--worker-urls", f"http://127.0.0.1:{worker_port}", "--policy", "round_robin"]  # fmt: skip


def start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per (path, model): tokens/s and p99 TTFT by concurrency; the router's ratios to direct."""
    rows = {key: serving_rows(r) for key, r in results.items()}
    out: dict[str, Any] = {
        key: {str(r["max_concurrency"]): {"output_tok_s": r["output_throughput"],
                                          "p99_ttft_ms": r["p99_ttft_ms"]} for r in rs}
        for key, rs in rows.items()
    }  # fmt: skip
    for key in [k for k in rows if k.startswith("router/")]:
        direct = out.get(key.replace("router/", "direct/", 1))
        if direct:
            out[f"{key} vs direct"] = {
                c: {"tok_s_ratio": v["output_tok_s"] / direct[c]["output_tok_s"],
                    "p99_ttft_ratio": v["p99_ttft_ms"] / direct[c]["p99_ttft_ms"]}
                for c, v in out[key].items()
            }  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=480, help="time for this part")
    ap.add_argument("--port", type=int, default=8021)
    ap.add_argument("--router-port", type=int, default=8031)
    ap.add_argument("--vllm-version", help="the pin (run.sh VLLM_VERSION); checked unless --dry-run")
    ap.add_argument("--dry-run", action="store_true", help="CPU: build, publish, fetch, print the commands")
    args = ap.parse_args()
    if not args.dry_run:
        have = importlib.metadata.version("vllm")
        if have != args.vllm_version:
            raise SystemExit(f"vllm {have} is installed, the check pins {args.vllm_version}: install it")
    t0 = time.monotonic()
    end = t0 + args.seconds
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(REPO), **release_key_env(work / "release-key")}
    figures: dict[str, Any] = {"check": "models", "mode": "dry-run" if args.dry_run else "gpu"}

    model = build_model(
        work / "hf", CPU_SHAPE if args.dry_run else GPU_SHAPE, "float32" if args.dry_run else "bfloat16"
    )
    figures["parameters"] = sum(p.numel() for p in model.parameters())
    sh([py, "-m", "trainer.release.publish", "--from", str(work / "hf"), "--release-root", str(work / "rel"),
        "--model-name", BASE], end, work / "publish.log", env)  # fmt: skip
    release = work / "node" / BASE
    release.parent.mkdir(exist_ok=True)
    fetched = sh([py, "-m", "inference.fetch", "--root", str(work / "rel"), "--model", BASE, "--version",
                  "latest", "--dest", str(release)], end, work / "fetch.log", env)  # fmt: skip
    figures["release"] = fetched.strip().splitlines()[-1]

    adapter: Path | None = work / "node" / ADAPTER
    if importlib.util.find_spec("peft") is None:
        print("adapter skipped: peft is not installed (put its wheel in $WHEELS; pure Python, <1 MiB)")
        adapter = None
    else:
        assert adapter is not None
        figures["adapter"] = build_adapter(model.float(), adapter)
    del model
    router = router_binary()
    if router is None:
        print("router skipped: no vllm-router binary (put the vllm-router wheel in $WHEELS, or on PATH)")

    vllm = "vllm" if args.dry_run else vllm_cli()
    paths = {"direct": args.port, **({"router": args.router_port} if router else {})}
    models = [BASE, *([ADAPTER] if adapter is not None else [])]
    commands = {"serve": serve_cmd(vllm, release, adapter, args.port)}
    if router:
        commands["router"] = router_cmd(router, args.router_port, args.port)
    if args.dry_run:
        if router:
            helptext = subprocess.run([router, "--help"], capture_output=True, text=True, timeout=60).stdout
            figures["router_flags_known"] = all(f in helptext for f in ROUTER_FLAGS)
        figures["commands"] = {k: " ".join(v) for k, v in commands.items()}
        print(json.dumps(figures))
        return 0

    serve_env = {**env, "HF_HUB_OFFLINE": "1"}
    procs = [start(commands["serve"], work / "vllm.log", serve_env)]
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        t = time.monotonic()
        wait_http(
            f"http://127.0.0.1:{args.port}/v1/models", min(end - 60, t + 300), procs[0], work / "vllm.log"
        )
        figures["vllm_start_s"] = time.monotonic() - t
        if router:
            procs.append(start(commands["router"], work / "router.log", serve_env))
            wait_http(f"http://127.0.0.1:{args.router_port}/v1/models", min(end - 60, time.monotonic() + 60),
                      procs[1], work / "router.log")  # fmt: skip
        for path, port in paths.items():
            for name in models:
                key = f"{path}/{name}"
                results[key] = []
                for c in LEVELS:
                    prefix = f"{path}-{name}-"
                    cmd = bench_cmd(vllm, port, release, c, work / "bench", model=name, prefix=prefix)
                    sh(cmd, end, work / f"bench-{prefix}c{c}.log", serve_env)
                    results[key].append(json.loads((work / "bench" / f"{prefix}c{c}.json").read_text()))
    finally:
        for proc in reversed(procs):
            stop(proc)
    figures["serving"] = summary(results)
    figures["total_s"] = time.monotonic() - t0
    (work / "models.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
