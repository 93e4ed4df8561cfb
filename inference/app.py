"""The HTTP API (FastAPI): generation, probes, metrics.

- ``POST /v1/generate`` with JSON ``{"prompt": str, "max_new_tokens": int, "temperature": float,
  "top_k": int}`` (only ``prompt`` is required; ``temperature`` 0 is greedy, ``top_k`` 0 means all tokens)
  answers ``{"text", "model_name", "model_version", "prompt_tokens", "generated_tokens", "finish_reason"}``.
  Errors are ``{"error": "<one line>"}``: 422 for a bad body or a request the limits or the model's context
  cannot hold, 413 for a body over the size limit, 503 (with ``Retry-After``) when no model is loaded, the
  queue is full or the server is draining, 504 when the generation did not finish within the request
  timeout, 500 when the model failed.
- ``GET /healthz``: 200 while the process answers HTTP (liveness; it never looks at the model, so a
  missing release can never get the pod restarted in a loop).
- ``GET /readyz``: 200 when a verified model is loaded and the server is not draining, else 503 with the
  reason (readiness: traffic goes only to replicas that can generate).
- ``GET /v1/model``: what is being served (version, step, run, source checkpoint, manifest metrics).
- ``GET /metrics``: Prometheus text (inference/metrics.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from inference.batcher import Batcher, Job, Unavailable
from inference.config import ServerConfig
from inference.metrics import Metrics
from inference.store import ModelStore

GENERATE = "/v1/generate"
MAX_TEMPERATURE = 100.0


class GenerateRequest(BaseModel):
    """Body of ``POST /v1/generate``; unknown fields and wrong types are refused (no silent coercion)."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(strict=True, description="Text to continue (UTF-8); may be empty")
    max_new_tokens: int | None = Field(
        default=None, strict=True, ge=1, description="Tokens to generate at most"
    )
    temperature: float = Field(default=1.0, strict=True, ge=0.0, le=MAX_TEMPERATURE, description="0 = greedy")
    top_k: int = Field(
        default=0, strict=True, ge=0, description="Sample among the k most likely tokens; 0 = all"
    )


@dataclass
class Service:
    """Everything one server process holds: settings, metrics, the model store and the batcher."""

    cfg: ServerConfig
    metrics: Metrics = field(default_factory=Metrics)
    store: ModelStore = field(init=False)
    batcher: Batcher = field(init=False)
    draining: bool = False

    def __post_init__(self) -> None:
        self.store = ModelStore(self.cfg, self.metrics)
        self.batcher = Batcher(lambda: self.store.current, self.cfg, self.metrics)
        self.metrics.ready.set_function(lambda: 1.0 if self.ready else 0.0)

    @property
    def ready(self) -> bool:
        """A verified model is loaded and the server is not draining."""
        return self.store.current is not None and not self.draining

    def not_ready_reason(self) -> str:
        """Why :attr:`ready` is false."""
        if self.draining:
            return "draining: the server is shutting down"
        return f"no verified model loaded: {self.store.problem}"


