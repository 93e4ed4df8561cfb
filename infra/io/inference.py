"""The inference API keys, read where the program runs: the Pulumi secret ``aiplat:inference-api-keys``."""

from __future__ import annotations

from typing import Any

import pulumi

from infra.core.project import CONFIG_NAMESPACE
from infra.inference.config import API_KEYS_SECRET


def inference_api_keys() -> pulumi.Output[Any]:
    """The secret JSON list of API keys (``pulumi config set --secret aiplat:inference-api-keys
    '["<key1>", "<key2>"]'``); ``pulumi up`` stops with Pulumi's own "missing required configuration"
    message, naming the key, when it is not set. Its shape is checked where it becomes the Kubernetes
    Secret (``infra/inference/documents/inference.py`` api_keys_secret_data)."""
    return pulumi.Config(CONFIG_NAMESPACE).require_secret_object(API_KEYS_SECRET)
