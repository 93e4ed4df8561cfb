"""Config loading and validation: every error names the field, the bad value and the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.trainer._support import PY, REPO, base_env
from trainer.config import CheckpointConfig, ConfigError, ModelConfig, TrainConfig, load_config

DEBUG = REPO / "trainer/configs/debug.toml"


def test_debug_config_loads_with_overrides() -> None:
    cfg = load_config(
        DEBUG, ["train.steps=7", "checkpoint.async_save=false", "optim.lr=0.5", "model.size=gpt2-124m"]
    )
    assert cfg.train.steps == 7
    assert cfg.checkpoint.async_save is False
    assert cfg.optim.lr == 0.5
    # Preset fills the shape fields left at 0.
    assert (cfg.model.n_layer, cfg.model.d_model, cfg.model.seq_len, cfg.model.vocab_size) == (
        12,
        768,
        1024,
        50304,
    )


def test_shipped_gpt2_config_is_valid() -> None:
    cfg = load_config(REPO / "trainer/configs/gpt2_124m.toml")
    assert cfg.model.size == "gpt2-124m" and cfg.train.compile


@pytest.mark.parametrize(
    ("overrides", "field", "fix"),
    [
        (["train.steps=0"], "train.steps", "must be >= 1"),
        (["train.micro_batch=abc"], "train.micro_batch", "use an integer"),
        (["train.dtype=fp8"], "train.dtype", "use one of"),
        (["model.size=huge"], "model.size", "use one of debug, gpt2-124m"),
        (["model.n_head=5"], "model.d_model", "divisible by model.n_head=5"),
        (["checkpoint.keep=0"], "checkpoint.keep", "keep at least one"),
        (["checkpoint.on_save_failure=ignore"], "checkpoint.on_save_failure", "continue, stop"),
        (["checkpoint.uri=gs://bucket/x"], "checkpoint.uri", "s3://bucket/prefix"),
        (["checkpoint.uri=s3://artifacts/release/gpt"], "checkpoint.uri", "only under its runs prefix"),
        (["checkpoint.async_save=maybe"], "checkpoint.async_save", "true or false"),
        (["checkpoint.side_write_timeout_s=0"], "checkpoint.side_write_timeout_s", "must be > 0"),
        (
            ["checkpoint.shutdown_window_s=20", "checkpoint.side_write_timeout_s=25"],
            "checkpoint.side_write_timeout_s",
            "below checkpoint.shutdown_window_s=20",
        ),
        (["metrics.port_base=70000"], "metrics.port_base", "TCP port"),
        (["optim.lr=-1"], "optim.lr", "must be > 0"),
    ],
)
def test_bad_values_name_field_and_fix(overrides: list[str], field: str, fix: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(DEBUG, overrides)
    assert exc.value.field_name == field
    assert field in str(exc.value) and fix in str(exc.value)


def test_unknown_key_suggests_closest() -> None:
    with pytest.raises(ConfigError, match=r"train.step.*did you mean 'steps'"):
        load_config(DEBUG, ["train.step=3"])
    with pytest.raises(ConfigError, match=r"checkpont.*did you mean 'checkpoint'"):
        load_config(DEBUG, ["checkpont.keep=3"])


def test_missing_data_source_and_bad_override_syntax(work_dir: Path) -> None:
    empty = work_dir / "c.toml"
    empty.write_text("[train]\nsteps = 3\n")
    with pytest.raises(ConfigError, match=r"data.source=''.*make_shards"):
        load_config(empty)
    with pytest.raises(ConfigError, match=r"--set.*section.key=value"):
        load_config(DEBUG, ["steps=3"])
    with pytest.raises(ConfigError, match="file not found"):
        load_config(work_dir / "nope.toml")


def test_dataclasses_validate_directly() -> None:
    with pytest.raises(ConfigError, match="train.grad_accum"):
        TrainConfig(grad_accum=0)
    with pytest.raises(ConfigError, match="checkpoint.interval"):
        CheckpointConfig(interval=0)
    assert ModelConfig(size="debug", n_layer=3).n_layer == 3


def test_cli_reports_config_error_without_traceback(work_dir: Path) -> None:
    r = subprocess.run(
        [PY, "-m", "trainer.train", "--config", str(DEBUG), "--set", "train.steps=-5"],
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "train.steps=-5" in r.stderr and "must be >= 1" in r.stderr
    assert "Traceback" not in r.stderr


def test_vocab_smaller_than_shards_is_a_config_error(shards_dir: Path, work_dir: Path) -> None:
    r = subprocess.run(
        [
            PY,
            "-m",
            "trainer.train",
            "--config",
            str(DEBUG),
            "--set",
            f"data.source={shards_dir}",
            "--set",
            "model.vocab_size=100",
            "--set",
            "metrics.port_base=0",
            "--set",
            "checkpoint.uri=",
        ],
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "model.vocab_size=100" in r.stderr and "vocab_size 257" in r.stderr
