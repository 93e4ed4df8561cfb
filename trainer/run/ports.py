"""The one ``free_port`` (stdlib only, so the moto helper and infra tests can use it without torch)."""

from __future__ import annotations

import contextlib
import socket


def free_port_block(n: int, tries: int = 50) -> int:
    """First of ``n`` consecutive TCP ports that were all free a moment ago on 127.0.0.1 (one per local
    rank, e.g. the metrics ports)."""
    for _ in range(tries):
        base = free_port()
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise OSError(f"no block of {n} free ports found")


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
