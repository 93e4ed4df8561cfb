"""A local moto server over HTTP for tests of boto3 code: a free port, waited for until it answers, reset
to an empty account, stopped in teardown.

Same interface as the trainer's ``trainer/tools/moto_server.py`` (``MotoServer``: ``start``, ``stop``,
``reset``, ``env``, ``client``, ``endpoint``), which was not on main when this was written; switch the import
once it is.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from typing import Any

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """``with MotoServer() as aws: ...``; ``env()`` points boto3 at it."""

    def __init__(self, port: int | None = None, region: str = "us-east-1") -> None:
        self.port = port or free_port()
        self.region = region
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """Endpoint, dummy credentials and no instance-metadata lookups."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            **CREDENTIALS,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def start(self, timeout: float = 20) -> MotoServer:
        """Start and return once the server answers HTTP (raises after ``timeout`` seconds)."""
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1).read()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Empty every moto backend of this process (an empty account)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def client(self, service: str, region: str | None = None) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=region or self.region,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
