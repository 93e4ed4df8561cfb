"""The machinery every rule shares: rule registry, plain views of resources, unknowns, config, messages.

A rule is one function decorated with ``@resource_rule`` or ``@stack_rule`` (name, severity, enforcement,
doc link, config schema, unknowns handling); ``Rule.policy()`` turns it into the CrossGuard policy.
Rules never read pulumi-policy's proxy, whose ``UnknownValueError`` becomes one advisory diagnostic and
would let a mandatory rule pass silently: ``plain()`` puts ``UNKNOWN`` where the engine sent an unknown,
so every rule decides (its ``unknowns`` text: docs/reference/policies.md). A rule that declares
``defers`` skips an unknown document at preview and the update checks it (why: ``deferred.py``).
Importing a rule module only registers the rule; ``aiplat_policies.pack`` imports them all.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from infra.core.project import CONFIG_KEY

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
LOW, MEDIUM, HIGH, CRITICAL = Severity.LOW, Severity.MEDIUM, Severity.HIGH, Severity.CRITICAL


class _Unknown:
    """A value the engine does not know yet (preview). Truthy and equal only to itself, so a rule that
    compares it with an expected value sees a mismatch unless it handles unknowns on purpose."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown at preview>"

    def __str__(self) -> str:
        return "<unknown at preview>"

    def __format__(self, spec: str) -> str:
        return str(self)  # messages format numbers with ':g'; an unknown one prints as itself


UNKNOWN: Any = _Unknown()


def plain(value: Any) -> Any:
    """A plain copy of engine properties (dicts, lists, str, float, bool, None) with ``UNKNOWN`` for
    unknowns: pulumi-policy's proxies raise ``UnknownValueError`` on reading one, at any depth."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                out[key] = UNKNOWN
        return out
    if isinstance(value, Sequence):
        items: list[Any] = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """``value[path[0]][path[1]]...``; ``default`` where a key is missing, ``UNKNOWN`` where a step is."""
    for step in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return default
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return default
            value = value[step]
    return value


def as_list(value: Any) -> list[Any]:
    """A list for a list, ``[value]`` for a single value, ``[]`` for None (IAM allows both shapes)."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def truthy(value: Any) -> bool | None:
    """A boolean from a bool or the strings "true"/"false" (launch templates type some booleans as
    strings); None when missing, ``UNKNOWN`` stays ``UNKNOWN``."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def number(value: Any) -> float | None:
    """Numbers arrive as floats (protobuf Struct); None when missing or not a number."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def json_doc(value: Any) -> Any:
    """A JSON document given as a string (IAM policies, provider config) or as an object; None if invalid."""
    if value is UNKNOWN or isinstance(value, dict | list):
        return value
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class StackInfo:
    """The stack under review, from what the engine gives a policy pack process: ``PULUMI_STACK``,
    ``PULUMI_PROJECT`` and the stack's config in ``PULUMI_CONFIG`` (``aiplat:platform`` holds its role,
    environment and region). The Pulumi CLI sets these for every policy pack it starts
    (sdk/go/common/resource/plugin/analyzer_plugin.go, ``constructEnv``); so does ``aiplat review``."""

    name: str = ""
    project: str = ""
    role: str | None = None
    environment: str | None = None
    region: str | None = None
    # the trail that records this stack when its config says so (security.audit.trail: existing)
    trail_elsewhere: str | None = None
    # the stack's whole aiplat:platform document (rules that need the config itself, e.g. cost-cap)
    platform: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # PULUMI_DRY_RUN: True in a preview, False during an update, None when the engine did not say
    # (pulumi/pulumi pkg/engine/update.go passes opts.DryRun to every policy pack it loads)
    dry_run: bool | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> StackInfo:
        """The stack of ``env`` (default ``os.environ``). Parsed once per distinct environment: every rule
        asks for it on every resource it checks, and PULUMI_CONFIG holds the whole stack config."""
        env = os.environ if env is None else env
        return _stack_info(
            env.get("PULUMI_STACK", ""),
            env.get("PULUMI_PROJECT", ""),
            env.get("PULUMI_CONFIG") or "{}",
            env.get("PULUMI_DRY_RUN", ""),
        )


@functools.lru_cache(maxsize=8)
def _stack_info(name: str, project: str, config_json: str, dry_run: str) -> StackInfo:
    try:
        config = json.loads(config_json)
    except ValueError:
        config = {}
    platform = json_doc(config.get(CONFIG_KEY)) if isinstance(config, dict) else None
    platform = platform if isinstance(platform, dict) else {}

    def text(key: str) -> str | None:
        value = platform.get(key)
        return value if isinstance(value, str) else None

    audit = dig(platform, "security", "audit")
    audit = audit if isinstance(audit, dict) else {}
    existing = audit.get("existing_trail") if audit.get("trail") == "existing" else None
    return StackInfo(
        name=name,
        project=project,
        role=text("role"),
        environment=text("environment"),
        region=text("region"),
        trail_elsewhere=existing if isinstance(existing, str) and existing else None,
        platform=platform or None,
        dry_run={"true": True, "false": False}.get(dry_run),
    )


