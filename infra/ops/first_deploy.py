"""What a stack's first deploy needs before its whole program can go up (docs/how-to/image-cache.md,
docs/deploy.md "Deploy, region by region").

1. The copy area's ECR creation template, alone: a targeted up (``--target``, exact URNs) of the template and
   everything it depends on (its role and policy, the data key, their providers and parents), read from the
   stack's offline plan. Pulumi creates nothing outside the targets and refuses a target whose dependency is
   neither targeted nor there (https://www.pulumi.com/docs/iac/guides/basics/targeted-updates/).
2. ``aiplat images copy --stack S``: the images no pull through cache rule takes, into that area.
3. The rest. A private endpoint (``kubernetes_access: in_vpc``) cannot be reached before its VPC exists, so
   from outside the VPC the rest is the AWS side only: the program run with a copy of the stack file that says
   ``kubernetes_access: skip`` (``pulumi up --config-file``), the cluster services in a later run from inside
   the VPC (docs/how-to/reach-the-cluster.md).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from infra.core.config import KubernetesAccess
from infra.io.stackfiles import project_root, stack_file
from infra.mirror.documents import Placement, placement
from infra.mirror.rules import layout, stack_pins
from infra.ops.rollout import FirstDeploy, GateCheck, ImageCopier, Pass
from infra.schema.platform import PlatformConfig

COPY_TEMPLATE = ("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate", "-copy-template")
ROOT_TYPE = "pulumi:pulumi:Stack"
# `aiplat` as this process runs it (infra/cli/main.py has a __main__)
AIPLAT: tuple[str, ...] = (sys.executable, "-m", "infra.cli.main")


def copies_images(cfg: PlatformConfig) -> bool:
    """The stack's charts run an image of a registry no pull through cache rule takes (its copy area)."""
    cache = layout(cfg)
    return any(placement(cache, pin.image).kind is Placement.copied for pin in stack_pins(cfg))


def _urn(reference: str) -> str:
    """A provider reference is ``<urn>::<id>``; the URN is everything before the last ``::``."""
    return reference.rsplit("::", 1)[0] if reference.count("::") > 3 else reference


def copy_area_targets(resources: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The URNs of the copy area's creation template and of everything it needs, from a plan's resources."""
    by_urn = {r["urn"]: r for r in resources}
    todo = [
        r["urn"] for r in resources if r["type"] == COPY_TEMPLATE[0] and r["name"].endswith(COPY_TEMPLATE[1])
    ]
    seen: set[str] = set()
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn or by_urn[urn]["type"] == ROOT_TYPE:
            continue
        seen.add(urn)
        r = by_urn[urn]
        todo.extend(r.get("dependencies") or [])
        todo.extend(u for urns in (r.get("propertyDependencies") or {}).values() for u in urns)
        todo.extend(_urn(x) for x in (r.get("parent"), r.get("provider")) if x)
    return tuple(sorted(seen))


def aws_side_file(stack: str, stacks_dir: Path | None, out_dir: Path) -> Path:
    """A copy of the stack file with ``cluster_services.kubernetes_access: skip`` (secrets and all else as
    they are), for ``pulumi up --config-file``."""
    doc = yaml.safe_load(stack_file(stack, stacks_dir).read_text())
    platform = doc["config"]["aiplat:platform"]
    platform.setdefault("cluster_services", {})["kubernetes_access"] = KubernetesAccess.skip.value
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"Pulumi.{stack}.aws-side.yaml"
    path.write_text(
        f"# written by aiplat rollout for the first, AWS-side pass of {stack}; do not edit\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )
    return path


class CommandCopier:
    """``ImageCopier`` running ``aiplat images copy --stack S`` (the same command an operator runs)."""

    def __init__(self, stacks_dir: Path | None = None, command: Sequence[str] | None = None) -> None:
        self.stacks_dir, self.command = stacks_dir, tuple(command or AIPLAT)

    def copy(self, stack: str) -> GateCheck:
        argv = [*self.command, "images", "copy", "--stack", stack]
        if self.stacks_dir is not None:
            argv += ["--stacks-dir", str(self.stacks_dir)]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=project_root(), check=False)
        tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        return GateCheck("images-copied", done.returncode == 0, tail or f"exit {done.returncode}")


def first_deploy(
    stack: str,
    cfg: PlatformConfig,
    plan_resources: Sequence[Mapping[str, Any]] | None,
    copier: ImageCopier,
    *,
    stacks_dir: Path | None,
    out_dir: Path,
) -> FirstDeploy:
    """The steps of ``stack``'s first deploy; ``plan_resources``: its offline plan (None: no copy area)."""
    targets = copy_area_targets(plan_resources) if plan_resources is not None else ()
    in_vpc = cfg.cluster_services.kubernetes_access is KubernetesAccess.in_vpc
    rest = (
        Pass("AWS side", config_file=str(aws_side_file(stack, stacks_dir, out_dir)))
        if in_vpc
        else Pass("rest of the stack")
    )
    return FirstDeploy(
        Pass("copy area", targets=targets), rest, copier, aws_side_only=in_vpc, copies=bool(targets)
    )
