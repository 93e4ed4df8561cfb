"""The project's operations config, ``rollout.yaml`` at the repository root. Pure.

One state backend and one secrets provider for every stack (infer stacks read the train stack's outputs
through ``pulumi.StackReference``, which cannot cross backends), the policy packs every preview runs with,
the order stacks roll out in per environment (waves: a wave's stacks may go in parallel, the next wave
starts when the whole wave is healthy), and what the health gate after each stack checks.
Read by ``infra/io/rollout_config.py``; used by ``aiplat rollout`` and ``aiplat preflight``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, field_validator

from infra.core.config import Environment, Role, Strict
from infra.core.errors import ConfigError, ConfigErrors

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

ROLLOUT_FILE = "rollout.yaml"

# Backends the Pulumi CLI logs in to: https://www.pulumi.com/docs/iac/concepts/state-and-backends/
BACKEND_PATTERN = r"^(s3|gs|azblob|file|https)://\S+$"
# Secrets providers: https://www.pulumi.com/docs/iac/concepts/secrets/ (awskms://alias/x?region=r, ...)
SECRETS_PATTERN = r"^(passphrase|default|(awskms|gcpkms|azurekeyvault|hashivault)://\S+)$"


class HealthGateConfig(Strict):
    """What must hold after ``pulumi up`` of a stack before the rollout goes on."""

    required_outputs: list[str] = Field(
        default_factory=lambda: ["region", "clusterName", "clusterEndpoint", "nodeGroups", "vpcId"],
        description="Stack outputs every stack must have after up (names as the program exports them).",
    )
    nodes_ready_timeout_s: Annotated[int, Field(ge=0, le=7200)] = Field(
        900, description="How long to wait for the node groups to be ACTIVE and their nodes Ready (seconds)."
    )
    poll_interval_s: Annotated[float, Field(gt=0, le=300)] = Field(
        15, description="Seconds between readiness checks."
    )
    inference_url_output: str = Field(
        "inferenceUrl",
        description="Infer stacks: the stack output holding the inference endpoint's base URL.",
    )
    inference_health_path: str = Field(
        "/v1/models",
        description="Infer stacks: the path the gate asks with an API key through the ALB; it must answer "
        "200 with the model-name router's list naming every served name of inference.models (the gate "
        "then asks each for a one-token completion).",
    )
    inference_key_output: str = Field(
        "inferenceGateKey",
        description="Infer stacks: the secret stack output holding the API key the gate presents.",
    )
    http_timeout_s: Annotated[float, Field(gt=0, le=120)] = Field(
        10, description="Timeout of one health-check request (seconds)."
    )

    @field_validator("inference_health_path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"{v!r} is not a URL path; start it with '/'")
        return v


class EnvironmentRollout(Strict):
    """The waves of one environment: each wave a list of stack names that may deploy in parallel."""

    waves: list[Annotated[list[str], Field(min_length=1)]] = Field(
        min_length=1, description="Waves in order; a wave's stacks go in parallel."
    )


class RolloutConfig(Strict):
    """``rollout.yaml``: backend, secrets provider, policy packs, waves per environment, health gate."""

    backend_url: Annotated[str, Field(pattern=BACKEND_PATTERN)] = Field(
        description="The one Pulumi state backend of every stack, e.g. 's3://<bucket>/aiplat?region=us-east-1'."
    )
    secrets_provider: Annotated[str, Field(pattern=SECRETS_PATTERN)] = Field(
        description="Secrets provider for new stacks, e.g. 'awskms://alias/aiplat-pulumi?region=us-east-1'."
    )
    policy_packs: list[str] = Field(
        default_factory=lambda: ["policies"],
        description="Policy pack folders (relative to the repository root) every preview and up runs with.",
    )
    environments: dict[Environment, EnvironmentRollout] = Field(
        default_factory=dict,
        description="Waves per environment; an environment not listed rolls out its train stacks, then its "
        "infer stacks in parallel.",
    )
    health: HealthGateConfig = Field(default_factory=lambda: HealthGateConfig())


def _field(env: Environment, *parts: object) -> str:
    return ".".join([f"{ROLLOUT_FILE}: environments", env.value, *(str(p) for p in parts)])


def _global_name(cfg: PlatformConfig) -> str | None:
    """The global endpoint an infer stack serves (``inference.global_endpoint.name``), if any."""
    ge = cfg.inference.global_endpoint if cfg.inference is not None else None
    return ge.name if ge is not None else None


def _owns_validation(name: str, cfg: PlatformConfig) -> bool:
    ge = cfg.inference.global_endpoint if cfg.inference is not None else None
    return ge is not None and ge.validation_record_owner == name


def _split_global(waves: list[list[str]], stacks: Mapping[str, PlatformConfig]) -> list[list[str]]:
    """The waves with every second (third...) stack serving one global endpoint moved to a wave of its
    own after them: ``aiplat rollout`` drains a region from it during its update, and another region must
    answer meanwhile."""
    out: list[list[str]] = []
    for wave in waves:
        first: list[str] = []
        later: list[list[str]] = []
        names: set[str] = set()
        # the validation record's owner first: the others' certificates wait for its record
        for name in sorted(wave, key=lambda n: not _owns_validation(n, stacks[n])):
            global_name = _global_name(stacks[name])
            if global_name is None or global_name not in names:
                first.append(name)
                if global_name:
                    names.add(global_name)
            else:
                later.append([name])
        out.extend([first, *later])
    return out


def plan_waves(
    rollout: RolloutConfig, env: Environment, stacks: Mapping[str, PlatformConfig]
) -> list[list[str]]:
    """The waves of ``env``, checked against the project's stacks.

    Every stack of the environment is in exactly one wave, no wave names a stack of another environment or
    one that does not exist, an infer stack comes after its ``storage.source_stack`` (it reads that
    stack's outputs), and no wave holds two stacks of one global endpoint. Without an entry for ``env``:
    its train stacks, then its infer stacks (one wave per region of a global endpoint).
    """
    mine = {name: cfg for name, cfg in sorted(stacks.items()) if cfg.environment == env}
    if env not in rollout.environments:
        by_role = [[n for n, c in mine.items() if c.role == role] for role in (Role.train, Role.infer)]
        waves = [w for w in _split_global(by_role, mine) if w]
        if not waves:
            raise ConfigErrors([ConfigError(_field(env), f"no stack has environment {env.value}", None)])
        return waves
    waves = [list(w) for w in rollout.environments[env].waves]
    errors: list[ConfigError] = []
    seen: dict[str, int] = {}
    for i, wave in enumerate(waves):
        for name in wave:
            where = _field(env, "waves", i)
            if name in seen:
                errors.append(
                    ConfigError(where, f"{name!r} is already in waves.{seen[name]}", "list it once")
                )
            elif name not in stacks:
                known = ", ".join(mine) or "none"
                errors.append(ConfigError(where, f"no stack {name!r}", f"use stacks of {env.value}: {known}"))
            elif stacks[name].environment != env:
                errors.append(
                    ConfigError(
                        where,
                        f"{name!r} is a {stacks[name].environment.value} stack",
                        f"move it to environments.{stacks[name].environment.value}",
                    )
                )
            seen.setdefault(name, i)
    for name in mine:
        if name not in seen:
            errors.append(ConfigError(_field(env, "waves"), f"{name!r} is in no wave", "add it to a wave"))
    for i, wave in enumerate(waves):
        by_name: dict[str, list[str]] = {}
        for name in wave:
            global_name = _global_name(stacks[name]) if name in stacks else None
            if global_name:
                by_name.setdefault(global_name, []).append(name)
        for global_name, names in sorted(by_name.items()):
            if len(names) > 1:
                errors.append(
                    ConfigError(
                        _field(env, "waves", i),
                        f"{' and '.join(names)} both serve the global endpoint {global_name} in one wave: "
                        "draining both at once leaves no region to answer it",
                        "put each of them in a wave of its own",
                    )
                )
    for name, wave in seen.items():
        cfg = stacks.get(name)
        ge = cfg.inference.global_endpoint if cfg is not None and cfg.inference is not None else None
        owner = ge.validation_record_owner if ge is not None else None
        if owner and owner != name and owner in seen and seen[owner] > wave:
            errors.append(
                ConfigError(
                    _field(env, "waves", wave),
                    f"{name!r} waits for the certificate validation record of {ge.name} that {owner!r} "
                    f"declares, but {owner} rolls out later (waves.{seen[owner]})",
                    f"put {owner} in a wave before {name}'s",
                )
            )
    for name, wave in seen.items():
        source = stacks[name].storage.source_stack if name in stacks else None
        if source and source in seen and seen[source] >= wave:
            errors.append(
                ConfigError(
                    _field(env, "waves", wave),
                    f"{name!r} reads {source!r}'s outputs but is not in a later wave",
                    f"put {name} in a wave after {source}'s (waves.{seen[source]})",
                )
            )
    if errors:
        raise ConfigErrors(errors)
    return waves
