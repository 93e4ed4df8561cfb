"""Checks of a validated config against AWS facts, run before any cloud resource is declared.

Pure: the facts come in as data. Under ``pulumi up`` they are fetched from the AWS API through the
provider's data sources (``infra/facts.py``); under ``aiplat plan`` the same data sources are answered
from the AWS snapshot bundled in moto.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from infra.awsdata import AvailabilityZone, InstanceFacts
from infra.config.loader import CONFIG_KEY
from infra.config.schema import PlatformConfig
from infra.errors import ConfigError


@dataclass(frozen=True)
class RegionFacts:
    """What AWS says about the stack's region, limited to what the config refers to."""

    region: str
    zones: tuple[AvailabilityZone, ...]
    # availability zone name -> instance types (of those the config names) offered there
    offerings: dict[str, frozenset[str]]
    instances: dict[str, InstanceFacts]
    # every instance type offered in the region; only fetched when a named type is not offered
    region_types: frozenset[str] = frozenset()

    def azs_offering(self, instance_type: str) -> tuple[str, ...]:
        return tuple(az for az, types in sorted(self.offerings.items()) if instance_type in types)

    @property
    def zone_names(self) -> tuple[str, ...]:
        return tuple(z.name for z in self.zones)


def field(*parts: str) -> str:
    return ".".join([CONFIG_KEY, *parts])


def check_against_facts(cfg: PlatformConfig, facts: RegionFacts) -> list[ConfigError]:
    """Every problem the facts reveal, each naming its field, value and fix."""
    errors: list[ConfigError] = []
    if cfg.network.az_count > len(facts.zones):
        errors.append(
            ConfigError(
                field("network", "az_count"),
                f"{cfg.network.az_count} zones asked for but {cfg.region} has {len(facts.zones)}",
                f"set az_count to at most {len(facts.zones)}",
            )
        )
    for name, pool in cfg.node_pools.items():
        where = field("node_pools", name, "instance_type")
        azs = facts.azs_offering(pool.instance_type)
        if not azs:
            close = difflib.get_close_matches(pool.instance_type, sorted(facts.region_types), n=3, cutoff=0.5)
            fix = (
                f"use one offered there, e.g. {', '.join(close)}"
                if close
                else "pick a type offered in the region"
            )
            errors.append(ConfigError(where, f"{pool.instance_type!r} is not offered in {cfg.region}", fix))
            continue
        itype = facts.instances[pool.instance_type]
        if pool.gpu and not itype.has_gpus:
            errors.append(
                ConfigError(
                    field("node_pools", name, "gpu"),
                    f"true but {pool.instance_type} has no GPUs",
                    "use a GPU instance type (g5, g6, p4d, p5, ...) or set gpu: false",
                )
            )
        if not pool.gpu and itype.has_gpus:
            errors.append(
                ConfigError(
                    field("node_pools", name, "gpu"),
                    f"false but {pool.instance_type} has {itype.gpu_count} GPUs",
                    "set gpu: true or use a CPU instance type for a system pool",
                )
            )
    return errors
