"""What an infer stack serves, by name, as data: the served names' object names, where a model's release and
its LoRA adapters live in the pod, the table of served names a model-name router needs (``backends``), and
the rollout gate's reading of vLLM's ``/v1/models``. Pure, no Pulumi."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.inference.documents.inference import ServerSpec

# The prefix of every model's objects (its Deployment, Service, PDB, ScaledObject, HPA).
PREFIX = "inference"
# The port of every model's Service (named SERVICE_PORT_NAME in infra/inference/documents/inference.py).
SERVICE_PORT = 80
# The label every pod of one model carries (its value: the served name, a label value by SERVED_NAME).
MODEL_LABEL = "aiplat.io/model"
MODELS_DIR = "/models"
# Adapters: their own emptyDir mounted here, so the fetch tool's --dest parent exists.
ADAPTERS_DIR = f"{MODELS_DIR}/adapters"


@dataclass(frozen=True, kw_only=True)
class AdapterSpec:
    """A LoRA adapter release served by the base model's pods under ``served_name``."""

    served_name: str
    release_name: str
    release_version: str


@dataclass(frozen=True, kw_only=True)
class LoraSpec:
    """vLLM's LoRA flags of one base model."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int | None = None


def model_object_name(served_name: str) -> str:
    """The name of one model's Deployment, Service, PDB, ScaledObject and HPA: ``inference-<served name>``,
    a DNS-1035 label (what a Service name must be). A served name with '.' or '_', or too long, gets them
    replaced and an 8-hex digest of the name appended, so two served names never share objects."""
    base = re.sub(r"[^a-z0-9-]", "-", served_name)
    name = f"{PREFIX}-{base}"
    if base != served_name or len(name) > 63:
        digest = hashlib.sha256(served_name.encode()).hexdigest()[:8]
        name = f"{name[: 63 - 9].rstrip('-')}-{digest}"
    return name


def adapter_dir(served_name: str) -> str:
    """Where the init container puts an adapter and vLLM loads it from (``--lora-modules``)."""
    return f"{ADAPTERS_DIR}/{served_name}"


def model_dir(version: str) -> str:
    """Where the init container puts the release and vLLM loads it from (the version in the path: vLLM's
    ``/v1/models`` answers it as the model's ``root``)."""
    return f"{MODELS_DIR}/{version}"


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One name clients may send and where it is served: the router's table (infra/inference/router)."""

    served_name: str  # the OpenAI "model" a request names
    model: str  # the base model (key of inference.models) whose pods answer it
    adapter: bool  # a LoRA adapter on that base
    service: str  # the base's Service in the inference namespace
    port: int  # the Service's port (SERVICE_PORT, named SERVICE_PORT_NAME)


def backends(specs: Sequence[ServerSpec]) -> list[Backend]:
    """Every served name (bases and their adapters) -> its base's Service, in config order."""
    out = []
    for s in specs:
        service = model_object_name(s.served_model_name)
        out.append(Backend(served_name=s.served_model_name, model=s.served_model_name, adapter=False,
                           service=service, port=SERVICE_PORT))  # fmt: skip
        out += [
            Backend(
                served_name=a.served_name,
                model=s.served_model_name,
                adapter=True,
                service=service,
                port=SERVICE_PORT,
            )  # fmt: skip
            for a in s.adapters
        ]
    return out
