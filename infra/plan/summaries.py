"""What the cross-stack checks read of another stack's plan, kept on disk after each plan: the resources with
a physical name (``infra/plan/names.py``) and the outputs (what a StackReference reads).

``aiplat plan --stack X`` checks X's names against every other stack of its folder, and an infer stack reads
its source stack's outputs. Both came from a full run of those stacks' programs; with a summary of their
last plan that still matches what would be planned now, X costs its own program only. A summary matches
while its fingerprint does: the stack's file, its source stack's file (the outputs it reads), and the code
and data that make a plan (``infra/``, ``images/``, ``trainer/configs/``, the Pulumi SDK versions). Anything
else is planned afresh and its summary written. ``--all`` plans every stack anyway: each plan there is the
stack's own, and a summary is read only for a stack that is not part of the run.

Where: ``build/plan-cache/<stack>.json`` under the project (``AIPLAT_PLAN_CACHE`` to move it), replaced
atomically. The stacks' other files reach a plan only through the cross-stack rules, which refuse or warn
and change no name or output: a summary holds for the same stack file in any folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from infra.io.stackfiles import project_root, stack_file
from infra.plan.names import NAMES

if TYPE_CHECKING:
    from infra.plan.runner import Plan

CACHE_ENV = "AIPLAT_PLAN_CACHE"
# What a plan is made from besides the stack files: the program and its data, the Dockerfiles and build
# contexts its image tags hash, the trainer configs its runtime reads, and the SDKs that record it.
CODE_FOLDERS = ("infra", "images", "trainer/configs")
SDKS = ("pulumi", "pulumi-aws", "pulumi-kubernetes", "moto")
FORMAT = 1


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or project_root() / "build" / "plan-cache")


@functools.cache
def code_digest() -> str:
    """A hash of every file a plan is made from besides the stack files (once per process)."""
    root = project_root()
    digest = hashlib.sha256(f"format {FORMAT}\0".encode())
    for sdk in SDKS:
        try:
            digest.update(f"{sdk} {metadata.version(sdk)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{sdk} -\0".encode())
    for folder in CODE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _source_stack(path: Path) -> str | None:
    """The stack file's ``storage.source_stack`` (read without validating: a broken file has no summary to
    match anyway)."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
        platform = (doc.get("config") or {}).get("aiplat:platform") or {}
        return (platform.get("storage") or {}).get("source_stack")
    except (OSError, yaml.YAMLError, AttributeError):
        return None


def fingerprint(stack: str, stacks_dir: Path) -> str | None:
    """What ``stack``'s plan is made from, hashed; None when its file is missing."""
    own = stack_file(stack, stacks_dir)
    if not own.is_file():
        return None
    digest = hashlib.sha256(f"{code_digest()}\0{stack}\0".encode() + own.read_bytes())
    source = _source_stack(own)
    if source and (path := stack_file(source, stacks_dir)).is_file():
        digest.update(f"\0{source}\0".encode() + path.read_bytes())
    return digest.hexdigest()


def _path(stack: str) -> Path:
    # one file per stack name: the fingerprint, not the folder, says whether it matches (a copy of the
    # stacks folder with the same files reuses it)
    return cache_dir() / f"{stack}.json"


def write_summary(plan: Plan, stacks_dir: Path) -> None:
    """Keep ``plan``'s named resources and outputs for the next plan of another stack of ``stacks_dir``."""
    key = fingerprint(plan.stack, stacks_dir)
    if key is None:
        return
    doc = {
        "fingerprint": key,
        "stack": plan.stack,
        "project": plan.project,
        "region": plan.region,
        "resources": [r.as_json() for r in plan.resources if r.type in NAMES],
        "outputs": plan.outputs,
    }
    path = _path(plan.stack)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
    except OSError:
        pass  # a read-only checkout plans as before, only slower


def read_summary(stack: str, stacks_dir: Path) -> Plan | None:
    """The summary of ``stack``'s last plan as a Plan (named resources and outputs only), or None when there
    is none or it no longer matches (``fingerprint``)."""
    from infra.plan.runner import Plan, RecordedResource

    try:
        doc = json.loads(_path(stack).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("fingerprint") != fingerprint(stack, stacks_dir):
        return None
    resources = [
        RecordedResource(
            urn=r["urn"],
            type=r["type"],
            name=r["name"],
            parent=r["parent"],
            provider=r["provider"],
            custom=True,
            inputs=r["inputs"],
            dependencies=r["dependencies"],
            options=r["options"],
            property_dependencies=r["propertyDependencies"],
        )
        for r in doc["resources"]
    ]
    return Plan(
        stack=doc["stack"],
        project=doc["project"],
        region=doc["region"],
        config={},
        resources=resources,
        outputs=doc["outputs"],
    )
