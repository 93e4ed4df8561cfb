"""Typed stack configuration: one schema for every stack file, and its parser (one-line errors)."""

from infra.stack.parse import parse_platform_config
from infra.stack.schema import CapacityType, Environment, NodePoolConfig, PlatformConfig, Role

__all__ = [
    "CapacityType",
    "Environment",
    "NodePoolConfig",
    "PlatformConfig",
    "Role",
    "parse_platform_config",
]
