"""Files the policy review reads: the pack's folder and PulumiPolicy.yaml, a policy pack config file (each
stack's own, ``stacks/policy-pack/<stack>.json``, or one given on the command line), and saved plans
(``build/plan/<stack>.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import ReviewInputError
from infra.io.stackfiles import default_stacks_dir, display_path, project_root
from infra.stack.allowlists import PackAllowlists

PACK_DIR = "policies"
# A stack's pack settings: the --policy-pack-config document of `pulumi preview -s <stack>`, in a folder of
# the stacks folder (docs/policy-pack.md, "Per-stack settings").
STACK_PACK_CONFIG_DIR = "policy-pack"


def default_pack_dir() -> Path:
    """The project's policy pack: ``policies/`` next to ``Pulumi.yaml``."""
    return project_root() / PACK_DIR


@dataclass(frozen=True)
class PackProject:
    """What ``PulumiPolicy.yaml`` says: the version the engine reports and the pack's virtualenv."""

    folder: Path
    version: str
    description: str
    virtualenv: str | None

    @property
    def venv_python(self) -> Path | None:
        """The Python of the pack's own virtualenv (what the Pulumi CLI runs the pack with)."""
        return self.folder / self.virtualenv / "bin" / "python" if self.virtualenv else None


def read_pack_project(folder: Path) -> PackProject:
    path = folder / "PulumiPolicy.yaml"
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReviewInputError(f"{path}: cannot read the policy pack project ({exc})") from None
    runtime = doc.get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    return PackProject(
        folder=folder,
        version=str(doc.get("version") or "0.0.1"),
        description=str(doc.get("description") or ""),
        virtualenv=options.get("virtualenv") if isinstance(options, dict) else None,
    )


def read_json(path: Path, what: str) -> Any:
    """A JSON document (a saved plan, a policy pack config); one-line errors."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ReviewInputError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    except ValueError as exc:
        raise ReviewInputError(f"{path}: the {what} is not JSON ({exc})") from None


def stack_pack_config_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """``<stacks folder>/policy-pack/<stack>.json``: the pack config a review of ``stack`` uses."""
    return (stacks_dir or default_stacks_dir()) / STACK_PACK_CONFIG_DIR / f"{stack}.json"


def read_stack_pack_config(stack: str, stacks_dir: Path | None = None) -> dict[str, Any] | None:
    """The stack's pack config file, None when it has none (the pack's defaults apply)."""
    path = stack_pack_config_file(stack, stacks_dir)
    if not path.exists():
        return None
    doc = read_json(path, "policy pack config")
    if not isinstance(doc, dict):
        raise ReviewInputError(
            f"{display_path(path)}: the policy pack config is {type(doc).__name__}, not an object; fix: "
            'write {"<policy>": {"<property>": value}} as for pulumi preview --policy-pack-config'
        )
    return doc


def stack_allowlists(stack: str, stacks_dir: Path | None = None) -> PackAllowlists:
    """What the pack will allow ``stack``: the defaults with its pack config file on top."""
    path = stack_pack_config_file(stack, stacks_dir)
    return PackAllowlists.from_pack_config(read_stack_pack_config(stack, stacks_dir), display_path(path))


def read_plan(path: Path) -> dict[str, Any]:
    """A plan written by ``aiplat plan`` (checked for the keys the review needs)."""
    doc = read_json(path, "plan")
    missing = [
        k
        for k in ("stack", "project", "config", "resources", "outputs")
        if not isinstance(doc, dict) or k not in doc
    ]
    if missing:
        raise ReviewInputError(f"{path}: not a plan written by 'aiplat plan' (missing {missing})")
    return doc
