"""The one way to run a local AWS (S3 and the rest) for tests, ``make train-local`` and benchmarks: moto's
``ThreadedMotoServer`` on 127.0.0.1 on a free port, waited for until it answers HTTP.

moto keeps its backends in the Python process, not in the server: objects survive a ``stop()`` and
``start()`` on the same port (tests use that to take an endpoint away and bring it back), and two servers
in one process share state, so :meth:`MotoServer.reset` empties it.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from trainer.run.ports import free_port

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
READY_PATH = "/moto-api/config"  # a few hundred bytes whatever the server holds


class MotoServer:
    """``with MotoServer() as s3: ...`` or ``start()``/``stop()``; ``env()`` points AWS SDKs at it."""

    def __init__(self, port: int | None = None, region: str = "us-east-1") -> None:
        self.port = port or free_port()
        self.region = region
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._server is not None

    def env(self) -> dict[str, str]:
        """Environment for boto3, the S3 connector and child processes: endpoint, dummy credentials,
        region, and no instance-metadata lookups."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            **CREDENTIALS,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def start(self, timeout: float = 60) -> MotoServer:
        """Start the server and return once it answers (raises after ``timeout`` seconds)."""
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        # The probe asks for moto's small, state-free config document (not /moto-api/data.json, the whole
        # emulator state, which grows over a test session), and each try may take what is left of the
        # deadline: on a machine whose cores are busy the first answer can take seconds.
        deadline = time.monotonic() + timeout
        while True:
            try:
                left = max(deadline - time.monotonic(), 1.0)
                urllib.request.urlopen(f"{self.endpoint}{READY_PATH}", timeout=left).read()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (state stays in this process; see the module docstring)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Empty every moto backend of this process (an empty account)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=60).read()  # resets every backend: slow when busy

    def client(self, service: str = "s3", region: str | None = None) -> Any:
        """A boto3 client for ``service`` on this server (in ``region``, default the server's)."""
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
