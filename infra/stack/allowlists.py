"""What the policy pack allows by default: the regions of each stack role, the replication regions and the
instance types of a stack. Pure data, one source: the pack's config defaults
(``policies/aiplat_policies/residency.py``, ``capacity.py``) and the warnings of ``aiplat plan``
(``infra/stack/allowlist_rules.py``) read these, and both apply a stack's pack config file on top
(``PackAllowlists``; ``docs/policy-pack.md``, "Allowlists").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.core.errors import ReviewInputError

# Stack role -> the regions its resources may be created in (pack: data-residency-regions.allowedRegions).
# Training data stays in the US and the EU; inference serves from Hong Kong and Singapore.
REGIONS_BY_ROLE: Mapping[str, tuple[str, ...]] = {
    "train": ("us-east-1", "us-west-2", "eu-west-1"),
    "infer": ("ap-east-1", "ap-southeast-1"),
}
# Where artifacts and images may be replicated to, and train stacks may create replicas
# (pack: data-residency-regions.replicationRegions, data-residency-replication.replicationRegions).
REPLICATION_REGIONS: tuple[str, ...] = ("ap-east-1", "ap-southeast-1")

# The instance types (shell patterns) a stack may use when its pack config file names none
# (pack: instance-type-allowlist.allowedInstanceTypes). Each shipped stack narrows this to its own pools in
# stacks/policy-pack/<stack>.json (docs/policy-pack.md, "Per-stack settings").
INSTANCE_TYPES: tuple[str, ...] = (
    "m6i.*",
    "m7i.*",
    "c6i.*",
    "g4dn.*",
    "g5.*",
    "g6.*",
    "g6e.*",
    "p4d.24xlarge",
    "p5.48xlarge",
    "p5en.48xlarge",
)
# The GPUs a stack may run when its pack config file sets no budget (pack: gpu-budget.maxGpus; two 8-GPU
# nodes); the teams' quotas must fit in it too (rule 'team-quotas-within-gpu-budget').
DEFAULT_GPU_BUDGET = 16
GPU_BUDGET_POLICY = "gpu-budget"
# The pack's policy and property names these allowlists are configured by.
REGIONS_POLICY, REPLICATION_POLICY, INSTANCE_TYPES_POLICY = (
    "data-residency-regions",
    "data-residency-replication",
    "instance-type-allowlist",
)


@dataclass(frozen=True)
class PackAllowlists:
    """The allowlists a review applies to one stack: the defaults above, with what the stack's pack config
    (a ``--policy-pack-config`` document) sets on top, as the engine reconciles it."""

    regions_by_role: Mapping[str, Sequence[str]] = field(default_factory=lambda: dict(REGIONS_BY_ROLE))
    # the regions data-residency-regions lets a train stack's replicas live in
    replica_regions: Sequence[str] = REPLICATION_REGIONS
    # the targets data-residency-replication lets S3 and ECR replicate to
    replication_regions: Sequence[str] = REPLICATION_REGIONS
    instance_types: Sequence[str] = INSTANCE_TYPES
    # gpu-budget.maxGpus of the stack's pack config; None: it sets none (DEFAULT_GPU_BUDGET applies)
    max_gpus: float | None = None

    @classmethod
    def from_pack_config(cls, doc: Mapping[str, Any] | None, where: str = "pack config") -> PackAllowlists:
        """The allowlists of ``doc``; a value of the wrong shape raises ``ReviewInputError`` naming it."""
        doc = doc or {}

        def prop(policy: str, key: str, default: Any, ok: Callable[[Any], bool], shape: str) -> Any:
            section = doc.get(policy)
            if not isinstance(section, Mapping) or key not in section:
                return default
            if not ok(section[key]):
                raise ReviewInputError(
                    f"{where}: {policy}.{key} is {section[key]!r}; fix: give {shape} (docs/policy-pack.md)"
                )
            return section[key]

        return cls(
            regions_by_role=prop(
                REGIONS_POLICY, "allowedRegions", REGIONS_BY_ROLE, _is_table, "an object of role -> regions"
            ),
            replica_regions=prop(
                REGIONS_POLICY, "replicationRegions", REPLICATION_REGIONS, _is_names, "a list of regions"
            ),
            replication_regions=prop(
                REPLICATION_POLICY, "replicationRegions", REPLICATION_REGIONS, _is_names, "a list of regions"
            ),
            instance_types=prop(
                INSTANCE_TYPES_POLICY,
                "allowedInstanceTypes",
                INSTANCE_TYPES,
                _is_names,
                "a list of instance-type patterns",
            ),
            max_gpus=prop(GPU_BUDGET_POLICY, "maxGpus", None, _is_number, "a number"),
        )

    def regions_for(self, role: str) -> list[str]:
        """The regions a stack of ``role`` may create resources in (``allowed_regions``)."""
        return allowed_regions(role, self.regions_by_role, self.replica_regions)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and all(_is_names(v) for v in value.values())


def allowed_regions(
    role: str,
    by_role: Mapping[str, Sequence[str]] = REGIONS_BY_ROLE,
    replication: Sequence[str] = REPLICATION_REGIONS,
) -> list[str]:
    """The regions a stack of ``role`` may create resources in: its role's, and for a train stack also the
    replication regions (its replicas). The pack passes the tables of its config."""
    allowed = list(by_role.get(role, ()))
    if role == "train":
        allowed += [r for r in replication if r not in allowed]
    return allowed


def type_allowed(itype: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(itype, p) for p in patterns)


def as_json(table: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """A table as the pack's config schema default (JSON lists)."""
    return {k: list(v) for k, v in table.items()}