def error(status: int, message: str, **headers: str) -> JSONResponse:
    """The one error shape: ``{"error": "<one line>"}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def _validation_message(exc: RequestValidationError) -> str:
    """pydantic's errors as one line: ``field: problem; field: problem``."""
    parts = []
    for e in exc.errors():
        loc = tuple(e.get("loc", ()))
        if e.get("type") == "json_invalid":
            at = f" at character {loc[-1]}" if len(loc) > 1 else ""
            parts.append(f"body is not valid JSON{at}: {(e.get('ctx') or {}).get('error', e.get('msg'))}")
        elif loc == ("body",) and e.get("type") in ("model_attributes_type", "dict_type", "missing"):
            parts.append("body must be a JSON object, sent with Content-Type: application/json")
        else:
            field = ".".join(str(p) for p in loc if p != "body") or "body"
            parts.append(f"{field}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


class GenerateAccounting:
    """ASGI middleware for ``POST /v1/generate``: refuses bodies over the size limit before they are read
    (413, by ``Content-Length``) and counts every answer by status in ``inference_requests_total``, those
    refused by validation included."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service
        # The prompt limit in bytes; JSON escaping can make a body up to ~6x its text, plus the other fields.
        self.max_body = 6 * service.cfg.max_prompt_bytes + 1024

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != GENERATE:
            await self.app(scope, receive, send)
            return
        counter = self.service.metrics.requests
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            counter.labels("413").inc()
            msg = f"request body of {int(length)} bytes is over the {self.max_body}-byte limit"
            await error(413, msg)(scope, receive, send)
            return

        async def counting_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                counter.labels(str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)


def create_app(service: Service) -> FastAPI:
    """The FastAPI application for ``service``; its lifespan starts and stops the poller and the batcher."""
    cfg, metrics, store, batcher = service.cfg, service.metrics, service.store, service.batcher

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        store.start()
        batcher.start()
        try:
            yield
        finally:  # runs after uvicorn has drained the connections (or given up after the grace period)
            batcher.stop()
            store.stop()

    app = FastAPI(title="aiplat inference", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(GenerateAccounting, service=service)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, _validation_message(exc))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        cur = store.current
        if service.ready and cur is not None:
            return JSONResponse(
                {"ready": True, "model_name": cur.release.model_name, "model_version": cur.version}
            )
        return JSONResponse({"ready": False, "reason": service.not_ready_reason()}, status_code=503)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/model")
    async def model_info() -> JSONResponse:
        cur = store.current
        if cur is None:
            return error(503, service.not_ready_reason(), **{"Retry-After": "5"})
        rel = cur.release
        return JSONResponse(
            {
                "model_name": rel.model_name,
                "model_version": rel.version,
                "step": rel.step,
                "run_id": rel.source.run_id,
                "checkpoint_uri": rel.source.checkpoint_uri,
                "release_uri": rel.uri,
                "created_utc": rel.created_utc,
                "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(cur.loaded_at)),
                "device": str(cur.device),
                "context_tokens": cur.context,
                "metrics": rel.metrics,
                "last_problem": store.problem or None,  # e.g. why a newer release is not served
            }
        )

    @app.post(GENERATE)
    async def generate(body: GenerateRequest) -> JSONResponse:
        t0 = time.monotonic()
        cur = store.current
        if cur is None:  # while draining, requests are still served: the load balancer may still send some
            return error(503, service.not_ready_reason(), **{"Retry-After": "5"})
        prompt_bytes = len(body.prompt.encode("utf-8"))
        if prompt_bytes > cfg.max_prompt_bytes:
            return error(
                422, f"prompt: {prompt_bytes} UTF-8 bytes is over the limit of {cfg.max_prompt_bytes}"
            )
        tokens = cur.tokenizer.encode(body.prompt)
        if body.max_new_tokens is None:  # the default, as far as the context allows
            max_new = max(1, min(cfg.default_max_new_tokens, cur.context - len(tokens)))
        else:
            max_new = body.max_new_tokens
        if max_new > cfg.max_new_tokens:
            return error(
                422, f"max_new_tokens: {max_new} is over this server's limit of {cfg.max_new_tokens}"
            )
        if len(tokens) + max_new > cur.context:
            return error(
                422,
                f"prompt ({len(tokens)} tokens with the start token) + max_new_tokens ({max_new}) is over "
                f"the model's context of {cur.context} tokens; shorten the prompt or lower max_new_tokens",
            )
        job = Job(tokens, max_new, body.temperature, body.top_k)
        metrics.in_flight.inc()
        try:
            batcher.submit(job)
            result = await asyncio.wait_for(asyncio.wrap_future(job.future), cfg.request_timeout_s)
        except Unavailable as exc:
            return error(503, str(exc), **{"Retry-After": "1"})
        except TimeoutError:
            job.future.cancel()  # the batcher drops the row at its next step
            return error(504, f"generation did not finish within {cfg.request_timeout_s:g}s")
        except ValueError as exc:  # the model swapped in meanwhile has a shorter context
            return error(422, str(exc))
        except RuntimeError as exc:
            return error(500, str(exc))
        finally:
            metrics.in_flight.dec()
        metrics.latency.observe(time.monotonic() - t0)
        rel = result.model.release
        return JSONResponse(
            {
                "text": result.model.tokenizer.decode(result.tokens),
                "model_name": rel.model_name,
                "model_version": rel.version,
                "prompt_tokens": len(tokens),
                "generated_tokens": len(result.tokens),
                "finish_reason": result.finish_reason,
            }
        )

    return app
