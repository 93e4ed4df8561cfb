"""Metrics served over HTTP, JSON log lines, the model, and the train-local tool."""

from __future__ import annotations

import json
import math
import subprocess
import urllib.request
from pathlib import Path

import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

from tests.trainer._support import PY, REPO, base_env
from trainer.config import MetricsConfig, ModelConfig
from trainer.run.ports import free_port, free_port_block
from trainer.training.metrics import Metrics
from trainer.training.model import GPT

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


def scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {s.name: s.value for fam in text_string_to_metric_families(body) for s in fam.samples}


def test_metrics_served_per_local_rank_and_json_log(work_dir: Path) -> None:
    base = free_port()
    m = Metrics(
        MetricsConfig(port_base=base - 1, log_file=str(work_dir / "r{rank}.jsonl")), 3, 1, torch.device("cpu")
    )
    assert m.port == base  # port_base + local rank
    rec = {
        "step": 7,
        "step_s": 0.5,
        "tokens": 4096,
        "tokens_per_s": 8192.0,
        "loss": 3.25,
        "grad_norm": 0.75,
        "lr": 1e-4,
        "data_wait_s": 0.01,
        "mfu": None,
    }
    m.observe_step(rec)
    m.observe_step({**rec, "step": 8})
    m.observe_save(True, 0.02, 1.5, 123456, 8)
    m.observe_save(False, 0.01, 0.3, 0, 10)
    m.restarts.set(2)
    got = scrape(base)
    assert got["trainer_step"] == 8 and got["trainer_loss"] == 3.25 and got["trainer_grad_norm"] == 0.75
    assert got["trainer_tokens_per_second"] == 8192.0 and got["trainer_tokens_total"] == 8192
    assert got["trainer_learning_rate"] == 1e-4 and got["trainer_data_wait_seconds"] == 0.01
    assert got["trainer_checkpoint_bytes"] == 123456 and got["trainer_checkpoint_last_committed_step"] == 8
    assert got["trainer_checkpoint_failures_total"] == 1 and got["trainer_restart_count"] == 2
    assert got["trainer_step_duration_seconds_count"] == 2
    m.event("step", **rec)
    [line] = (work_dir / "r3.jsonl").read_text().splitlines()
    assert json.loads(line)["loss"] == 3.25 and json.loads(line)["rank"] == 3


def test_model_loss_at_init_is_near_uniform_and_flops() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig()
    model = GPT(cfg)
    x = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len + 1))
    loss = model(x[:, :-1], x[:, 1:])
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.1
    assert model.lm_head.weight is model.wte.weight
    big = ModelConfig(size="gpt2-124m")
    with torch.device("meta"):
        gpt2 = GPT(big)
    # 124M with tied embeddings, of which 0.8M are position embeddings.
    assert 123e6 < gpt2.num_params(exclude_embeddings=False) < 125e6
    assert gpt2.flops_per_token() == 6 * gpt2.num_params() + 12 * 12 * 768 * 1024


def test_train_local_runs_two_ranks_on_moto_with_metrics(work_dir: Path) -> None:
    port = free_port_block(2)  # rank r serves on port + r
    r = subprocess.run(
        [
            PY,
            "-m",
            "trainer.tools.train_local",
            "--steps",
            "30",
            "--workdir",
            str(work_dir),
            "--metrics-port",
            str(port),
            "--timeout",
            "200",
        ],
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "trainer.run.launch exit code 0" in r.stdout and "moto S3 stopped" in r.stdout
    assert "debug/step_000000030/manifest.json" in r.stdout
    for rank in (0, 1):
        families = {
            f.name
            for f in text_string_to_metric_families((work_dir / f"metrics_rank{rank}.prom").read_text())
        }
        assert {
            "trainer_step",
            "trainer_loss",
            "trainer_tokens_per_second",
            "trainer_restart_count",
        } <= families
    done = [json.loads(x) for x in (work_dir / "log_rank0.jsonl").read_text().splitlines()]
    assert done[-1]["event"] == "done" and done[-1]["step"] == 30
