"""The endpoint probe ``pulumi up`` runs before applying Kubernetes objects: a real TCP connection."""

from __future__ import annotations

import socket

from infra.io.kube_access import probe_endpoint


def test_reachable_endpoint() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert probe_endpoint(f"https://127.0.0.1:{port}", timeout_s=2) is None


def test_closed_port_says_what_went_wrong() -> None:
    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    problem = probe_endpoint(f"https://127.0.0.1:{port}", timeout_s=2)
    assert problem is not None and "ConnectionRefusedError" in problem and f"127.0.0.1:{port}" in problem


def test_unresolvable_name() -> None:
    problem = probe_endpoint("https://no-such-cluster.invalid", timeout_s=2)
    assert problem is not None and "no-such-cluster.invalid:443" in problem
