"""A real OpenAI-compatible backend for the router's CPU test: ``transformers serve`` (transformers[serving])
on one local model folder, wrapped in the gate the vLLM pods run (images/vllm/aiplat_vllm/gate.py), so a
request without one of the keys gets 401 as it would from vLLM.

    python backend.py --models-dir DIR --port N --keys-file FILE --paths /v1/completions,/v1/models

``transformers serve`` loads the model a request names; run from ``--models-dir`` (which holds only this
backend's model folder) with the hub offline, it can load that model and no other.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "images" / "vllm"))

from aiplat_vllm.gate import GateMiddleware, read_keys  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models-dir", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--keys-file", required=True)
    p.add_argument("--paths", required=True)
    a = p.parse_args()
    os.chdir(a.models_dir)
    keys, paths = read_keys(a.keys_file), a.paths.split(",")

    from transformers.cli.serving import server
    from transformers.cli.serving.completion import CompletionHandler

    # vllm-router 0.1.17 adds its engine's sampling fields to every completion (skip_special_tokens,
    # no_stop_trim, ignore_eos, return_hidden_states); vLLM's request model ignores fields it does not know
    # (vllm/entrypoints/openai/protocol.py OpenAIBaseModel logs and drops them), transformers serve refuses
    # them with 422 unless its handler's field check is off.
    CompletionHandler._valid_params_class = None

    build = server.build_server
    # transformers.cli.serve.Serve imports build_server when it starts: the gate wraps what it builds
    server.build_server = lambda *args, **kw: GateMiddleware(build(*args, **kw), keys=keys, paths=paths)
    from transformers.cli.serve import Serve

    Serve(host="127.0.0.1", port=a.port, device="cpu", log_level="warning")


if __name__ == "__main__":
    main()
