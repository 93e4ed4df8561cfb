"""Part 2 of the GPU check: vLLM serving a release of the trainer's gpt2-124m, measured with vLLM's own
benchmark client, ``vllm bench serve``, at 1, 16 and 64 concurrent requests (figures that compare with the
ones vLLM and others publish). Needs vLLM; bench/gpu/run.sh installs the pinned version where a package index
answers, and skips this part with one line where none does.

    python bench/gpu/serve_bench.py --checkpoint DIR --work DIR --vllm-version 0.33.0

1. The checkpoint part 1 kept (``train_bench.py --checkpoint DIR``) is exported as a Hugging Face folder
   (``python -m trainer.export.hf``), published as a release signed with a throwaway key
   (``python -m trainer.release.publish --from``) and fetched, verified, into a folder
   (``python -m inference.fetch``).
2. ``vllm serve <folder>`` (bf16, no hub) on 127.0.0.1.
3. ``vllm bench serve`` once per concurrency (``--max-concurrency``, all requests sent at once, random prompts
   of 128 tokens, 128 output tokens each with ``--ignore-eos``), each saving its result JSON; the table gives
   output tokens/s, TTFT, TPOT and ITL percentiles, and ratios to the single-client run.

The options are those of vLLM 0.33.0 (vllm/benchmarks/serve.py ``add_cli_args`` and
vllm/benchmarks/datasets/datasets.py, read from the PyPI wheel vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64).
Figures go to stdout as one JSON object, and to ``$WORK/serving.json``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
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

from bench.gpu.stats import format_rows, serving_rows  # noqa: E402

MODEL = "gpt2-bench"
LEVELS = (1, 16, 64)
INPUT_LEN = OUTPUT_LEN = 128


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
    """A new P-256 key pair in ``folder`` and the variables trainer.release.publish and inference.fetch read
    it
    from (trainer/release/signing.py)."""
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


def wait_http(url: str, deadline: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url`` until it answers 200, ``proc`` exits, or ``deadline`` passes."""
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"vllm serve not ready at {url} in time:\n{log.read_text()[-3000:]}")
        time.sleep(1)


def vllm_cli() -> str:
    """The ``vllm`` command of the Python running this (its console script)."""
    exe = Path(sys.executable).with_name("vllm")
    if not exe.exists():
        raise SystemExit(f"no vllm command beside {sys.executable}: install vllm into that environment")
    return str(exe)


def bench_cmd(
    vllm: str, port: int, tokenizer: Path, concurrency: int, result_dir: Path, *, model: str = MODEL,
    prefix: str = "",
) -> list[str]:  # fmt: skip
    """``vllm bench serve`` of ``model`` for one concurrency, saving its result JSON as
    ``<prefix>c<concurrency>.json``."""
    return [
        vllm, "bench", "serve",
        "--backend", "vllm",
        "--base-url", f"http://127.0.0.1:{port}",
        "--model", model,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(INPUT_LEN),
        "--random-output-len", str(OUTPUT_LEN),
        "--ignore-eos",
        "--num-prompts", str(max(32, 4 * concurrency)),
        "--max-concurrency", str(concurrency),
        "--request-rate", "inf",
        "--num-warmups", "4",
        "--percentile-metrics", "ttft,tpot,itl",
        "--metric-percentiles", "50,99",
        "--disable-tqdm",
        "--save-result",
        "--result-dir", str(result_dir),
        "--result-filename", f"{prefix}c{concurrency}.json",
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True, help="train_bench.py --checkpoint's folder")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--vllm-version", required=True, help="the pin (bench/gpu/run.sh VLLM_VERSION)")
    ap.add_argument("--seconds", type=float, default=600, help="time for this part")
    ap.add_argument("--port", type=int, default=8011)
    args = ap.parse_args()
    have = importlib.metadata.version("vllm")
    if have != args.vllm_version:
        raise SystemExit(f"vllm {have} is installed, the check pins {args.vllm_version}: install that one")
    t0 = time.monotonic()
    end = t0 + args.seconds
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    vllm = vllm_cli()
    env = {**os.environ, "PYTHONPATH": str(REPO), **release_key_env(work / "release-key")}

    sh([py, "-m", "trainer.export.hf", "--checkpoint", str(args.checkpoint), "--output", str(work / "hf")],
       end, work / "export.log", env)  # fmt: skip
    sh([py, "-m", "trainer.release.publish", "--from", str(work / "hf"), "--release-root", str(work / "rel"),
        "--model-name", MODEL], end, work / "publish.log", env)  # fmt: skip
    (work / "node").mkdir(exist_ok=True)
    dest = work / "node" / "model"
    fetch = [py, "-m", "inference.fetch", "--root", str(work / "rel"), "--model", MODEL]
    fetched = sh([*fetch, "--version", "latest", "--dest", str(dest)], end, work / "fetch.log", env)
    figures: dict[str, object] = {
        "check": "serving",
        "vllm": have,
        "release": fetched.strip().splitlines()[-1],
    }

    vlog = work / "vllm.log"
    with open(vlog, "w") as out_f:
        proc = subprocess.Popen(
            [vllm, "serve", str(dest), "--served-model-name", MODEL, "--dtype", "bfloat16",
             "--max-model-len", "1024", "--port", str(args.port), "--host", "127.0.0.1",
             "--gpu-memory-utilization", "0.5", "--max-num-seqs", str(max(LEVELS))],
            cwd=work, env={**env, "HF_HUB_OFFLINE": "1"}, stdout=out_f, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        t = time.monotonic()
        wait_http(f"http://127.0.0.1:{args.port}/v1/models", min(end - 60, t + 300), proc, vlog)
        figures["vllm_start_s"] = time.monotonic() - t
        results = []
        for c in LEVELS:
            cmd = bench_cmd(vllm, args.port, dest, c, work / "bench")
            sh(cmd, end, work / f"bench-c{c}.log", {**env, "HF_HUB_OFFLINE": "1"})
            results.append(json.loads((work / "bench" / f"c{c}.json").read_text()))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    rows = serving_rows(results)
    figures["serving"] = rows
    figures["total_s"] = time.monotonic() - t0
    print(f"vLLM {have} serving {MODEL} (bf16; {INPUT_LEN} prompt, {OUTPUT_LEN} output tokens a request):")
    print(format_rows(rows))
    (work / "serving.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
