"""``make train-local``: a two-process CPU run against a local S3 (moto server), with metrics served.

    python -m trainer.tools.train_local [--steps 40] [--nproc 2] [--text FILE] [--workdir runs/local]
                                        [--metrics-port 9400]

``--text`` defaults to the trainer's own source, so nothing is downloaded; the last scrape of each rank is
saved to ``WORKDIR/metrics_rank<r>.prom``, and the exit code is the launcher's (``trainer/exitcodes.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _default_text() -> str:
    return "\n\n".join(p.read_text() for p in sorted((REPO / "trainer").rglob("*.py")))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--text", help="UTF-8 training text (default: the trainer's sources)")
    ap.add_argument("--workdir", default=str(REPO / "runs/local"))
    ap.add_argument("--metrics-port", type=int, default=9400, help="rank r serves on this port + local rank")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before the run is killed")
    args = ap.parse_args(argv)

    from trainer.storage.hashing import MANIFEST
    from trainer.tools.commands import DEBUG_CONFIG, trainer_command
    from trainer.tools.make_shards import encode, upload, write_shards
    from trainer.tools.moto_server import MotoServer

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    server = MotoServer()
    env = dict(os.environ)
    env.update(
        server.env(),
        # Stale-address problem on elastic restarts with a shared store: pytorch/pytorch#135712.
        TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    os.environ.update(server.env())
    server.start()
    print(f"moto S3 on {server.endpoint}", flush=True)
    try:
        import boto3

        s3 = boto3.client("s3")
        for bucket in ("local-data", "local-ckpt"):
            s3.create_bucket(Bucket=bucket)
        text = Path(args.text).read_text(encoding="utf-8") if args.text else _default_text()
        with tempfile.TemporaryDirectory() as tmp:
            index = write_shards(encode(text), tmp, shard_tokens=64 * 1024)
            upload(tmp, "s3://local-data/shards")
        print(f"uploaded {index['total_tokens']} tokens in {len(index['shards'])} shards", flush=True)

        cmd = trainer_command(
            args.nproc,
            DEBUG_CONFIG,
            [
                "data.source=s3://local-data/shards",
                f"data.cache_dir={work / 'cache'}",
                "checkpoint.uri=s3://local-ckpt/debug",
                f"train.steps={args.steps}",
                f"metrics.port_base={args.metrics_port}",
                f"metrics.log_file={work / 'log_rank{rank}.jsonl'}",
            ],
        )
        print("$ " + " ".join(cmd), flush=True)
        proc = subprocess.Popen(cmd, cwd=REPO, env=env)
        deadline = time.monotonic() + args.timeout
        scraped: set[int] = set()
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                print("error: run timed out", file=sys.stderr)
                break
            for r in range(args.nproc):
                try:
                    body = urllib.request.urlopen(
                        f"http://127.0.0.1:{args.metrics_port + r}/metrics", timeout=1
                    )
                    text_metrics = body.read().decode()
                except OSError:
                    continue
                if "trainer_step{" in text_metrics:
                    (work / f"metrics_rank{r}.prom").write_text(text_metrics)
                    if r not in scraped:
                        print(f"rank {r} metrics served on :{args.metrics_port + r}", flush=True)
                        scraped.add(r)
            time.sleep(0.2)
        rc = proc.wait()
        listing = s3.list_objects_v2(Bucket="local-ckpt", Prefix="debug/").get("Contents", [])
        manifests = sorted(o["Key"] for o in listing if o["Key"].endswith(MANIFEST))
        print(f"trainer.run.launch exit code {rc}; committed checkpoints: {manifests}", flush=True)
        return rc
    finally:
        server.stop()
        print("moto S3 stopped", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
