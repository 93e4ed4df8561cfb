"""The project's stacks as data, for rules that look across stacks (replication targets, source stacks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StackSummary:
    """What other stacks may know of a stack: its role, region, environment, replication targets, the
    images it builds (or takes prebuilt) into its registry (``images.builds``), its VPC's CIDR and the
    train stack it takes artifacts from (``storage.source_stack``), its AWS account (``security.account.id``,
    empty when unset) and whether it may share that account with the other environment."""

    role: str
    region: str
    environment: str = ""
    replicate_to: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    vpc_cidr: str = ""
    source_stack: str = ""
    # infer stacks: what every stack serving one global name must agree on (infra/edge/rules.py
    # serving_terms), as (term, value) pairs; empty for train stacks and unreadable inference sections
    serving: tuple[tuple[str, str], ...] = ()
    account_id: str = ""
    allow_shared_account: bool = False


@dataclass(frozen=True)
class StackIndex:
    """Every stack of the project (the stack files in one folder), by name."""

    stacks: Mapping[str, StackSummary] = field(default_factory=dict)

    def inference_regions(self) -> dict[str, str]:
        """region -> infer stack, for the project's infer stacks."""
        return {s.region: name for name, s in sorted(self.stacks.items()) if s.role == "infer"}

    def train_stacks(self) -> list[str]:
        return [name for name, s in sorted(self.stacks.items()) if s.role == "train"]

    def others(self, stack: str) -> dict[str, StackSummary]:
        """Every stack but ``stack``, by name."""
        return {name: s for name, s in sorted(self.stacks.items()) if name != stack}


def exchange_artifacts(a_name: str, a: StackSummary, b_name: str, b: StackSummary) -> str | None:
    """Why stacks ``a`` and ``b`` work together (one replicates into the other's region, or names it as
    its source stack), or None when they do not."""
    for (x_name, x), (y_name, y) in (((a_name, a), (b_name, b)), ((b_name, b), (a_name, a))):
        if y.source_stack == x_name:
            return f"{y_name} takes its artifacts from {x_name} (storage.source_stack)"
        if x.role == "train" and y.role == "infer" and y.region in x.replicate_to:
            return f"{x_name} replicates its artifacts to {y_name}'s region {y.region}"
    return None
