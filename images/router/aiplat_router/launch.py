"""Start vllm-router in its multi-model mode and register the backends the platform declared.

vllm-router 0.1.17 routes by the request's ``model`` only with ``--enable-igw``, and in that mode it ignores
``--worker-urls``: workers join through its ``POST /workers`` API, each with the ``model_id`` it serves
(vllm-project/router README "Multi-model"; sgl-model-gateway, which it forks, the same). This launcher is
the one place that happens: it starts the router as a child process with the arguments it was given, waits
until the router answers ``/liveness``, posts every backend of the ``--backends`` file (a JSON list of
``{"model_id": ..., "url": ...}``, written by infra/inference/router/documents.py) with its model id, then
writes ``--ready-file`` (the readiness probe) and waits on the router, passing SIGTERM on. A router that
restarts restarts the container, so a router never runs without its backends.

    python -m aiplat_router.launch --backends FILE --ready-file FILE -- <vllm-router arguments>

Standard library only, besides the router it starts (PyPI vllm-router, the image's one library).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

# How long the router may take to bind its port (a Rust binary: well under a second when healthy).
START_TIMEOUT_S = 60.0
POLL_S = 0.1


def read_backends(path: str) -> list[dict[str, str]]:
    """The backends file: a non-empty JSON list of objects with a ``model_id`` and an ``http://`` ``url``."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    ok = isinstance(doc, list) and doc
    ok = ok and all(
        isinstance(b, dict)
        and isinstance(b.get("model_id"), str)
        and str(b.get("url", "")).startswith("http")
        for b in doc
    )
    if not ok:
        raise ValueError(f"{path}: not a list of {{'model_id': ..., 'url': 'http://...'}} objects")
    return doc


def router_port(args: Sequence[str]) -> int:
    """The ``--port`` among the router's arguments (the router's own default, 30000, when absent)."""
    for i, a in enumerate(args):
        if a == "--port" and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith("--port="):
            return int(a.split("=", 1)[1])
    return 30000


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def wait_alive(base: str, child: subprocess.Popen[bytes], timeout_s: float = START_TIMEOUT_S) -> None:
    """Until the router answers ``/liveness`` 200; raises when it exits first or the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"vllm-router exited with {child.returncode} before it answered")
        if _get(f"{base}/liveness") == 200:
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"vllm-router did not answer {base}/liveness within {timeout_s:.0f} s")


def register(base: str, backend: dict[str, str]) -> None:
    """``POST /workers`` with the backend's URL and model id; raises unless the router accepts it."""
    body = json.dumps({"url": backend["url"], "model_id": backend["model_id"]}).encode()
    req = urllib.request.Request(
        f"{base}/workers", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            answer = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"vllm-router refused {backend}: {e.code} {e.read()[:300]!r}") from None
    if not answer.get("success", False):
        raise RuntimeError(f"vllm-router refused {backend}: {answer}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, router_args = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    p = argparse.ArgumentParser(prog="aiplat_router.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", required=True, help="JSON list of {model_id, url}")
    p.add_argument("--ready-file", required=True, help="written once every backend is registered")
    opts = p.parse_args(ours)
    backends = read_backends(opts.backends)
    base = f"http://127.0.0.1:{router_port(router_args)}"
    Path(opts.ready_file).unlink(missing_ok=True)
    child = subprocess.Popen([sys.executable, "-m", "vllm_router.launch_router", *router_args])

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        wait_alive(base, child)
        for b in backends:
            register(base, b)
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"aiplat_router: {exc}", file=sys.stderr, flush=True)
        if child.poll() is None:
            child.terminate()
            child.wait()
        return 1
    Path(opts.ready_file).write_text("ready\n", encoding="utf-8")
    print(f"aiplat_router: registered {[b['model_id'] for b in backends]}", file=sys.stderr, flush=True)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
