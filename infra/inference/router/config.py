"""Config of the model-name router (``inference.router``): vllm-project/router (PyPI ``vllm-router``, Rust) in
front of the vLLM servers, one entry point that sends each request to the backend serving its ``model``.
Why this router: docs/inference/router.md."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from infra.core.config import CPU_QUANTITY, Strict
from infra.inference.config import SIZE, ImageConfig

# PyPI vllm-router 0.1.17 (vllm-project/router, released 2026-11; the newest on 2026-12-06). The image
# (images/router/requirements.txt) and the test environment (pyproject's dev extra) install this version;
# tests/infra/inference/router/test_pins.py holds the three to one another.
VLLM_ROUTER_VERSION = "0.1.17"


class RouterImageConfig(ImageConfig):
    """The router image (see ImageConfig): by default the train stack's build of images/router/Dockerfile,
    replicated to this region by ECR and run by digest."""

    repository: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = Field(
        "router", description="Repository of the train stack (a name in its registry.repositories)."
    )


class RouterPolicy(StrEnum):
    """vllm-router ``--policy`` among the workers of one model: ``cache_aware`` (prefix-cache-aware: a prompt
    goes where its prefix was sent before, unless the load is unbalanced; the router's default),
    ``round_robin`` or ``power_of_two`` (the less loaded of two)."""

    cache_aware = "cache_aware"
    round_robin = "round_robin"
    power_of_two = "power_of_two"


class RouterConfig(Strict):
    """The router: at least two replicas on the system pools, spread over zones, behind the ALB."""

    version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")] = Field(
        VLLM_ROUTER_VERSION,
        description="vllm-router release of the image (images/router/requirements.txt), stated here so a "
        "stack file says what it runs; only the pinned one is accepted. PyPI vllm-router 0.1.17, the newest "
        "on 2026-12-06.",
    )
    image: RouterImageConfig = Field(
        default_factory=lambda: RouterImageConfig(),
        description="The router image: by default the train stack's build of images/router/Dockerfile "
        "(repository router), replicated to this region by ECR.",
    )
    replicas: Annotated[int, Field(ge=2, le=20)] = Field(
        2, description="Router pods (at least two, spread over zones; a PodDisruptionBudget keeps one)."
    )
    policy: RouterPolicy = Field(RouterPolicy.cache_aware, description="--policy (see RouterPolicy).")
    cpu: Annotated[str, Field(pattern=CPU_QUANTITY)] = Field("1", description="CPU request per pod.")
    memory: Annotated[str, Field(pattern=SIZE)] = Field(
        "1Gi", description="Memory request and limit per pod (the cache-aware prefix trees live here)."
    )
    health_check_interval_s: Annotated[int, Field(ge=1, le=300)] = Field(
        10,
        description="--health-check-interval-secs: how often the router asks each backend's /health; "
        "--health-failure-threshold (3) failures take it out (the router's default interval is 60).",
    )

    @field_validator("version")
    @classmethod
    def _pinned(cls, v: str) -> str:
        if v != VLLM_ROUTER_VERSION:
            raise ValueError(
                f"{v!r}: the router image installs vllm-router {VLLM_ROUTER_VERSION} "
                "(images/router/requirements.txt); set that, or change the image's pin, this default and the "
                "test environment's pin (pyproject.toml) together"
            )
        return v
