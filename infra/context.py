"""What every wiring function needs: the validated config, the AWS facts, names, provider and exports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws

from infra.core.facts import AccountFacts, RegionFacts
from infra.core.naming import StackNames

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


@dataclass
class StackContext:
    """One stack's inputs to the wiring, and the outputs the wiring collects for ``pulumi.export``."""

    cfg: PlatformConfig
    facts: RegionFacts
    account: AccountFacts
    provider: aws.Provider
    exports: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> StackNames:
        return self.cfg.names

    @property
    def in_region(self) -> pulumi.ResourceOptions:
        """Options that put a resource on the stack's AWS provider (its region and default tags)."""
        return pulumi.ResourceOptions(provider=self.provider)

    def export(self, key: str, value: Any) -> None:
        if key in self.exports:
            raise ValueError(f"stack output {key!r} is exported twice")
        self.exports[key] = value
