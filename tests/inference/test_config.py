"""Server settings from INFERENCE_* variables (inference/config.py): defaults, one-line errors, typos."""

from __future__ import annotations

import pytest

from inference.config import ConfigError, ServerConfig

BASE = {"INFERENCE_RELEASE_ROOT": "s3://models-hk/prod", "INFERENCE_MODEL_NAME": "gpt2-small"}


def test_minimal_environment_takes_the_defaults() -> None:
    cfg = ServerConfig.from_env({**BASE, "PATH": "/usr/bin", "HOME": "/home/x"})
    assert (cfg.release_root, cfg.model_name) == ("s3://models-hk/prod", "gpt2-small")
    assert cfg == ServerConfig(release_root="s3://models-hk/prod", model_name="gpt2-small")


def test_values_are_parsed_to_their_types() -> None:
    cfg = ServerConfig.from_env(
        {
            **BASE,
            "INFERENCE_HTTP_PORT": "9000",
            "INFERENCE_MAX_WAIT_MS": "2.5",
            "INFERENCE_ACCESS_LOG": "true",
            "INFERENCE_PIN_VERSION": "20261130T100100Z-step4",
            "INFERENCE_DEVICE": "cpu",
        }
    )
    assert (cfg.http_port, cfg.max_wait_ms, cfg.access_log) == (9000, 2.5, True)
    assert (cfg.pin_version, cfg.device) == ("20261130T100100Z-step4", "cpu")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"INFERENCE_RELEASE_ROOT": None},
            "config error: INFERENCE_RELEASE_ROOT='': set it to the bucket holding release/",
        ),
        (
            {"INFERENCE_RELEASE_ROOT": "s3:///x"},
            "config error: INFERENCE_RELEASE_ROOT='s3:///x': use s3://bucket[/prefix]",
        ),
        (
            {"INFERENCE_RELEASE_ROOT": "gs://b"},
            "INFERENCE_RELEASE_ROOT='gs://b': use s3://bucket[/prefix] or a local directory",
        ),
        (
            {"INFERENCE_MODEL_NAME": "GPT 2"},
            "INFERENCE_MODEL_NAME='GPT 2': use the --model-name given to python -m trainer.publish",
        ),
        (
            {"INFERENCE_PIN_VERSION": "latest"},
            "INFERENCE_PIN_VERSION='latest': use a version folder name such as",
        ),
        ({"INFERENCE_HTTP_PORT": "http"}, "config error: INFERENCE_HTTP_PORT='http': must be a whole number"),
        ({"INFERENCE_HTTP_PORT": "70000"}, "config error: INFERENCE_HTTP_PORT=70000: use a TCP port 1-65535"),
        ({"INFERENCE_POLL_INTERVAL_S": "0"}, "INFERENCE_POLL_INTERVAL_S=0.0: must be > 0 seconds"),
        ({"INFERENCE_DEVICE": "tpu"}, "INFERENCE_DEVICE='tpu': use one of auto, cpu, cuda"),
        ({"INFERENCE_DTYPE": "fp8"}, "INFERENCE_DTYPE='fp8': use one of auto, float32, bfloat16, float16"),
        ({"INFERENCE_MAX_BATCH": "0"}, "INFERENCE_MAX_BATCH=0: must be >= 1"),
        ({"INFERENCE_ACCESS_LOG": "maybe"}, "INFERENCE_ACCESS_LOG='maybe': use true or false"),
        (
            {"INFERENCE_MAX_NEW_TOKENS": "32"},
            "INFERENCE_DEFAULT_MAX_NEW_TOKENS=64: must be between 1 and INFERENCE_MAX_NEW_TOKENS=32",
        ),
        (
            {"INFERENCE_MAX_BATCHES": "8"},
            "INFERENCE_MAX_BATCHES='8': unknown setting; did you mean INFERENCE_MAX_BATCH?",
        ),
        (
            {"INFERENCE_HTTP_PROT": "8"},
            "INFERENCE_HTTP_PROT='8': unknown setting; did you mean INFERENCE_HTTP_PORT?",
        ),
        (
            {"INFERENCE_PORT": "9000"},
            "INFERENCE_PORT='9000': the listen port is INFERENCE_HTTP_PORT (INFERENCE_PORT is the name",
        ),
    ],
)
def test_bad_settings_are_one_line_naming_the_variable(env: dict[str, str | None], message: str) -> None:
    merged = {k: v for k, v in {**BASE, **env}.items() if v is not None}  # None: unset
    with pytest.raises(ConfigError) as err:
        ServerConfig.from_env(merged)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_kubernetes_service_links_of_a_service_named_inference_are_ignored() -> None:
    """enableServiceLinks (default true) injects these for a Service called "inference"."""
    links = {
        "INFERENCE_SERVICE_HOST": "10.100.0.7",
        "INFERENCE_SERVICE_PORT": "80",
        "INFERENCE_SERVICE_PORT_HTTP": "80",
        "INFERENCE_PORT": "tcp://10.100.0.7:80",
        "INFERENCE_PORT_80_TCP": "tcp://10.100.0.7:80",
        "INFERENCE_PORT_80_TCP_PROTO": "tcp",
        "INFERENCE_PORT_80_TCP_PORT": "80",
        "INFERENCE_PORT_80_TCP_ADDR": "10.100.0.7",
    }
    cfg = ServerConfig.from_env({**BASE, **links})
    assert cfg.http_port == 8080 and cfg.host == "0.0.0.0"
