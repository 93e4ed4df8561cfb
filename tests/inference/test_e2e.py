"""End to end on CPU: train with the trainer, publish with trainer.publish to release/ on a local S3
(moto over HTTP), replicate release/ to a region's bucket, serve it with ``python -m inference.serve``,
generate over HTTP; a newer corrupt release leaves the old model serving and ready; a newer good one is
swapped in while concurrent requests keep succeeding; SIGTERM drains in-flight requests and exits 0."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.inference.conftest import MODEL, REPO, Publisher, child_env, train
from tests.inference.importguard import build_site
from tests.inference.test_app import call, metric
from trainer.ports import free_port
from trainer.release import MANIFEST, WEIGHTS, publish
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


@pytest.fixture(scope="session")
def image_site(inference_tmp: Path) -> Path:
    """Only what the inference image installs (tests/inference/importguard.py)."""
    return build_site(inference_tmp / "image-site")


@dataclass
class Server:
    """``python -m inference.serve`` in a child process on a free port, with only the image's libraries
    importable (``python -S``: no site-packages; ``PYTHONPATH``: the image site), as in the container."""

    site: Path
    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        env = child_env({**self.env, "INFERENCE_HOST": "127.0.0.1", "INFERENCE_HTTP_PORT": str(self.port)})
        env["PYTHONPATH"] = str(self.site)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-m", "inference.serve"],
                cwd=self.site,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
            try:
                status, _, body = call(f"{self.base}/readyz")
                if status == 200:
                    return body
            except OSError:
                pass  # not listening yet
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture()
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


def replicate(s3: Any, src: str, dst: str, version: str, corrupt: str = "") -> None:
    """What S3 replication of the release/ prefix does, one object at a time; ``corrupt`` names a file whose
    bytes get damaged on the way. Real replication has no order; here the manifest goes last so that the
    server never verifies a release whose manifest names files not yet copied (a manifest that arrives before
    the weights is tests/inference/test_store.py's partial-replication case); it can still list a folder
    that is half copied and skip that listing."""
    prefix = f"release/{MODEL}/{version}/"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=src, Prefix=prefix)["Contents"])
    keys.sort(key=lambda k: k.endswith(MANIFEST))
    for key in keys:
        body = bytearray(s3.get_object(Bucket=src, Key=key)["Body"].read())
        if corrupt and key.endswith(corrupt):
            body[len(body) // 2] ^= 0xFF
        s3.put_object(Bucket=dst, Key=key, Body=bytes(body))


def generate(base: str, prompt: str = "the quick", n: int = 8, temperature: float = 0.8
             ) -> tuple[int, dict[str, Any]]:  # fmt: skip
    status, _, body = call(
        f"{base}/v1/generate", {"prompt": prompt, "max_new_tokens": n, "temperature": temperature}
    )
    return status, body


def failures(base: str) -> float:
    """The server's own count of invalid releases."""
    return metric(base, "inference_model_load_failures_total", {"reason": "invalid_release"}) or 0


def wait_for(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if val := pred():
            return val
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_train_publish_replicate_serve_corrupt_then_swap(
    moto_s3: MotoServer, work: Path, servers: list[Server], image_site: Path
) -> None:
    t0 = time.monotonic()
    s3 = moto_s3.client()
    for bucket in ("us-ckpt", "us-artifacts", "hk-models"):
        s3.create_bucket(Bucket=bucket)
    # 1. Train 4 steps in the "US" (checkpoints at steps 2 and 4, on S3).
    train(work, "s3://us-ckpt/runs/e2e", steps=4, interval=2)
    # 2. Publish step 2 with the CLI operators use.
    r = subprocess.run(
        [sys.executable, "-m", "trainer.publish", "--checkpoint", "s3://us-ckpt/runs/e2e", "--step", "2",
         "--release-root", "s3://us-artifacts", "--model-name", MODEL],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    v1 = json.loads(r.stdout)["version"]
    # 3. Replication brings release/ to the inference region; the server reads only that bucket.
    replicate(s3, "us-artifacts", "hk-models", v1)
    server = Server(
        image_site,
        {"INFERENCE_RELEASE_ROOT": "s3://hk-models", "INFERENCE_MODEL_NAME": MODEL,
         "INFERENCE_CACHE_DIR": str(work / "cache"), "INFERENCE_POLL_INTERVAL_S": "0.3",
         "INFERENCE_MAX_WAIT_MS": "2"},
        work / "server.log",
    ).start()  # fmt: skip
    servers.append(server)
    assert server.wait_ready() == {"ready": True, "model_name": MODEL, "model_version": v1}
    status, body = generate(server.base)
    assert status == 200 and body["model_version"] == v1 and body["generated_tokens"] >= 1, body
    assert isinstance(body["text"], str)

    # 4. A newer release that arrives corrupt: the old model keeps serving, readiness stays true.
    published = datetime.strptime(v1.split("-")[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    bad = publish(
        "s3://us-ckpt/runs/e2e", 4, "s3://us-artifacts", MODEL, now=published + timedelta(minutes=1)
    )
    replicate(s3, "us-artifacts", "hk-models", bad.version, corrupt=WEIGHTS)
    corrupt_line = f"release {MODEL}/{bad.version} skipped: {WEIGHTS}: sha256 does not match {MANIFEST}"
    wait_for(
        lambda: corrupt_line in (work / "server.log").read_text(), 60, "the corrupt release to be rejected"
    )
    status, _, ready = call(f"{server.base}/readyz")
    assert (status, ready) == (200, {"ready": True, "model_name": MODEL, "model_version": v1})
    assert metric(server.base, "inference_model_info", {"model_name": MODEL, "version": v1, "step": "2"}) == 1
    assert (
        metric(
            server.base, "inference_model_info", {"model_name": MODEL, "version": bad.version, "step": "4"}
        )
        is None
    )
    status, body = generate(server.base)
    assert status == 200 and body["model_version"] == v1
    log = (work / "server.log").read_text()
    assert "Traceback" not in log
    # A poll can also catch a version folder mid-replication (no manifest yet) and skip that listing, so on a
    # busy machine the count can be more than the one corrupt release.
    assert failures(server.base) >= 1
    assert server.proc is not None and server.proc.poll() is None

    # 5. A newer good release is swapped in while clients keep sending requests: none fails.
    answers: list[list[tuple[int, str]]] = [[] for _ in range(4)]
    stop = threading.Event()

    def client(out: list[tuple[int, str]]) -> None:
        while not stop.is_set():
            status, body = generate(server.base, n=4)
            out.append((status, body.get("model_version", body.get("error", ""))))

    threads = [threading.Thread(target=client, args=(a,)) for a in answers]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: all(len(a) >= 3 for a in answers), 30, "clients to be answered")
        good = publish(
            "s3://us-ckpt/runs/e2e", 4, "s3://us-artifacts", MODEL, now=published + timedelta(minutes=2)
        )
        replicate(s3, "us-artifacts", "hk-models", good.version)
        wait_for(lambda: all(a and a[-1][1] == good.version for a in answers), 30, "the swap")
        n = [len(a) for a in answers]
        wait_for(
            lambda: all(len(a) >= k + 3 for a, k in zip(answers, n, strict=True)),
            30,
            "requests after the swap",
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    every = [x for a in answers for x in a]
    assert {s for s, _ in every} == {200}, [x for x in every if x[0] != 200][:5]
    for a in answers:  # each client saw the old version, then the new one, never back
        versions = [v for _, v in a]
        assert versions[0] == v1 and versions[-1] == good.version
        assert versions == sorted(versions, key=lambda v: v == good.version)
    assert metric(server.base, "inference_model_loads_total") == 2
    log = (work / "server.log").read_text()
    # a half-copied good release may be skipped as partial, never for the bytes of its complete files
    assert f"release {MODEL}/{good.version} skipped: {WEIGHTS}" not in log
    assert (
        metric(
            server.base, "inference_model_info", {"model_name": MODEL, "version": good.version, "step": "4"}
        )
        == 1
    )
    assert metric(server.base, "inference_batch_size_sum", {"phase": "decode"}) > metric(
        server.base, "inference_batch_size_count", {"phase": "decode"}
    )  # concurrent clients shared forward passes (mean decode batch > 1)
    print(f"end-to-end: {time.monotonic() - t0:.1f}s, {len(every)} requests during the swap test")


def test_sigterm_drains_in_flight_requests_and_exits_0(
    checkpoints: Path, work: Path, servers: list[Server], image_site: Path
) -> None:
    """SIGTERM: readiness false at once, requests still served during the drain delay, then the listener
    closes and the requests in flight are answered before the process exits 0."""
    v1 = Publisher(checkpoints, work / "rel")(2)
    server = Server(
        image_site,
        {"INFERENCE_RELEASE_ROOT": str(work / "rel"), "INFERENCE_MODEL_NAME": MODEL,
         "INFERENCE_CACHE_DIR": str(work / "cache"), "INFERENCE_DRAIN_DELAY_S": "1",
         "INFERENCE_GRACEFUL_SHUTDOWN_S": "20", "INFERENCE_DEBUG_STEP_DELAY_MS": "60"},
        work / "server.log",
    ).start()  # fmt: skip
    servers.append(server)
    server.wait_ready()
    results: list[tuple[int, dict[str, Any]]] = []
    threads = [
        # Greedy: the same 20 tokens every run (no early end-of-text), about 1.2 s at 60 ms a step.
        threading.Thread(target=lambda: results.append(generate(server.base, n=20, temperature=0)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    wait_for(lambda: metric(server.base, "inference_requests_in_flight") == 3, 20, "3 requests in flight")
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    status, _, body = call(f"{server.base}/readyz")
    assert (status, body["reason"]) == (503, "draining: the server is shutting down")
    status, late = generate(server.base, n=2)  # within the drain delay: still served
    assert status == 200, late
    for t in threads:
        t.join(30)
    assert server.proc.wait(30) == 0, (work / "server.log").read_text()
    assert [s for s, _ in results] == [200, 200, 200], results
    assert all(b["generated_tokens"] == 20 and b["model_version"] == v1.version for _, b in results)
    with pytest.raises(OSError):  # the listener is gone
        call(f"{server.base}/healthz")
    log = (work / "server.log").read_text()
    assert "SIGTERM: not ready any more; in flight: 3" in log and "shut down cleanly" in log
    assert "Traceback" not in log


def test_bad_setting_and_busy_port_exit_with_one_line(work: Path, image_site: Path) -> None:
    """Configuration problems end the process with one line and exit 2 (no traceback); a port already in
    use ends it with 3."""
    env = child_env(
        {"INFERENCE_RELEASE_ROOT": str(work), "INFERENCE_MODEL_NAME": MODEL, "INFERENCE_MAX_BATCH": "0"}
    )
    env["PYTHONPATH"] = str(image_site)
    cmd = [sys.executable, "-S", "-m", "inference.serve"]
    r = subprocess.run(cmd, cwd=image_site, env=env, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (2, "error: config error: INFERENCE_MAX_BATCH=0: must be >= 1\n")
    env.pop("INFERENCE_MAX_BATCH")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        env.update(INFERENCE_HOST="127.0.0.1", INFERENCE_HTTP_PORT=str(busy.getsockname()[1]))
        env["INFERENCE_CACHE_DIR"] = str(work / "cache")
        r = subprocess.run(cmd, cwd=image_site, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "address already in use" in r.stderr and "Traceback" not in r.stderr
