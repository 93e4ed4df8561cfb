"""Typed stack configuration: one schema for every stack file under ``stacks/``."""

from infra.config.loader import CONFIG_KEY, load_stack_config, parse_platform_config, stack_file
from infra.config.schema import (
    CapacityType,
    Environment,
    NodePoolConfig,
    PlatformConfig,
    Role,
)

__all__ = [
    "CONFIG_KEY",
    "CapacityType",
    "Environment",
    "NodePoolConfig",
    "PlatformConfig",
    "Role",
    "load_stack_config",
    "parse_platform_config",
    "stack_file",
]