@dataclass
class Res:
    """A plain view of one resource: what a resource policy is given (inputs) or a stack policy's
    ``PolicyResource`` (the resource's state), with unknowns as ``UNKNOWN``."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    protect: bool = False
    provider_type: str | None = None
    provider_props: dict[str, Any] | None = None
    parent: Res | None = None
    deps: list[Res] = field(default_factory=list)
    prop_deps: dict[str, list[Res]] = field(default_factory=dict)

    def get(self, *path: str | int, default: Any = None) -> Any:
        return dig(self.props, *path, default=default)

    @property
    def label(self) -> str:
        """``type-token-tail 'name'``, e.g. ``LaunchTemplate 'pool-train-lt'``, for messages."""
        return f"{self.type.rsplit(':', 1)[-1]} {self.name!r}"

    def depends_on(self, prop: str | None = None) -> list[Res]:
        """The resources ``prop`` (or, without it, any input) was computed from."""
        if prop is None:
            return self.deps
        return self.prop_deps.get(prop, [])

    @classmethod
    def of(cls, r: ResourceValidationArgs | PolicyResource) -> Res:
        """The plain view of what the SDK hands a resource policy (its args) or a stack policy (each
        ``PolicyResource``): the two share these fields."""
        provider = r.provider
        return cls(
            type=r.resource_type,
            name=r.name,
            urn=r.urn,
            props=plain(r.props),
            protect=bool(r.opts.protect) if r.opts is not None else False,
            provider_type=provider.resource_type if provider is not None else None,
            provider_props=plain(provider.props) if provider is not None else None,
        )


def stack_resources(args: StackValidationArgs) -> list[Res]:
    """Plain views of every resource of a stack analysis, with parents and dependencies linked."""
    by_urn = {r.urn: Res.of(r) for r in args.resources}
    for r in args.resources:
        view = by_urn[r.urn]
        view.parent = by_urn.get(r.parent.urn) if r.parent is not None else None
        view.deps = [by_urn[d.urn] for d in r.dependencies if d.urn in by_urn]
        view.prop_deps = {
            key: [by_urn[d.urn] for d in deps if d.urn in by_urn]
            for key, deps in (r.property_dependencies or {}).items()
        }
    return list(by_urn.values())


@dataclass
class Stack:
    """Every resource of the stack, with lookups by type."""

    resources: list[Res]

    def of_type(self, *types: str) -> list[Res]:
        return [r for r in self.resources if r.type in types]


@dataclass(frozen=True)
class Violation:
    """What is wrong and how to fix it; ``urn`` names the resource for stack rules."""

    problem: str
    fix: str
    urn: str | None = None


def violation(problem: str, fix: str, urn: str | None = None) -> Violation:
    return Violation(problem, fix, urn)


@dataclass(frozen=True)
class Ctx:
    """What a rule may read besides the resources: its config (schema defaults, then the pack config the
    engine passed), the stack under review, and today's date (``asOf`` in a rule's config overrides it)."""

    config: Mapping[str, Any]
    stack: StackInfo
    today: dt.date

    @property
    def at_preview(self) -> bool:
        """Whether this run is a preview (``PULUMI_DRY_RUN=true``): the only time a rule may leave an unknown
        document to ``checked-at-update``. Unsure (no PULUMI_DRY_RUN) counts as not a preview."""
        return self.stack.dry_run is True


ResourceCheck = Callable[[Res, Ctx], Iterable[Violation]]
StackCheck = Callable[[Stack, Ctx], Iterable[Violation]]


@dataclass(frozen=True)
class Rule:
    """One rule of the pack and everything the pack, the rule reference and the review need to know of it."""

    name: str
    description: str
    severity: Severity
    enforcement: EnforcementLevel
    doc: str
    unknowns: str
    kind: str  # "resource" or "stack"
    types: tuple[str, ...]
    config: Mapping[str, Mapping[str, Any]]
    check: Callable[..., Iterable[Violation]]
    module: str
    # where (property paths) of the documents of a resource that this rule leaves to the update when they
    # are unknown at preview; None: the rule defers nothing
    defers: Callable[[Res], list[str]] | None = None

    @property
    def checked_when(self) -> str:
        """When the engine runs this rule on resolved values during ``pulumi up``."""
        if self.kind == "resource":
            return "during the update, before the resource is created or changed"
        return "at the end of the update, on the stack's final state"

    def defaults(self) -> dict[str, Any]:
        return {k: v["default"] for k, v in self.config.items() if "default" in v}

    def message(self, v: Violation) -> str:
        return f"{v.problem}; fix: {v.fix}; see {self.doc}"

    def _ctx(self, config: Mapping[str, Any] | None, stack: StackInfo) -> Ctx:
        merged = {**self.defaults(), **dict(config or {})}
        as_of = merged.get("asOf")
        today = dt.date.fromisoformat(as_of) if isinstance(as_of, str) and as_of else dt.date.today()
        return Ctx(merged, stack, today)

    def policy(self) -> Policy:
        """The CrossGuard policy object for this rule."""
        schema = (
            PolicyConfigSchema(properties={k: dict(v) for k, v in self.config.items()})
            if self.config
            else None
        )
        common = dict(
            name=self.name,
            description=self.description,
            enforcement_level=self.enforcement,
            config_schema=schema,
            severity=self.severity,
            url=self.doc,
        )
        if self.kind == "resource":
            return ResourceValidationPolicy(validate=self._validate_resource, **common)
        return StackValidationPolicy(validate=self._validate_stack, **common)

    def _validate_resource(self, args: ResourceValidationArgs, report: ReportViolation) -> None:
        if self.types and args.resource_type not in self.types:
            return
        ctx = self._ctx(args.get_config(), StackInfo.from_environment())
        resource = Res.of(args)
        for v in self.check(resource, ctx):
            report(self.message(v), v.urn)

    def _validate_stack(self, args: StackValidationArgs, report: ReportViolation) -> None:
        ctx = self._ctx(args.get_config(), StackInfo.from_environment())
        for v in self.check(Stack(stack_resources(args)), ctx):
            report(self.message(v), v.urn)


_RULES: dict[str, Rule] = {}


def _register(rule: Rule) -> None:
    if rule.name in _RULES:
        raise ValueError(f"rule {rule.name!r} is registered twice")
    if rule.name != rule.name.lower() or " " in rule.name or "_" in rule.name:
        raise ValueError(f"rule name {rule.name!r} is not kebab-case")
    _RULES[rule.name] = rule


def _decorator(kind: str, name: str, **spec: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(check: Callable[..., Any]) -> Callable[..., Any]:
        _register(
            Rule(
                name=name,
                description=spec["description"],
                severity=spec["severity"],
                enforcement=spec.get("enforcement", MANDATORY),
                doc=spec["doc"],
                unknowns=spec["unknowns"],
                kind=kind,
                types=tuple(spec.get("types", ())),
                config=spec.get("config") or {},
                check=check,
                module=check.__module__.rsplit(".", 1)[-1],
                defers=spec.get("defers"),
            )
        )
        return check

    return register


def resource_rule(
    name: str,
    *,
    description: str,
    severity: Severity,
    doc: str,
    unknowns: str,
    types: Iterable[str],
    enforcement: EnforcementLevel = MANDATORY,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    defers: Callable[[Res], list[str]] | None = None,
) -> Callable[[ResourceCheck], ResourceCheck]:
    """Register a resource rule: ``check(resource, ctx)`` runs for each resource of ``types``.

    ``defers(resource)``: the documents of a resource the rule skips when they are unknown at preview
    (``checked-at-update`` reports them)."""
    return _decorator(
        "resource",
        name,
        description=description,
        severity=severity,
        doc=doc,
        unknowns=unknowns,
        types=types,
        enforcement=enforcement,
        config=config,
        defers=defers,
    )


def stack_rule(
    name: str,
    *,
    description: str,
    severity: Severity,
    doc: str,
    unknowns: str,
    enforcement: EnforcementLevel = MANDATORY,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    defers: Callable[[Res], list[str]] | None = None,
) -> Callable[[StackCheck], StackCheck]:
    """Register a stack rule: ``check(stack, ctx)`` sees every resource with its dependencies.

    ``defers(resource)``: as for resource rules, per resource of the stack."""
    return _decorator(
        "stack",
        name,
        description=description,
        severity=severity,
        doc=doc,
        unknowns=unknowns,
        enforcement=enforcement,
        config=config,
        defers=defers,
    )


def deferred_unknowns(what: str, *, kind: str = "resource") -> str:
    """The rule reference's "unknown at preview" text of a rule that defers ``what`` (e.g. "document")."""
    when = (
        "before it creates or changes the resource"
        if kind == "resource"
        else "on the stack's final state at the end of the update"
    )
    return (
        f"Deferred: at preview an unknown {what} (built from resources of the same update) is skipped and "
        f"listed by checked-at-update; the update runs the rule on the resolved {what}, {when}. Outside a "
        f"preview an unknown {what} is a violation."
    )


def registered() -> list[Rule]:
    """Every registered rule, in registration order."""
    return list(_RULES.values())
