"""The project's stacks as data, for rules that look across stacks (replication targets, source stacks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StackSummary:
    """What other stacks may know of a stack: its role, region, environment, replication targets and the
    images it builds (or takes prebuilt) into its registry (``images.builds``)."""

    role: str
    region: str
    environment: str = ""
    replicate_to: tuple[str, ...] = ()
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackIndex:
    """Every stack of the project (the stack files in one folder), by name."""

    stacks: Mapping[str, StackSummary] = field(default_factory=dict)

    def inference_regions(self) -> dict[str, str]:
        """region -> infer stack, for the project's infer stacks."""
        return {s.region: name for name, s in sorted(self.stacks.items()) if s.role == "infer"}

    def train_stacks(self) -> list[str]:
        return [name for name, s in sorted(self.stacks.items()) if s.role == "train"]
