"""Can this machine reach the cluster's Kubernetes API? A TCP connection to the endpoint, nothing more.

Used by ``pulumi up`` only (the program's default ``endpoint_probe``), never by the offline plan: an EKS
cluster with a private endpoint answers only inside its VPC, and the Kubernetes provider would otherwise
wait for its own timeouts on every object before failing.
https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

TIMEOUT_S = 10.0


def probe_endpoint(endpoint: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """None when a TCP connection to ``endpoint`` (``https://host[:port]``) succeeds within ``timeout_s``,
    else what went wrong (DNS failure, timeout, refused)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host, port = parts.hostname, parts.port or 443
    if not host:
        return f"{endpoint!r} names no host"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:  # socket.gaierror and TimeoutError are OSErrors
        return f"{type(exc).__name__}: {exc or 'no answer'} (connecting to {host}:{port}, {timeout_s:.0f} s)"
