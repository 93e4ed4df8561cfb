"""The one ``free_port`` (stdlib only, so the moto helper and infra tests can use it without torch)."""

from __future__ import annotations

import contextlib
import socket


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
