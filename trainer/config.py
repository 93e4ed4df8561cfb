"""Typed trainer configuration: one dataclass per component, loaded from TOML plus ``--set`` overrides.

Every dataclass validates itself in ``__post_init__`` and raises :class:`ConfigError`, whose message names
the field (``section.key``), the bad value and the fix.  Unknown keys are rejected with a did-you-mean hint
so that a typo in a config file never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trainer.errors import BadInput

MODEL_SIZES = ("debug", "gpt2-124m")
DTYPES = ("auto", "float32", "bfloat16", "float16")
SAVE_FAILURE_POLICIES = ("continue", "stop")


class ConfigError(BadInput, ValueError):
    """A user error in the configuration; the message names the field, the bad value and the fix."""

    def __init__(self, field_name: str, value: Any, fix: str) -> None:
        self.field_name = field_name
        self.value = value
        self.fix = fix
        super().__init__(f"config error: {field_name}={value!r}: {fix}")


def _require(cond: bool, field_name: str, value: Any, fix: str) -> None:
    if not cond:
        raise ConfigError(field_name, value, fix)


@dataclass
class ModelConfig:
    """GPT model shape.

    ``size`` picks a preset (``debug``: 2 layers, d=32, for tests; ``gpt2-124m``: 12 layers, d=768);
    the other fields, when left at 0, take the preset's value.
    """

    size: Literal["debug", "gpt2-124m"] = "debug"
    n_layer: int = 0
    n_head: int = 0
    d_model: int = 0
    seq_len: int = 0  # tokens per sample (context length)
    vocab_size: int = 0  # must be >= the tokenizer's vocabulary stored in the shard index
    dropout: float = 0.0  # keep 0 for bitwise-reproducible restarts

    def __post_init__(self) -> None:
        _require(self.size in MODEL_SIZES, "model.size", self.size, f"use one of {', '.join(MODEL_SIZES)}")
        preset = {
            "debug": dict(n_layer=2, n_head=2, d_model=32, seq_len=32, vocab_size=320),
            # GPT-2 small; vocab padded to a multiple of 64 as in nanoGPT/llm.c (tensor-core friendly).
            "gpt2-124m": dict(n_layer=12, n_head=12, d_model=768, seq_len=1024, vocab_size=50304),
        }[self.size]
        for key, val in preset.items():
            if getattr(self, key) == 0:
                setattr(self, key, val)
        for key in ("n_layer", "n_head", "d_model", "seq_len", "vocab_size"):
            _require(getattr(self, key) > 0, f"model.{key}", getattr(self, key), "must be a positive integer")
        _require(
            self.d_model % self.n_head == 0,
            "model.d_model",
            self.d_model,
            f"must be divisible by model.n_head={self.n_head}",
        )
        _require(0.0 <= self.dropout < 1.0, "model.dropout", self.dropout, "must be in [0, 1)")


@dataclass
class DataConfig:
    """Token shards: ``source`` is a local directory or ``s3://bucket/prefix`` holding ``index.json``
    and ``*.bin`` shards (see ``python -m trainer.tools.make_shards``); S3 shards are copied to
    ``cache_dir`` (the node's NVMe) before training starts."""

    source: str = ""
    cache_dir: str = "/tmp/trainer-data-cache"
    prefetch: int = 4  # batches prepared ahead by the loader thread
    verify_checksums: bool = True  # check each shard's sha256 against index.json after download
    store_wait_s: float = 120.0  # at start, retry an S3 source that does not answer this long (then exit 4)

    def __post_init__(self) -> None:
        _require(
            bool(self.source),
            "data.source",
            self.source,
            "set it to a directory or s3://bucket/prefix made by `python -m trainer.tools.make_shards`",
        )
        _require(self.prefetch >= 1, "data.prefetch", self.prefetch, "must be >= 1")
        _require(self.store_wait_s >= 0, "data.store_wait_s", self.store_wait_s, "must be >= 0 seconds")
        _require(bool(self.cache_dir), "data.cache_dir", self.cache_dir, "set a local directory (NVMe)")


@dataclass
class OptimConfig:
    """AdamW with linear warmup then cosine decay to ``min_lr_ratio * lr``."""

    lr: float = 6e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0  # max global grad norm; 0 disables clipping (the norm is still measured)

    def __post_init__(self) -> None:
        _require(self.lr > 0, "optim.lr", self.lr, "must be > 0, e.g. 6e-4")
        _require(self.weight_decay >= 0, "optim.weight_decay", self.weight_decay, "must be >= 0")
        _require(0 <= self.beta1 < 1, "optim.beta1", self.beta1, "must be in [0, 1)")
        _require(0 <= self.beta2 < 1, "optim.beta2", self.beta2, "must be in [0, 1)")
        _require(self.eps > 0, "optim.eps", self.eps, "must be > 0")
        _require(self.warmup_steps >= 0, "optim.warmup_steps", self.warmup_steps, "must be >= 0")
        _require(0 <= self.min_lr_ratio <= 1, "optim.min_lr_ratio", self.min_lr_ratio, "must be in [0, 1]")
        _require(self.grad_clip >= 0, "optim.grad_clip", self.grad_clip, "must be >= 0 (0 disables)")


@dataclass
class TrainConfig:
    """The loop: ``steps`` optimizer steps of ``micro_batch * grad_accum * world_size`` samples each."""

    steps: int = 100
    micro_batch: int = 8  # samples per rank per micro-step
    grad_accum: int = 1  # micro-steps per optimizer step; DDP syncs only on the last one (no_sync)
    seed: int = 1234
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: bf16 on GPU, fp32 on CPU
    compile: bool = False  # torch.compile the model (GPU runs; slow to warm up on CPU)
    dist_timeout_s: float = 300.0  # collective timeout; a dead peer surfaces as an error, not a hang
    # Name of the run in checkpoint manifests, run records and releases; "" = last part of checkpoint.uri.
    run_id: str = ""
    # Test/debug knob only: sleep this long after every step so that tests can interrupt a tiny model
    # mid-run. Leave at 0 for real training.
    step_delay_s: float = 0.0

    def __post_init__(self) -> None:
        _require(self.steps >= 1, "train.steps", self.steps, "must be >= 1")
        _require(self.micro_batch >= 1, "train.micro_batch", self.micro_batch, "must be >= 1")
        _require(self.grad_accum >= 1, "train.grad_accum", self.grad_accum, "must be >= 1")
        _require(self.dtype in DTYPES, "train.dtype", self.dtype, f"use one of {', '.join(DTYPES)}")
        _require(self.dist_timeout_s > 0, "train.dist_timeout_s", self.dist_timeout_s, "must be > 0")
        _require(self.step_delay_s >= 0, "train.step_delay_s", self.step_delay_s, "must be >= 0")


@dataclass
class CheckpointConfig:
    """Distributed checkpoints (``torch.distributed.checkpoint``) to a directory or ``s3://bucket/prefix``.

    A checkpoint counts only once ``manifest.json`` (sizes and sha256 of every file, written last) exists.
    """

    uri: str = ""  # empty disables checkpointing
    interval: int = 100  # save every N steps (and always at the last step and on SIGTERM)
    keep: int = 3  # newest committed checkpoints kept; older ones are deleted
    async_save: bool = True  # block the loop only while state is staged to host memory
    on_save_failure: Literal["continue", "stop"] = "continue"
    verify_on_load: bool = True  # re-hash files against the manifest before resuming
    s3_region: str = ""  # default: $AWS_REGION, else us-east-1
    s3_endpoint: str = ""  # default: $AWS_ENDPOINT_URL (MinIO, moto); empty uses AWS
    s3_max_attempts: int = 10  # retries of the S3 client (AWS CRT) per request
    # Seconds between SIGTERM and SIGKILL: min(launcher --shutdown-timeout, pod
    # terminationGracePeriodSeconds); the launcher's --shutdown-timeout defaults to it. The trainer warns
    # when a save would not fit in it.
    shutdown_window_s: float = 30.0
    store_wait_s: float = 120.0  # at start, retry a store that does not answer this long (then exit 4)
    # Seconds each side write (the run record; anything that is not the checkpoint) may take; it runs off
    # the training thread, and at shutdown one still unfinished after this long is abandoned with a warning.
    # Below shutdown_window_s, so that waiting for the last one still fits in it
    # (trainer/checkpoint/sidewrites.py).
    side_write_timeout_s: float = 10.0
    # Resume rules: a checkpoint of another dataset (index fingerprint) or another global batch
    # (micro_batch x grad_accum x world size) is refused unless allowed here; then the change is logged.
    allow_dataset_change: bool = False
    allow_batch_change: bool = False

    def __post_init__(self) -> None:
        _require(self.interval >= 1, "checkpoint.interval", self.interval, "must be >= 1 step")
        _require(self.keep >= 1, "checkpoint.keep", self.keep, "must be >= 1 (keep at least one checkpoint)")
        _require(
            self.on_save_failure in SAVE_FAILURE_POLICIES,
            "checkpoint.on_save_failure",
            self.on_save_failure,
            f"use one of {', '.join(SAVE_FAILURE_POLICIES)}",
        )
        _require(
            self.s3_max_attempts >= 1, "checkpoint.s3_max_attempts", self.s3_max_attempts, "must be >= 1"
        )
        _require(
            self.shutdown_window_s > 0, "checkpoint.shutdown_window_s", self.shutdown_window_s, "must be > 0"
        )
        _require(self.store_wait_s >= 0, "checkpoint.store_wait_s", self.store_wait_s, "must be >= 0 seconds")
        _require(
            0 < self.side_write_timeout_s < self.shutdown_window_s,
            "checkpoint.side_write_timeout_s",
            self.side_write_timeout_s,
            f"must be > 0 and below checkpoint.shutdown_window_s={self.shutdown_window_s:g} (the shutdown "
            "waits this long for the last run record), e.g. 10",
        )
        _require(
            "release" not in self.uri.replace("\\", "/").split("/"),
            "checkpoint.uri",
            self.uri,
            "the trainer writes only under its runs prefix; release/ is written by python -m "
            "trainer.release.publish",
        )
        if self.uri.startswith("s3://"):
            _require(
                len(self.uri) > len("s3://") and not self.uri[5:].startswith("/"),
                "checkpoint.uri",
                self.uri,
                "use s3://bucket/prefix",
            )
        elif "://" in self.uri:
            _require(False, "checkpoint.uri", self.uri, "use a local directory or s3://bucket/prefix")


@dataclass
class MetricsConfig:
    """Prometheus endpoint (one port per local rank: ``port_base + LOCAL_RANK``) and JSON step logs."""

    port_base: int = 9400  # 0 disables the HTTP endpoint
    log_interval: int = 10  # steps between JSON log lines
    log_file: str = ""  # also append JSON lines here ("{rank}" is replaced by the global rank)

    def __post_init__(self) -> None:
        _require(
            0 <= self.port_base < 65536, "metrics.port_base", self.port_base, "use 0 (off) or a TCP port"
        )
        _require(self.log_interval >= 1, "metrics.log_interval", self.log_interval, "must be >= 1")


@dataclass
class JobConfig:
    """The whole trainer configuration; one section per component."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # No usable default: build_config() always constructs it from the file, so a missing data.source fails
    # validation there; this placeholder only makes JobConfig() constructible in code.
    data: DataConfig = field(default_factory=lambda: DataConfig(source="runs/data/shards"))
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for logging and for storing beside checkpoints)."""
        return dataclasses.asdict(self)

    def resolved_run_id(self) -> str:
        """``train.run_id``, else the last path component of ``checkpoint.uri``, else ``"run"``."""
        return self.train.run_id or self.checkpoint.uri.rstrip("/").rsplit("/", 1)[-1] or "run"


_SECTIONS: dict[str, type] = {f.name: f.type for f in dataclasses.fields(JobConfig)}  # type: ignore[misc]


def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(JobConfig)
    return {name: hints[name] for name in _SECTIONS}


def _did_you_mean(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    return f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(sorted(options))}"


def _coerce(field_name: str, raw: Any, hint: Any) -> Any:
    """Convert a TOML or ``--set`` value to the field's declared type (strings come from the CLI)."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        choices = typing.get_args(hint)
        if raw not in choices:
            raise ConfigError(field_name, raw, f"use one of {', '.join(map(str, choices))}")
        return raw
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return raw.lower() in ("true", "1", "yes", "on")
        raise ConfigError(field_name, raw, "use true or false")
    if hint is int:
        if isinstance(raw, bool):
            raise ConfigError(field_name, raw, "use an integer")
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ConfigError(field_name, raw, "use an integer") from None
    if hint is float:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(field_name, raw, "use a number") from None
    if hint is str:
        return str(raw)
    raise ConfigError(field_name, raw, f"unsupported type {hint}")


def build_config(data: dict[str, Any]) -> JobConfig:
    """Build and validate a :class:`JobConfig` from nested ``{section: {key: value}}`` data."""
    sections = _section_types()
    kwargs: dict[str, Any] = {}
    for sec_name, sec_values in data.items():
        if sec_name not in sections:
            raise ConfigError(
                sec_name, sec_values, f"unknown section; {_did_you_mean(sec_name, list(sections))}"
            )
        if not isinstance(sec_values, dict):
            raise ConfigError(sec_name, sec_values, "must be a table of key = value")
        cls = sections[sec_name]
        hints = typing.get_type_hints(cls)
        field_kwargs = {}
        for key, raw in sec_values.items():
            if key not in hints:
                raise ConfigError(f"{sec_name}.{key}", raw, f"unknown key; {_did_you_mean(key, list(hints))}")
            field_kwargs[key] = _coerce(f"{sec_name}.{key}", raw, hints[key])
        kwargs[sec_name] = cls(**field_kwargs)
    if "data" not in kwargs:
        kwargs["data"] = DataConfig()  # raises: data.source is required
    return JobConfig(**kwargs)


def parse_overrides(overrides: list[str]) -> dict[str, dict[str, str]]:
    """Turn ``["train.steps=10", ...]`` into ``{"train": {"steps": "10"}}``."""
    out: dict[str, dict[str, str]] = {}
    for item in overrides:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ConfigError("--set", item, "use --set section.key=value, e.g. --set train.steps=10")
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        out.setdefault(section.strip(), {})[name.strip()] = value
    return out


def load_config(path: str | os.PathLike[str] | None, overrides: list[str] | None = None) -> JobConfig:
    """Load a TOML file (may be ``None``), apply ``--set`` overrides, validate and return the config."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                "--config", str(path), "file not found; pass a TOML file such as trainer/configs/debug.toml"
            )
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", str(path), f"not valid TOML ({exc})") from None
    for section, values in parse_overrides(overrides or []).items():
        data.setdefault(section, {})
        if not isinstance(data[section], dict):
            raise ConfigError(section, data[section], "must be a table of key = value")
        data[section].update(values)
    return build_config(data)
