"""Read trainer config files with the trainer's own loader (``trainer.config.load_config``).

The trainer package is part of this distribution and its config module imports no torch, so the cluster
side sees exactly the defaults and validation the trainer applies. Used by the program (runs and the
runtime in the stack file) and by ``aiplat train render``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from infra.core.trainer_settings import TrainerSettings
from infra.schema.platform import PlatformConfig
from trainer.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
# Values for the fields the platform sets on the command line (data.source, checkpoint.uri), so a config
# that leaves them to the platform still loads here.
_PLACEHOLDERS = ("data.source=s3://platform-set/data", "checkpoint.uri=s3://platform-set/checkpoints")


def read_trainer_settings(path: str, overrides: Iterable[str] = (), *, root: Path = REPO) -> TrainerSettings:
    """The settings of ``root/path`` with ``--set`` ``overrides``; a file that does not load is returned
    with ``error`` set (the rules report it with the field that names the file)."""
    try:
        cfg = load_config(root / path, [*_PLACEHOLDERS, *overrides])
    except ConfigError as exc:
        return TrainerSettings(
            path=path, cache_dir="", shutdown_window_s=0.0, metrics_port_base=0, error=str(exc)
        )
    return TrainerSettings(
        path=path,
        cache_dir=cfg.data.cache_dir,
        shutdown_window_s=float(cfg.checkpoint.shutdown_window_s),
        metrics_port_base=int(cfg.metrics.port_base),
    )


def training_settings(cfg: PlatformConfig, *, root: Path = REPO) -> dict[str, TrainerSettings] | None:
    """The trainer configs the training section names, by what names them: ``runtime`` and
    ``runs.<name>`` (None: no training section)."""
    if cfg.training is None:
        return None
    out = {"runtime": read_trainer_settings(cfg.training.runtime.trainer_config, root=root)}
    for name, run in cfg.training.runs.items():
        overrides = [f"{k}={v}" for k, v in run.overrides.items()]
        out[f"runs.{name}"] = read_trainer_settings(run.config, overrides, root=root)
    return out
