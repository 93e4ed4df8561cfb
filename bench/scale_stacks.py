"""Generated stack folders for the scale benchmark (bench/plan_scale.py) and the 200-team test: copies of the
shipped stacks with more teams, or more stacks, in a temporary folder. Nothing generated here is shipped.

A generated team is what a team of the platform asks for at most: a GPU quota in the train pool's cohort, its
own ECR repository pushed by its CI role, releases, and one member; so every per-team grant, object and
document of the platform grows with the count.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

from infra.queueing.config import MAX_RELEASING_TEAMS

REPO = Path(__file__).resolve().parents[1]
STACKS = REPO / "stacks"
TRAIN_STACK = "prod-us-train"
PACK_CONFIGS = "policy-pack"  # <stacks folder>/policy-pack/<stack>.json (infra/io/policypack.py)
ACCOUNT = "123456789012"  # the account of the shipped stacks' ARNs (AWS's documentation example)


def _read(stack: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())


# Team names take the schema's longest (30 characters): every per-team name in a document is as long as it
# can be.
_PAD = "-scale-benchmark-generated-team"


def generated_team(i: int, *, releases: bool) -> tuple[str, dict[str, Any]]:
    """Team ``i`` (unique name ``t<i>-...``, 30 characters): no nominal GPUs (the pool's GPUs are the shipped
    teams'), borrows up to one node, pushes one repository from its CI role, has one engineer role, and
    ``releases``."""
    name = f"t{i:03d}{_PAD}"[:30]
    return name, {
        "quotas": {"train": {"gpus": 0, "borrowing_limit": 8}},
        "priority_classes": ["research", "dev"],
        "default_priority": "research",
        "registry": {
            "repositories": ["byo"],
            "ci_assumed_by": [f"arn:aws:iam::{ACCOUNT}:role/{name}-ci-runner"],
        },
        "releases": releases,
        "members": {"engineers": f"arn:aws:iam::{ACCOUNT}:role/{name}-engineers"},
    }


def train_stack_doc(teams: int) -> dict[str, Any]:
    """prod-us-train with ``teams`` teams in all: its own, then generated ones (as many releasing as the
    schema allows, infra/queueing/config.py)."""
    doc = copy.deepcopy(_read(TRAIN_STACK))
    platform = doc["config"]["aiplat:platform"]
    own = platform["teams"]
    if teams < len(own):
        raise ValueError(f"teams={teams}: {TRAIN_STACK} already has {len(own)}")
    i = 0
    while len(own) < teams:
        releasing = sum(1 for t in own.values() if t.get("releases"))
        name, team = generated_team(i, releases=releasing < MAX_RELEASING_TEAMS)
        own[name] = team
        i += 1
    return doc


def write_stack(folder: Path, stack: str, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def shipped_stacks() -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS.glob("Pulumi.*.yaml"))


def write_train_folder(folder: Path, teams: int) -> str:
    """The shipped stacks (the train stack's cross-stack rules read its inference regions' stacks), with
    prod-us-train holding ``teams`` teams. Returns the train stack's name."""
    for stack in shipped_stacks():
        write_stack(folder, stack, train_stack_doc(teams) if stack == TRAIN_STACK else _read(stack))
    copy_pack_configs(folder)
    return TRAIN_STACK


def copy_pack_configs(folder: Path, stacks: list[str] | None = None) -> None:
    """The shipped stacks' policy pack configs (their GPU budget and cost cap), which ``aiplat review`` reads
    beside the stack files."""
    (folder / PACK_CONFIGS).mkdir(parents=True, exist_ok=True)
    for path in sorted((STACKS / PACK_CONFIGS).glob("*.json")):
        if stacks is None or path.stem in stacks:
            shutil.copyfile(path, folder / PACK_CONFIGS / path.name)


FOLDER_STACK = "dev-us-train"  # the stack the folder benchmark plans alone and among others


def clone_name(i: int) -> str:
    return f"scale{i:02d}-us-train"


def clone_doc(i: int) -> dict[str, Any]:
    """dev-us-train as another team's stack in the same account and region: its own name prefix (so its
    own names), VPC range, and none of the settings one stack per account and region owns."""
    doc = copy.deepcopy(_read(FOLDER_STACK))
    platform = doc["config"]["aiplat:platform"]
    platform["name_prefix"] = f"sc{i:02d}"
    platform["network"]["vpc_cidr"] = f"10.{100 + i}.0.0/16"
    security = platform.setdefault("security", {})
    security["ebs_encryption_by_default"] = False
    security.setdefault("audit", {})["guardduty"] = False
    return doc


def write_stacks_folder(folder: Path, stacks: int) -> list[str]:
    """The shipped stacks and copies of dev-us-train (``clone_doc``), ``stacks`` in all."""
    names = shipped_stacks()
    for stack in names:
        write_stack(folder, stack, _read(stack))
    i = 0
    while len(names) < stacks:
        names.append(clone_name(i))
        write_stack(folder, clone_name(i), clone_doc(i))
        i += 1
    copy_pack_configs(folder)
    return names


def write_alone_folder(folder: Path) -> str:
    """dev-us-train alone in its folder."""
    write_stack(folder, FOLDER_STACK, _read(FOLDER_STACK))
    copy_pack_configs(folder, [FOLDER_STACK])
    return FOLDER_STACK
