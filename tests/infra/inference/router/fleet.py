"""A fleet on 127.0.0.1 for the router's CPU test and bench/router_overhead.py: the real router
(vllm-router, the pinned wheel) between real OpenAI-compatible servers (``transformers serve`` behind the vLLM
pods' gate, backend.py here), each serving a tiny random model of its own (GPT-2 and Llama, built from
configs). The router runs with the command line infra/inference/router/documents.py builds for the
Deployment (``launcher_args``), from the default ``inference.router`` config, and registers the backends
file the ConfigMap would hold (``backends_data``). Free ports, each server waited for until it answers,
every process stopped on exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.inference.router.config import RouterConfig

REPO = Path(__file__).resolve().parents[4]
KEY = "k" * 40
START_TIMEOUT_S = 120.0
PATHS = inf.api_paths(chat=False)  # what the Ingress routes and the gate serves


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, body: dict[str, Any] | None = None, key: str | None = KEY) -> tuple[int, Any]:
    """(status, parsed JSON or text) of a GET (no body) or POST."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def wait_until(pred: Any, what: str, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def make_model(kind: str, out: Path) -> None:
    """A tiny random causal LM with a byte-level tokenizer (256 tokens), saved as a release folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    torch.manual_seed(0 if kind == "gpt2" else 1)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    ids = {"vocab_size": 256, "bos_token_id": 0, "eos_token_id": 0}
    if kind == "gpt2":
        model: Any = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=128, **ids))
    else:
        cfg = LlamaConfig(
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, hidden_size=32,
            intermediate_size=64, max_position_embeddings=128, **ids,
        )  # fmt: skip
        model = LlamaForCausalLM(cfg)
    model.save_pretrained(out)
    PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=alphabet[0], bos_token=alphabet[0]
    ).save_pretrained(out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Fleet:
    router: str
    metrics: str  # the router's Prometheus endpoint
    backends: dict[str, str]  # served name -> direct URL
    procs: dict[str, subprocess.Popen[bytes]]
    spec: rd.RouterSpec


@contextlib.contextmanager
def running_fleet(tmp: Path) -> Iterator[Fleet]:
    """The two backends and the router, started in ``tmp``; stopped when the block ends."""
    keys_file = tmp / "keys.json"
    keys_file.write_text(json.dumps({"api-key": [KEY]}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    backends: list[rd.Backend] = []
    try:
        for kind in ("gpt2", "llama"):
            name = f"tiny-{kind}"
            (tmp / kind).mkdir()
            make_model(kind, tmp / kind / name)
            port = free_port()
            cmd = [
                sys.executable,
                str(Path(__file__).with_name("backend.py")),
                "--models-dir",
                str(tmp / kind),
            ]
            cmd += ["--port", str(port), "--keys-file", str(keys_file), "--paths", ",".join(PATHS)]
            procs[name] = subprocess.Popen(cmd, env=env)
            backends.append(
                rd.Backend(served_name=name, model=name, adapter=False, service="127.0.0.1", port=port)
            )
        for b in backends:
            url = rd.backend_url(b, None)
            wait_until(
                lambda u=url: call(f"{u}/health", key=None)[0] == 200,
                f"{b.served_name}",
                procs[b.served_name],
            )
        spec = rd.router_spec(
            RouterConfig(), backends=backends, request_timeout_s=60, prestop_s=0, pools=["x"]
        )
        backends_file = tmp / rd.BACKENDS_FILE_NAME
        backends_file.write_text(rd.backends_data(spec.backends, None)[rd.BACKENDS_FILE_NAME])
        ready, port, metrics_port = tmp / "ready", free_port(), free_port()
        args = rd.launcher_args(
            spec, backends_file=str(backends_file), ready_file=str(ready), host="127.0.0.1", port=port,
            metrics_port=metrics_port,
        )  # fmt: skip
        renv = {**env, "PYTHONPATH": str(REPO / "images" / "router")}
        procs["router"] = subprocess.Popen([sys.executable, "-m", "aiplat_router.launch", *args], env=renv)
        wait_until(ready.exists, "the router to register its backends", procs["router"])
        yield Fleet(
            router=f"http://127.0.0.1:{port}",
            metrics=f"http://127.0.0.1:{metrics_port}/metrics",
            backends={b.served_name: rd.backend_url(b, None) for b in backends},
            procs=procs,
            spec=spec,
        )
    finally:
        for p in procs.values():
            stop(p)


def completion(base: str, model: str, key: str | None = KEY, max_tokens: int = 6) -> tuple[int, Any]:
    body = {"model": model, "prompt": "hello router", "max_tokens": max_tokens, "temperature": 0}
    return call(f"{base}{inf.COMPLETIONS_PATH}", body, key=key)
