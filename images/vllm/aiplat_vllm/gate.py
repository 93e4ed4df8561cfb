"""The gate in front of vLLM's OpenAI server: every request but ``/health`` and ``/metrics`` needs an API key,
and only the paths the Ingress routes are served at all.

vLLM 0.33.0 checks ``--api-key`` only under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``
(vllm/entrypoints/serve/middleware/authenticate.py ``GUARDED_PREFIX``); ``/invocations`` (the same inference
as ``/v1``), ``/tokenize``, ``/detokenize`` and others answer anyone who reaches the pod's port. This ASGI
middleware is loaded with ``vllm serve --middleware aiplat_vllm.gate.GateMiddleware``: vLLM adds a class with
``app.add_middleware(cls)`` after its own (vllm/entrypoints/serve/middleware/register.py), so it wraps them
and sees every request first.

- ``/health`` (kubelet probes, the ALB's health checks) and ``/metrics`` (Prometheus; the NetworkPolicy
  admits only the ALB's subnets and Prometheus's pods, and the ALB routes neither) pass without a key;
- the paths in ``AIPLAT_GATE_PATHS`` (comma-separated: the OpenAI paths the Ingress routes) pass with
  ``Authorization: Bearer <key>`` for a key of the file ``AIPLAT_GATE_KEYS_FILE`` (vLLM's ``--config`` file,
  JSON or YAML with the ``api-key`` list; read once at start), else 401;
- every other path is 404, with or without a key.

Standard library only (the image's Python runs it); keys are compared as SHA-256 digests in constant time,
as vLLM's own middleware does.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

OPEN_PATHS = frozenset({"/health", "/metrics"})
KEYS_FILE_ENV = "AIPLAT_GATE_KEYS_FILE"
PATHS_ENV = "AIPLAT_GATE_PATHS"
KEYS_FIELD = "api-key"  # vLLM's option name in its --config file

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def read_keys(path: str) -> list[str]:
    """The API keys of vLLM's ``--config`` file at ``path`` (``api-key``: a list). JSON is read without a
    YAML parser; a YAML file needs PyYAML (a dependency of vLLM)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError:
        import yaml  # vLLM requires PyYAML

        doc = yaml.safe_load(text)
    keys = doc.get(KEYS_FIELD) if isinstance(doc, dict) else None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"{path}: no {KEYS_FIELD!r} list of keys")
    return keys


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


class GateMiddleware:
    """Pure ASGI middleware; ``keys`` and ``paths`` default to the files and variables above (vLLM
    constructs it with the app alone)."""

    def __init__(self, app: App, keys: Iterable[str] | None = None, paths: Iterable[str] | None = None):
        self.app = app
        if keys is None:
            keys = read_keys(os.environ[KEYS_FILE_ENV])
        if paths is None:
            paths = os.environ.get(PATHS_ENV, "").split(",")
        self.digests = [_digest(k) for k in keys]
        if not self.digests:
            raise ValueError("the gate needs at least one API key")
        self.paths = frozenset(p for p in paths if p)

    def authorized(self, scope: Scope) -> bool:
        header = b""
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                header = value
                break
        scheme, _, token = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        presented = _digest(token)
        match = False
        for digest in self.digests:  # no early exit: the time does not tell which key matched
            match |= secrets.compare_digest(presented, digest)
        return match

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        path = scope.get("path", "")
        if path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if path in self.paths and self.authorized(scope):
            await self.app(scope, receive, send)
            return
        status = 401 if path in self.paths else 404
        await _refuse(scope, send, status)


async def _refuse(scope: Scope, send: Send, status: int) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"error": "Unauthorized" if status == 401 else "Not Found"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
