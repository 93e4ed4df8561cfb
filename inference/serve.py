"""The inference server: ``python -m inference.serve`` (settings from ``INFERENCE_*`` environment variables).

Serves the newest valid release of one model from ``<INFERENCE_RELEASE_ROOT>/release/<model>/`` (the
format trainer/release.py writes), picks up newer releases without a restart and batches concurrent
requests on one GPU (or CPU), on one HTTP port (``INFERENCE_HTTP_PORT``, 8080) for API, probes and metrics.
Settings, endpoints, probes and graceful shutdown: docs/inference/server.md (defaults and checks in
inference/config.py). Exit codes: 0 after a graceful shutdown, 2 configuration error, 3 cannot start
(uvicorn's ``STARTUP_FAILURE``); a bad release or store never ends the process.

Settings (kept here for ``--help``):
  INFERENCE_RELEASE_ROOT (required)  s3://bucket[/prefix] or a directory; the region's replica bucket
  INFERENCE_MODEL_NAME (required)    the --model-name the release was published under
  INFERENCE_PIN_VERSION              serve exactly this version (rollback); empty = newest valid
  INFERENCE_HOST / INFERENCE_HTTP_PORT   listen address, default 0.0.0.0:8080
  INFERENCE_CACHE_DIR                writable directory for downloaded releases (default /var/cache/inference)
  INFERENCE_POLL_INTERVAL_S          seconds between looks for a newer release (default 30)
  INFERENCE_DEVICE / INFERENCE_DTYPE auto|cpu|cuda / auto|float32|bfloat16|float16
  INFERENCE_MAX_BATCH / INFERENCE_MAX_WAIT_MS / INFERENCE_MAX_QUEUE   batching and back-pressure
  INFERENCE_MAX_PROMPT_BYTES / INFERENCE_MAX_NEW_TOKENS / INFERENCE_DEFAULT_MAX_NEW_TOKENS   request limits
  INFERENCE_REQUEST_TIMEOUT_S        a generation not done by then gets 504 (default 60)
  INFERENCE_DRAIN_DELAY_S / INFERENCE_GRACEFUL_SHUTDOWN_S   shutdown (defaults 0 and 30)
  INFERENCE_TORCH_THREADS, INFERENCE_LOG_LEVEL, INFERENCE_ACCESS_LOG
  AWS_REGION, AWS_ENDPOINT_URL and the usual AWS credential chain (IRSA / Pod Identity) for S3.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

import torch
import uvicorn

from inference.app import Service, create_app
from inference.config import ConfigError, ServerConfig

log = logging.getLogger("inference.serve")
EXIT_OK = 0
EXIT_CONFIG = 2
EXIT_START = 3  # uvicorn's STARTUP_FAILURE (uvicorn/server.py)


class DrainingServer(uvicorn.Server):
    """uvicorn's server with a drain delay: on the first SIGTERM/SIGINT readiness turns false, and only
    ``drain_delay_s`` later does uvicorn's own graceful shutdown start (stop accepting, wait for in-flight
    requests up to ``timeout_graceful_shutdown``, then the app's lifespan shutdown)."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service
        self._timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Signal handler (uvicorn installs it for SIGINT and SIGTERM while serving)."""
        delay = self.service.cfg.drain_delay_s
        first = not self.service.draining
        self.service.draining = True
        if first:
            log.info(
                "%s: not ready any more; in flight: %d; stopping to accept connections in %gs, then "
                "waiting up to %gs for in-flight requests",
                signal.Signals(sig).name,
                int(self.service.metrics.registry.get_sample_value("inference_requests_in_flight") or 0),
                delay,
                self.service.cfg.graceful_shutdown_s,
            )
        if first and delay > 0:
            self._timer = threading.Timer(delay, super().handle_exit, args=(sig, None))
            self._timer.daemon = True
            self._timer.start()
            return
        if self._timer is not None:
            self._timer.cancel()
        super().handle_exit(sig, frame)


def _after_shutdown(sig: int, frame: FrameType | None) -> None:
    """uvicorn restores the handlers that were in place before it started and then raises the signal it
    handled again (uvicorn/server.py ``capture_signals``); with Python's defaults that would kill the
    process by SIGTERM (exit 143) or raise KeyboardInterrupt after a clean drain. This handler makes it a
    no-op, so a drained server exits 0."""


def main(argv: list[str] | None = None) -> int:
    """Read the settings, then serve until SIGTERM; see the module docstring."""
    ap = argparse.ArgumentParser(
        prog="inference.serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.parse_args(argv)
    try:
        cfg = ServerConfig.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=cfg.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    try:
        service = Service(cfg)
    except ValueError as exc:  # INFERENCE_DEVICE=cuda without a GPU
        print(f"error: config error: INFERENCE_DEVICE={cfg.device!r}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        service.store.check_cache_dir()
    except OSError as exc:
        print(
            f"error: config error: INFERENCE_CACHE_DIR={cfg.cache_dir!r}: not a writable directory "
            f"({exc.strerror or exc}); mount a writable volume there (e.g. an emptyDir)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    config = uvicorn.Config(
        create_app(service),
        host=cfg.host,
        port=cfg.http_port,
        timeout_graceful_shutdown=cfg.graceful_shutdown_s,  # type: ignore[arg-type]  # asyncio accepts float
        log_config=None,  # our logging format for uvicorn's loggers too
        access_log=cfg.access_log,
        lifespan="on",
    )
    server = DrainingServer(config, service)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _after_shutdown)
    log.info(
        "serving %s from %s on %s:%d (device %s)",
        cfg.model_name,
        cfg.release_root,
        cfg.host,
        cfg.http_port,
        service.store.device,
    )
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits 3 when it cannot bind the port (it logged why)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_START
    if not server.started:
        return EXIT_START
    log.info("shut down cleanly")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
