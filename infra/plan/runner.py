"""Run the Pulumi program for one stack under mocks and record what it registers.

The program is the same function ``pulumi up`` runs (``infra.program.program``); here the engine is
Pulumi's ``MockMonitor``, extended to record each registration the way the engine receives it: type,
name, parent, provider, the inputs with the camelCase property names the provider would see, the
dependencies (explicit ``depends_on`` and those implied by inputs, as URNs) and the resource options the
engine acts on (protect, retainOnDelete, deleteBeforeReplace, ignoreChanges, replaceOnChanges,
additionalSecretOutputs), and the property dependencies (which resources each input was computed from: what
the engine hands a policy pack's stack analysis, known even where values are not).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import SETTINGS, set_root_resource
from pulumi.runtime.stack import run_in_stack

from infra.core import policy_quotas
from infra.core.config import Role
from infra.core.errors import ConfigError, ConfigErrors, PlatformError
from infra.core.project import CONFIG_KEY, DEFAULT_ORGANIZATION, PROJECT
from infra.edge.config import API_KEYS_KEY
from infra.edge.wire import API_KEYS_OUTPUT
from infra.inference.config import API_KEYS_SECRET
from infra.io.policypack import stack_allowlists
from infra.io.stackfiles import (
    default_stacks_dir,
    list_stacks,
    load_stack_config,
    read_stack_index,
    stack_file,
)
from infra.plan.mocks import AwsSnapshotMocks, FirstPreviewMocks
from infra.rules import Finding
from infra.schema.platform import PlatformConfig

SECRET = "[secret]"
# What the offline plan hands the program for a Pulumi secret the stack reads (Alertmanager receiver URLs,
# set with `pulumi config set --secret` for a real stack); it is marked secret, so it never reaches a plan.
PLAN_SECRET_VALUE = "https://plan.invalid/secret"


# The same for the inference API keys a train stack holds (aiplat:inference-api-keys, a JSON list).
def plan_api_keys(slots: int = 2) -> list[str]:
    """Placeholder API keys of the plan's config, shaped as the inference Secret requires (distinct, 32+
    characters)."""
    return [f"plan-placeholder-api-key-{i}".ljust(32, "x") for i in range(slots)]


def _scrub(value: Any) -> Any:
    """Plain JSON values; secrets replaced so that no secret reaches a plan file or a log; a value unknown
    at preview (first-preview plans only) as the engine's unknown sentinel, what a policy pack receives."""
    if isinstance(value, Unknown):
        return rpc.UNKNOWN
    if rpc.is_rpc_secret(value):
        if isinstance(rpc.unwrap_rpc_secret(value), Unknown):
            return rpc.UNKNOWN
        return SECRET
    if isinstance(value, dict):
        if rpc._special_sig_key in value:  # resource references, assets, archives
            sig = value[rpc._special_sig_key]
            if sig == rpc._special_resource_sig:
                return {"resourceRef": value.get("urn")}
            return {"special": sig}
        # sorted: the engine's property order varies between runs; plan files must diff cleanly
        return {k: _scrub(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


@dataclass
class RecordedResource:
    """One registration as the engine received it."""

    urn: str
    type: str
    name: str
    parent: str | None
    provider: str | None
    custom: bool
    inputs: dict[str, Any]
    # URNs this resource waits for: explicit depends_on and the resources its inputs come from.
    dependencies: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    # input property -> URNs of the resources its value came from
    # (RegisterResourceRequest.propertyDependencies)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "provider": self.provider,
            "inputs": self.inputs,
            "dependencies": self.dependencies,
            "propertyDependencies": self.property_dependencies,
            "options": self.options,
        }


def _options(request: Any) -> dict[str, Any]:
    """The resource options of a RegisterResourceRequest that the engine acts on (camelCase, as sent).

    A ReadResourceRequest has none of them: a read resource is never created, replaced or deleted.
    """
    if not hasattr(request, "deleteBeforeReplace"):
        return {}
    return {
        "protect": bool(request.protect),
        "retainOnDelete": bool(request.retainOnDelete),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "ignoreChanges": sorted(request.ignoreChanges),
        "replaceOnChanges": sorted(request.replaceOnChanges),
        "additionalSecretOutputs": sorted(request.additionalSecretOutputs),
    }


def _property_dependencies(request: Any) -> dict[str, list[str]]:
    """input -> sorted URNs it depends on, for the inputs that depend on any (none for a read)."""
    deps = getattr(request, "propertyDependencies", None) or {}
    return {key: sorted(set(deps[key].urns)) for key in sorted(deps) if deps[key].urns}


class RecordingMonitor(MockMonitor):
    """MockMonitor that keeps every registration and the stack's outputs."""

    def __init__(self, mocks: AwsSnapshotMocks):
        super().__init__(mocks)
        self.recorded: list[RecordedResource] = []
        self.stack_urn: str | None = None
        self.stack_outputs: dict[str, Any] = {}

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            self.stack_urn = response.urn
            return response
        self._record(request, response.urn, request.object, custom=bool(request.custom))
        return response

    def _record(self, request, urn: str, properties, *, custom: bool) -> None:
        self.recorded.append(
            RecordedResource(
                urn=urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                provider=request.provider or None,
                custom=custom,
                inputs=_scrub(rpc.deserialize_properties(properties)),
                dependencies=sorted(set(request.dependencies)),
                options=_options(request),
                property_dependencies=_property_dependencies(request),
            )
        )

    def ReadResource(self, request):  # noqa: N802 (gRPC method name)
        # Reads (a StackReference) are recorded like registrations: preview shows them as "read".
        response = super().ReadResource(request)
        self._record(request, response.urn, request.properties, custom=True)
        return response

    def RegisterResourceOutputs(self, request):  # noqa: N802
        if self.stack_urn is not None and request.urn == self.stack_urn:
            self.stack_outputs = _scrub(rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)


@dataclass
class Plan:
    """What one stack would create."""

    stack: str
    project: str
    region: str
    config: dict[str, Any]
    resources: list[RecordedResource]
    outputs: dict[str, Any]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # warnings and notes of the rules (errors stop the plan instead)
    findings: list[Finding] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "project": self.project,
            "region": self.region,
            "config": self.config,
            "resources": [r.as_json() for r in self.resources],
            "outputs": self.outputs,
        }

    def by_type(self, type_: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> RecordedResource:
        found = [r for r in self.resources if r.type == type_ and (name is None or r.name == name)]
        if len(found) != 1:
            raise LookupError(f"expected one {type_} {name or ''}, found {[r.name for r in found]}")
        return found[0]

    def children(self, parent_urn: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.parent == parent_urn]

    def type_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.resources:
            counts[r.type] = counts.get(r.type, 0) + 1
        return dict(sorted(counts.items()))


def config_as_json(cfg: PlatformConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json")


def plan_config(cfg: PlatformConfig) -> tuple[dict[str, str], list[str]]:
    """The Pulumi config the program reads under the plan, and which keys of it are secrets: the platform
    section, plus a placeholder for each Alertmanager receiver URL (``aiplat:alertmanager-<receiver>``,
    a Pulumi secret of the real stack) and, on infer stacks, placeholder API keys
    (``aiplat:inference-api-keys``, as many as ``inference.auth.api_key_slots``)."""
    secrets = [f"{PROJECT}:{key}" for key in cfg.monitoring.receiver_secret_keys().values()]
    config = {CONFIG_KEY: json.dumps(config_as_json(cfg)), **{key: PLAN_SECRET_VALUE for key in secrets}}
    if cfg.role is Role.train:
        # the inference API keys the train stack hands to the infer stacks (infra/edge/wire.py)
        config[API_KEYS_KEY] = json.dumps(plan_api_keys())
        secrets.append(API_KEYS_KEY)
    if cfg.role is Role.infer and cfg.inference is not None:
        key = f"{PROJECT}:{API_KEYS_SECRET}"
        config[key] = json.dumps(plan_api_keys(cfg.inference.auth.api_key_slots))
        secrets.append(key)
    return config, secrets


def run_plan(
    stack: str,
    cfg: PlatformConfig | None = None,
    stacks_dir: Path | None = None,
    *,
    first_preview: bool = False,
) -> Plan:
    """Validate the stack's config, then run the program under mocks and return what it registered.

    ``stacks_dir`` is the folder of stack files the plan is made from (default: the project's ``stacks/``);
    the program's cross-stack rules see exactly those stacks. Raises ConfigErrors (from the schema or from
    the rules) before any resource is registered.

    ``first_preview``: record what the first ``pulumi preview`` of a new stack sends instead (nothing
    exists yet: every input computed from another resource's output is unknown, ``FirstPreviewMocks``), the
    plan a policy pack must not be blocked by.
    """
    from infra import program

    stacks_dir = stacks_dir or default_stacks_dir()
    cfg = cfg or load_stack_config(stack, stacks_dir)
    # A StackReference is answered from the referenced stack's own plan, made first (and cached).
    referenced = {}
    # (a source stack without a file is the rule 'source-stack-replicates-here's to report)
    if cfg.storage.source_stack and stack_file(cfg.storage.source_stack, stacks_dir).exists():
        outputs = dict(planned_outputs(cfg.storage.source_stack, stacks_dir))
        if API_KEYS_OUTPUT in outputs:
            # the plan file masks the secret; the referencing stack reads the placeholders it was made from
            outputs[API_KEYS_OUTPUT] = plan_api_keys()
        referenced[cfg.storage.source_stack] = outputs
    mock_type = FirstPreviewMocks if first_preview else AwsSnapshotMocks
    mocks = mock_type(cfg.region, stack_outputs=referenced)
    findings: list[Finding] = []
    config, secret_keys = plan_config(cfg)
    monitor = run_program(
        # No endpoint probe: the offline plan has no cluster to reach (pulumi up checks it).
        functools.partial(
            program.program,
            stacks=read_stack_index(stacks_dir),
            allowlists=stack_allowlists(stack, stacks_dir),
            on_finding=findings.append,
            endpoint_probe=None,
            facts_source=mocks.facts_source,
        ),
        stack=stack,
        mocks=mocks,
        config=config,
        secret_keys=secret_keys,
        preview=first_preview,
    )
    plan = Plan(
        stack=stack,
        project=PROJECT,
        region=cfg.region,
        config=config_as_json(cfg),
        # Registrations complete in an order that varies between runs; sort so plans diff cleanly.
        resources=sorted(monitor.recorded, key=lambda r: r.urn),
        outputs=monitor.stack_outputs,
        calls=mocks.calls,
        findings=findings,
    )
    refuse_over_quota(plan)
    return plan


def quota_errors(plan: Plan) -> list[ConfigError]:
    """One error per policy document of ``plan`` that AWS would refuse for its size
    (infra/core/policy_quotas.py), naming the resource, the size, the quota and the fix."""
    registered = [
        policy_quotas.Registered(r.urn, r.type, r.name, r.inputs, r.property_dependencies)
        for r in plan.resources
    ]
    return [
        ConfigError(f"{o.urn.rsplit('::', 1)[0].rsplit('$', 1)[-1]} {o.resource!r}", o.problem(), o.fix)
        for o in policy_quotas.over_quota(registered)
    ]


def refuse_over_quota(plan: Plan) -> None:
    """Raise the :func:`quota_errors` of ``plan``, if any: such a plan would fail its first ``pulumi up``."""
    errors = quota_errors(plan)
    if errors:
        raise ConfigErrors(errors)


def run_program(
    fn: Callable[[], None],
    *,
    stack: str,
    mocks: AwsSnapshotMocks,
    config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
    preview: bool = False,
) -> RecordingMonitor:
    """Run ``fn`` as a Pulumi program under ``mocks`` and return the monitor that recorded it.

    ``run_plan`` runs the real program through it; tests run single components the same way. ``preview``:
    run as ``pulumi preview`` does (outputs the mocks leave out are unknown).
    """
    monitor = RecordingMonitor(mocks)
    # Everything the runtime schedules must live on one event loop: set it before set_mocks, which
    # already registers a root stack. run_in_stack then creates the stack the program runs in, exactly
    # as the real language host does.
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_unreported_only)
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(
            mocks,
            project=PROJECT,
            stack=stack,
            preview=preview,
            monitor=monitor,
            organization=DEFAULT_ORGANIZATION,
        )
        set_root_resource(None)  # type: ignore[arg-type]
        pulumi.runtime.set_all_config(config or {}, secret_keys or [])
        loop.run_until_complete(run_in_stack(fn))
    finally:
        _close_loop(loop)
    return monitor


def _unreported_only(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's report of a future whose exception nobody read, except our own errors: a failed data call
    or rule fails every output computed from it, and the run raises (and the plan reports) it once."""
    if not isinstance(context.get("exception"), PlatformError):
        loop.default_exception_handler(context)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close the loop of one program run, failed ones included, so that the next run starts clean.

    A program that fails stops at its first failed call and leaves the rest scheduled: cancel and await
    those, as ``asyncio.run`` does, so none is destroyed pending. The SDK's set of outputs still to await
    (``SETTINGS.outputs``) survives ``set_mocks``; a failed run's tasks left there would be awaited by the
    next run on this closed loop ("Event loop is closed"), so it is emptied here.
    """
    try:
        pending = asyncio.all_tasks(loop)
        while pending:  # a cancelled task may schedule another before it ends
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            pending = asyncio.all_tasks(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        with SETTINGS.lock:
            SETTINGS.outputs.clear()
        asyncio.set_event_loop(None)
        loop.close()


_PLAN_CACHE: dict[tuple[str, str, str], Plan] = {}


def _stacks_key(stack: str, stacks_dir: Path) -> tuple[str, str, str]:
    """The folder, the stack and a hash of every stack file there: what a plan reads from the folder (its own
    file, the neighbours the cross-stack rules see, the source stack its StackReference reads)."""
    folder = stacks_dir.resolve()
    digest = hashlib.sha256()
    for name in list_stacks(folder):
        digest.update(f"{name}\0".encode() + stack_file(name, folder).read_bytes() + b"\0")
    return str(folder), stack, digest.hexdigest()


def stack_file_plan(stack: str, stacks_dir: Path | None = None) -> Plan:
    """The plan of ``stack``'s file, made once per content of its stacks folder: a StackReference to it
    reads its outputs, and ``aiplat plan``/``review`` of several stacks reuse it (a source stack is planned
    once). Each plan made leaves its summary for the cross-stack checks of later runs
    (``infra/plan/summaries.py``)."""
    from infra.plan.summaries import write_summary

    stacks_dir = stacks_dir or default_stacks_dir()
    key = _stacks_key(stack, stacks_dir)
    if key not in _PLAN_CACHE:
        _PLAN_CACHE[key] = run_plan(stack, stacks_dir=stacks_dir)
        write_summary(_PLAN_CACHE[key], stacks_dir)
    return _PLAN_CACHE[key]


def neighbour_plan(stack: str, stacks_dir: Path | None = None) -> Plan:
    """What another stack's plan holds for the cross-stack checks (its named resources and outputs): its
    plan made in this run, else the summary of its last plan while that still matches its files and the
    code, else a plan made now (``stack_file_plan``)."""
    from infra.plan.summaries import read_summary

    stacks_dir = stacks_dir or default_stacks_dir()
    key = _stacks_key(stack, stacks_dir)
    if key in _PLAN_CACHE:
        return _PLAN_CACHE[key]
    return read_summary(stack, stacks_dir) or stack_file_plan(stack, stacks_dir)


def planned_outputs(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The outputs of ``stack``'s plan (``neighbour_plan``): what a StackReference would read."""
    return neighbour_plan(stack, stacks_dir).outputs


def write_plan(plan: Plan, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{plan.stack}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(plan.as_json(), indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path
