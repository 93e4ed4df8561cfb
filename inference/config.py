"""The server's configuration: one frozen dataclass read from ``INFERENCE_*`` environment variables.

Every value is checked when it is read; a bad one raises :class:`ConfigError` whose one-line message names
the variable, the value and the fix (``python -m inference.serve`` prints it and exits 2, no traceback).
An ``INFERENCE_*`` variable the server does not know is an error with a did-you-mean hint, so a typo never
silently leaves a default in place.

Kubernetes service links: a Service named ``inference`` in the pod's namespace makes the kubelet inject
``INFERENCE_SERVICE_HOST``, ``INFERENCE_SERVICE_PORT[_<name>]``, ``INFERENCE_PORT`` (``tcp://ip:port``) and
``INFERENCE_PORT_<n>_<proto>[_*]`` into every pod unless the pod sets ``enableServiceLinks: false``
(https://kubernetes.io/docs/concepts/services-networking/service/#environment-variables). None of our
variables has those shapes (the listen port is ``INFERENCE_HTTP_PORT``), and they are ignored here.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "INFERENCE_"
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Names the kubelet derives from a Service called "inference" (see the module docstring).
_SERVICE_LINK = re.compile(
    r"^INFERENCE_(SERVICE_HOST|SERVICE_PORT(_.+)?|PORT|PORT_\d+_(TCP|UDP|SCTP)(_.+)?)$"
)


class ConfigError(ValueError):
    """A bad setting; the message names the variable, the value and the fix."""

    def __init__(self, var: str, value: Any, fix: str) -> None:
        self.var = var
        super().__init__(f"config error: {var}={value!r}: {fix}")


def _env(name: str) -> str:
    return PREFIX + name.upper()


@dataclass(frozen=True)
class ServerConfig:
    """Settings of ``python -m inference.serve``; each field is read from ``INFERENCE_<FIELD>``
    (upper case), e.g. ``release_root`` from ``INFERENCE_RELEASE_ROOT``."""

    # Where releases are read: s3://bucket[/prefix] (the region's replica bucket) or a local directory;
    # the server reads <release_root>/release/<model_name>/<version>/ (see trainer/release.py).
    release_root: str = ""
    model_name: str = ""
    # Rollback: serve exactly this version (e.g. 20261130T100100Z-step4) instead of the newest valid one.
    pin_version: str = ""
    host: str = "0.0.0.0"
    http_port: int = 8080
    # Writable directory for downloaded releases (an emptyDir under a read-only root filesystem).
    cache_dir: str = "/var/cache/inference"
    poll_interval_s: float = 30.0  # seconds between looks at release/ for a newer version
    device: str = "auto"  # auto: cuda when a GPU is visible, else cpu
    dtype: str = "auto"  # auto: bfloat16 on cuda >= sm_80, float16 on older GPUs, float32 on cpu
    max_batch: int = 16  # rows generated together (one forward per step for all of them)
    max_wait_ms: float = 5.0  # an idle batcher waits this long for more requests before starting a batch
    max_queue: int = 256  # requests waiting for a batch slot; beyond it new requests get 503
    max_prompt_bytes: int = 4096  # UTF-8 bytes of a prompt (also bounded by the model's context)
    max_new_tokens: int = 256  # the largest max_new_tokens a request may ask for
    default_max_new_tokens: int = 64  # when a request does not say
    request_timeout_s: float = 60.0  # a generation not finished by then gets 504
    # SIGTERM: readiness turns false at once; new requests are still served for drain_delay_s (so load
    # balancers stop sending), then the listener closes and in-flight requests get up to
    # graceful_shutdown_s to finish. Keep drain_delay_s + graceful_shutdown_s + a few seconds below the
    # pod's terminationGracePeriodSeconds.
    drain_delay_s: float = 0.0
    graceful_shutdown_s: float = 30.0
    torch_threads: int = 0  # CPU threads for torch (0 = torch's default)
    log_level: str = "info"
    access_log: bool = False  # uvicorn's per-request log lines (metrics count requests either way)
    # Test/debug knob only: sleep this long after every generation step so tests can keep requests in
    # flight. Leave at 0.
    debug_step_delay_ms: float = 0.0

    def __post_init__(self) -> None:
        def need(cond: bool, name: str, fix: str) -> None:
            if not cond:
                raise ConfigError(_env(name), getattr(self, name), fix)

        need(
            bool(self.release_root),
            "release_root",
            "set it to the bucket holding release/ (s3://bucket[/prefix]) or a local directory",
        )
        if self.release_root.startswith("s3://"):
            need(
                len(self.release_root) > 5 and not self.release_root[5:].startswith("/"),
                "release_root",
                "use s3://bucket[/prefix]",
            )
        else:
            need(
                "://" not in self.release_root,
                "release_root",
                "use s3://bucket[/prefix] or a local directory",
            )
        need(
            re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", self.model_name) is not None,
            "model_name",
            "use the --model-name given to python -m trainer.publish (1-63 of a-z 0-9 . _ -)",
        )
        need(
            self.pin_version == "" or re.fullmatch(r"\d{8}T\d{6}Z-step\d+", self.pin_version) is not None,
            "pin_version",
            "use a version folder name such as 20261130T100100Z-step4, or leave it empty for the newest",
        )
        need(bool(self.host), "host", "use an address to listen on, e.g. 0.0.0.0")
        need(1 <= self.http_port <= 65535, "http_port", "use a TCP port 1-65535")
        need(bool(self.cache_dir), "cache_dir", "use a writable local directory")
        need(self.poll_interval_s > 0, "poll_interval_s", "must be > 0 seconds")
        need(self.device in DEVICES, "device", f"use one of {', '.join(DEVICES)}")
        need(self.dtype in DTYPES, "dtype", f"use one of {', '.join(DTYPES)}")
        need(self.max_batch >= 1, "max_batch", "must be >= 1")
        need(self.max_wait_ms >= 0, "max_wait_ms", "must be >= 0")
        need(self.max_queue >= 1, "max_queue", "must be >= 1")
        need(self.max_prompt_bytes >= 1, "max_prompt_bytes", "must be >= 1")
        need(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        need(
            1 <= self.default_max_new_tokens <= self.max_new_tokens,
            "default_max_new_tokens",
            f"must be between 1 and INFERENCE_MAX_NEW_TOKENS={self.max_new_tokens}",
        )
        need(self.request_timeout_s > 0, "request_timeout_s", "must be > 0 seconds")
        need(self.drain_delay_s >= 0, "drain_delay_s", "must be >= 0 seconds")
        need(self.graceful_shutdown_s > 0, "graceful_shutdown_s", "must be > 0 seconds")
        need(self.torch_threads >= 0, "torch_threads", "must be >= 0 (0 = torch's default)")
        need(self.log_level in LOG_LEVELS, "log_level", f"use one of {', '.join(LOG_LEVELS)}")
        need(self.debug_step_delay_ms >= 0, "debug_step_delay_ms", "must be >= 0 (leave it at 0)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerConfig:
        """Read ``INFERENCE_*`` variables (``os.environ`` by default); unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        fields = {f.name: f for f in dataclasses.fields(cls)}
        known = {_env(n): n for n in fields}
        port = env.get("INFERENCE_PORT", "")
        if port and not port.startswith("tcp://"):  # set by hand, not by the kubelet
            raise ConfigError(
                "INFERENCE_PORT",
                port,
                "the listen port is INFERENCE_HTTP_PORT (INFERENCE_PORT is the name Kubernetes uses for the "
                "service link of a Service called 'inference')",
            )
        for var in sorted(env):
            if var.startswith(PREFIX) and var not in known and not _SERVICE_LINK.match(var):
                close = difflib.get_close_matches(var, list(known), n=1)
                hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(known))}"
                raise ConfigError(var, env[var], f"unknown setting; {hint}")
        values: dict[str, Any] = {}
        for var, name in known.items():
            if var in env:
                values[name] = _parse(var, env[var], fields[name].type)
        return cls(**values)


def _parse(var: str, raw: str, hint: Any) -> Any:
    """A string from the environment as the field's type (``hint`` is the annotation, a string)."""
    raw = raw.strip()
    if hint == "int":
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(var, raw, "must be a whole number") from None
    if hint == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(var, raw, "must be a number") from None
    if hint == "bool":
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(var, raw, "use true or false")
    return raw
