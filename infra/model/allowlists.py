"""What the policy pack allows by default: the regions of each stack role, the replication regions and the
instance types of each stack. Pure data, one source: the pack's config defaults
(``policies/aiplat_policies/residency.py``, ``capacity.py``) and the warnings of ``aiplat plan``
(``infra/rules/allowlists.py``) read these. A ``--policy-pack-config`` file may change them for a review
(``docs/policy-pack.md``, "Allowlists").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence

# Stack role -> the regions its resources may be created in (pack: data-residency-regions.allowedRegions).
# Training data stays in the US and the EU; inference serves from Hong Kong and Singapore.
REGIONS_BY_ROLE: Mapping[str, tuple[str, ...]] = {
    "train": ("us-east-1", "us-west-2", "eu-west-1"),
    "infer": ("ap-east-1", "ap-southeast-1"),
}
# Where artifacts and images may be replicated to, and train stacks may create replicas
# (pack: data-residency-regions.replicationRegions, data-residency-replication.replicationRegions).
REPLICATION_REGIONS: tuple[str, ...] = ("ap-east-1", "ap-southeast-1")

# Stack name -> allowed instance types (shell patterns), "*" for any other stack
# (pack: instance-type-allowlist.allowedInstanceTypes). The GPU families follow each stack file's node pools
# and Karpenter instance_families (prod-sg-infer keeps p4de as the fallback when g4dn is short there,
# stacks/Pulumi.prod-sg-infer.yaml); training types only in train stacks.
INSTANCE_TYPES_BY_STACK: Mapping[str, tuple[str, ...]] = {
    "dev-us-train": ("m6i.*", "g4dn.*", "g5.*", "g6.*"),
    "prod-us-train": ("m6i.*", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge"),
    "prod-hk-infer": ("m6i.*", "g4dn.*", "g5.*", "g6.*", "g6e.*"),
    "prod-sg-infer": ("m6i.*", "g4dn.*", "g5.*", "g6.*", "g6e.*", "p4de.24xlarge"),
    "*": (
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
    ),
}


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


def instance_types_for(stack: str) -> tuple[str, ...]:
    """The instance-type patterns allowed in ``stack`` (its own entry, else ``"*"``)."""
    return INSTANCE_TYPES_BY_STACK.get(stack, INSTANCE_TYPES_BY_STACK["*"])


def type_allowed(itype: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(itype, p) for p in patterns)


def as_json(table: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """A table as the pack's config schema default (JSON lists)."""
    return {k: list(v) for k, v in table.items()}
