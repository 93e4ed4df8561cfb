"""A store that hangs or crawls, for tests: a TCP proxy in front of an HTTP server (moto) that either passes
requests through or holds them: it accepts the connection, reads the request and never answers. That is
how a network partition or a stalled endpoint looks to a client (nothing until its read timeout), unlike a
stopped server, which refuses at once. :meth:`HoldProxy.throttle` makes it a slow store instead: request
bodies (uploads) pass at a given rate, all connections together.

The proxy adds ``Connection: close`` to every request it forwards, so each connection carries one request:
a switch to hold takes effect at the next request, and a hold can pick requests by path (the run records'
``/run-records/`` while checkpoints still pass). Runs on 127.0.0.1 on a free port; :meth:`HoldProxy.stop`
closes every socket and joins every thread it started.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from trainer.run.ports import free_port

HEAD_LIMIT = 64 * 1024  # bytes of request line and headers read before deciding
THROTTLE_CHUNK = 8 * 1024  # bytes forwarded per paced write when throttled
JOIN_S = 30  # teardown: how long a connection thread gets to notice its closed sockets


class HoldProxy:
    """``with HoldProxy(moto.port) as proxy: ...``, then ``proxy.hold("/run-records/")`` or
    ``proxy.pass_through()``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._hold: str | None = None  # None: pass through; "": hold every request; else a path part
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self.held: list[str] = []  # request lines held so far ("PUT /bucket/key HTTP/1.1")
        self.forwarded: list[str] = []  # request lines passed on so far, in order
        self._rate: float | None = None  # bytes per second of request bodies; None: unlimited
        self._next_free = 0.0  # time.monotonic() when the throttled link is free again

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: give it to the code under test as its S3 endpoint."""
        return f"http://127.0.0.1:{self.port}"

    def hold(self, path_contains: str = "") -> None:
        """From the next request on, hold those whose path contains ``path_contains`` (default: all)."""
        with self._lock:
            self._hold = path_contains

    def throttle(self, bytes_per_s: float | None) -> None:
        """Pace request bodies (uploads) to ``bytes_per_s`` over all connections together; ``None``: no
        limit. Applies to bytes forwarded from now on."""
        with self._lock:
            self._rate = bytes_per_s

    def _pace(self, n: int) -> None:
        """Wait for this chunk's turn on the throttled link (a no-op without a limit)."""
        with self._lock:
            if self._rate is None:
                return
            start = max(time.monotonic(), self._next_free)
            self._next_free = start + n / self._rate
            until = self._next_free
        time.sleep(max(0.0, until - time.monotonic()))

    def pass_through(self) -> None:
        """From the next request on, forward everything (requests already held stay held)."""
        with self._lock:
            self._hold = None

    def start(self) -> HoldProxy:
        """Listen and serve in background threads."""
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        self._spawn(self._accept, listener)
        return self

    def stop(self) -> None:
        """Close the listener and every connection, then join the threads."""
        with self._lock:
            socks = list(self._sockets)
            self._sockets.clear()
        for s in [self._listener, *socks]:
            if s is not None:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
        self._listener = None
        for t in self._threads:
            t.join(JOIN_S)
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, f"proxy threads still running after stop(): {alive}"

    def __enter__(self) -> HoldProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------- serve
    def _spawn(self, target: Any, *args: Any) -> threading.Thread:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"hold-proxy-{target.__name__}")
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()
        return t

    def _close(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(socks)
        for s in socks:
            s.close()

    def _track(self, s: socket.socket) -> bool:
        with self._lock:
            if self._listener is None:
                return False
            self._sockets.add(s)
            return True

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by stop()
                return
            if not self._track(client):
                client.close()
                return
            self._spawn(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        try:
            self._relay(client)
        finally:
            self._close(client)

    def _relay(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
            try:
                chunk = client.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            head += chunk
        head, _, rest = head.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        request_line = lines[0].decode("latin-1")
        path = request_line.split(" ")[1] if " " in request_line else ""
        with self._lock:
            hold = self._hold is not None and self._hold in path
            (self.held if hold else self.forwarded).append(request_line)
        if hold:
            _drain(client)  # never answer; return when the client gives up or stop() closes it
            return
        kept = [ln for ln in lines[1:] if not ln.lower().startswith(b"connection:")]
        head = b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n"
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            return
        if not self._track(upstream):
            upstream.close()
            return
        try:
            upstream.sendall(head)
            self._send_body(upstream, rest)
            body = self._spawn(_pump, client, upstream, self)  # the rest of the request body
            _pump(upstream, client)  # the response, until the server closes (Connection: close)
            body.join(JOIN_S)  # ends when the client, having read the response, closes
        finally:
            self._close(upstream)

    def _send_body(self, dst: socket.socket, data: bytes) -> None:
        for i in range(0, len(data), THROTTLE_CHUNK):
            chunk = data[i : i + THROTTLE_CHUNK]
            self._pace(len(chunk))
            dst.sendall(chunk)


def _drain(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while s.recv(65536):
            pass


def _pump(src: socket.socket, dst: socket.socket, proxy: HoldProxy | None = None) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends (paced by ``proxy``'s throttle, if given); then end
    ``dst``'s sending side."""
    with contextlib.suppress(OSError):
        while data := src.recv(THROTTLE_CHUNK if proxy is not None else 65536):
            if proxy is not None:
                proxy._send_body(dst, data)
            else:
                dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
