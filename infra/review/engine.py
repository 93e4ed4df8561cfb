"""Review a plan with the policy pack, driving the analyzer as the Pulumi engine does during a preview.

The engine's sequence (pulumi/pulumi pkg/resource/plugin/analyzer_plugin.go and the plugin host):
``GetAnalyzerInfo``; reconcile the pack config (each policy's config-schema defaults, then the
``--policy-pack-config`` file on top: ``ReconcilePolicyPackConfig``); ``Configure``; ``ConfigureStack``;
``Analyze`` for every resource; ``AnalyzeStack`` once at the end. A mandatory violation fails the preview.

``review_plan`` is the function other commands reuse (``aiplat rollout`` may review before previewing):
give it a plan as written by ``aiplat plan`` (``Plan.as_json()`` or a saved ``build/plan/<stack>.json``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2

from infra.core.errors import ReviewInputError
from infra.core.project import CONFIG_KEY, DEFAULT_ORGANIZATION
from infra.io.policypack import PackProject, default_pack_dir, read_pack_project, read_stack_pack_config
from infra.review.analyzers import Analyzer, InProcessPack, PackProcess
from infra.review.requests import analyze_requests, analyze_stack_request

SEVERITIES = ("critical", "high", "medium", "low", "unspecified")
_LEVELS = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}


@dataclass(frozen=True)
class Diagnostic:
    """One violation reported by the pack."""

    policy: str
    severity: str  # critical, high, medium, low (unspecified when the policy sets none)
    enforcement: str  # mandatory or advisory
    urn: str
    message: str

    @property
    def mandatory(self) -> bool:
        return self.enforcement == "mandatory"

    @property
    def resource(self) -> str:
        """``LaunchTemplate pool-gpu-lt``: the type's last part and the name, from the URN (tables)."""
        if not self.urn:
            return ""
        qualified, _, name = self.urn.rpartition("::")
        return f"{qualified.rsplit(':', 1)[-1]} {name}"


@dataclass(frozen=True)
class PolicyFindings:
    """Every violation of one policy (at one enforcement level) in one stack: what the review prints as
    one row, with the count and a few examples."""

    policy: str
    severity: str
    mandatory: bool
    diagnostics: tuple[Diagnostic, ...]

    @property
    def count(self) -> int:
        return len(self.diagnostics)

    def resources(self) -> list[str]:
        """The resources it names, each once, in order (``(stack)`` for a stack-level violation)."""
        return list(dict.fromkeys(d.resource or "(stack)" for d in self.diagnostics))

    def messages(self) -> list[str]:
        """The distinct messages, in order: one when every resource has the same problem."""
        return list(dict.fromkeys(d.message for d in self.diagnostics))


@dataclass
class StackReview:
    """The pack's verdict on one stack's plan."""

    stack: str
    pack: str
    version: str
    policies: int
    resources: int
    diagnostics: list[Diagnostic] = field(default_factory=list)
    not_applicable: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mandatory(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.mandatory]

    @property
    def advisory(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.mandatory]

    @property
    def passed(self) -> bool:
        """No mandatory violation: ``pulumi preview --policy-pack`` would go on."""
        return not self.mandatory

    def by_severity(self) -> dict[str, list[Diagnostic]]:
        groups: dict[str, list[Diagnostic]] = {s: [] for s in SEVERITIES}
        for d in sorted(self.diagnostics, key=lambda d: (not d.mandatory, d.policy, d.urn)):
            groups.setdefault(d.severity, []).append(d)
        return {s: ds for s, ds in groups.items() if ds}

    def by_policy(self) -> dict[str, list[PolicyFindings]]:
        """Severity -> one ``PolicyFindings`` per policy and enforcement level (mandatory first)."""
        out: dict[str, list[PolicyFindings]] = {}
        for severity, diagnostics in self.by_severity().items():
            groups: dict[tuple[bool, str], list[Diagnostic]] = {}
            for d in diagnostics:
                groups.setdefault((d.mandatory, d.policy), []).append(d)
            out[severity] = [
                PolicyFindings(policy, severity, mandatory, tuple(ds))
                for (mandatory, policy), ds in groups.items()
            ]
        return out


def engine_environment(plan: Mapping[str, Any], *, dry_run: bool = True) -> dict[str, str]:
    """The environment the Pulumi CLI gives a policy pack process for this stack (``constructEnv``): the
    stack's config as ``PULUMI_CONFIG`` (object values as JSON strings), project, stack, organization, and
    ``PULUMI_DRY_RUN`` ("true" in a preview, "false" for the pack the update itself loads)."""
    return {
        "PULUMI_CONFIG": json.dumps({CONFIG_KEY: json.dumps(plan.get("config") or {})}),
        "PULUMI_PROJECT": str(plan["project"]),
        "PULUMI_STACK": str(plan["stack"]),
        "PULUMI_ORGANIZATION": DEFAULT_ORGANIZATION,
        "PULUMI_DRY_RUN": "true" if dry_run else "false",
    }


def _level(value: Any, where: str) -> int:
    if not isinstance(value, str) or value not in _LEVELS:
        raise ReviewInputError(f"policy pack config {where}: {value!r} is not one of {sorted(_LEVELS)}")
    return _LEVELS[value]


# JSON Schema's types, as the engine validates a pack config against each policy's schema before a preview.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (Mapping,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def _check_type(value: Any, schema: Mapping[str, Any], where: str) -> None:
    """``value`` has the type its schema declares (and so do an array's items and an object's values)."""
    kind = schema.get("type")
    ok = isinstance(value, _JSON_TYPES.get(kind, (object,)))
    if kind in ("number", "integer") and isinstance(value, bool):
        ok = False
    if not ok:
        raise ReviewInputError(
            f"policy pack config {where}: {value!r} is not of type {kind}; fix: give a JSON {kind} "
            f"({schema.get('description', 'see the policy reference')})"
        )
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _check_type(item, schema["items"], f"{where}[{i}]")
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        for key, item in value.items():
            _check_type(item, schema["additionalProperties"], f"{where}.{key}")


def reconcile_config(
    info: analyzer_pb2.AnalyzerInfo, user: Mapping[str, Any] | None
) -> dict[str, analyzer_pb2.PolicyConfig]:
    """Each policy's enforcement level and properties: schema defaults, the pack's initial config, then the
    user's ``--policy-pack-config`` document (``{"all": level, "<policy>": level | {"enforcementLevel": ...,
    "<property>": value}}``), as the engine's ReconcilePolicyPackConfig does."""
    user = dict(user or {})
    names = {p.name for p in info.policies}
    unknown = sorted(k for k in user if k != "all" and k not in names)
    if unknown:
        raise ReviewInputError(f"policy pack config names unknown policies {unknown}")
    everyone = _level(user["all"], "all") if "all" in user else None
    out: dict[str, analyzer_pb2.PolicyConfig] = {}
    for p in info.policies:
        schema = json_format.MessageToDict(p.configSchema.properties) if p.HasField("configSchema") else {}
        props = {k: v["default"] for k, v in schema.items() if isinstance(v, dict) and "default" in v}
        level = p.enforcementLevel
        if p.name in info.initialConfig:
            initial = info.initialConfig[p.name]
            level = initial.enforcementLevel
            props.update(json_format.MessageToDict(initial.properties))
        if everyone is not None:
            level = everyone
        given = user.get(p.name)
        if isinstance(given, str):
            level = _level(given, p.name)
        elif isinstance(given, Mapping):
            given = dict(given)
            if "enforcementLevel" in given:
                level = _level(given.pop("enforcementLevel"), f"{p.name}.enforcementLevel")
            extra = sorted(k for k in given if k not in schema)
            if extra:
                raise ReviewInputError(
                    f"policy pack config {p.name}: unknown properties {extra} (known: {sorted(schema)})"
                )
            for key, value in given.items():
                _check_type(value, schema[key], f"{p.name}.{key}")
            props.update(given)
        elif given is not None:
            raise ReviewInputError(
                f"policy pack config {p.name}: expected a level or an object, got {given!r}"
            )
        properties = struct_pb2.Struct()
        properties.update(props)
        out[p.name] = analyzer_pb2.PolicyConfig(enforcementLevel=level, properties=properties)
    return out


def _collect(
    review: StackReview, response: analyzer_pb2.AnalyzeResponse, urn: str | None, policies: Mapping[str, str]
) -> None:
    for d in response.diagnostics:
        message = d.message
        if d.description and message.startswith(d.description + "\n"):
            message = message[len(d.description) + 1 :]  # the SDK prefixes the policy's description
        severity = analyzer_pb2.PolicySeverity.Name(d.severity).removeprefix("POLICY_SEVERITY_").lower()
        review.diagnostics.append(
            Diagnostic(
                policy=d.policyName,
                severity=severity if severity != "unspecified" else policies.get(d.policyName, severity),
                enforcement=analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel).lower(),
                urn=d.urn or urn or "",
                message=message,
            )
        )
    review.not_applicable += [(n.policy_name, n.reason) for n in response.not_applicable]


def review_plan(
    plan: Mapping[str, Any],
    *,
    pack: PackProject | Path | None = None,
    pack_config: Mapping[str, Any] | None = None,
    pack_python: Path | None = None,
    dry_run: bool = True,
) -> StackReview:
    """Review ``plan`` (a dict as ``aiplat plan`` writes it) with the policy pack in ``pack`` (default: the
    project's ``policies/``). ``pack_config``: a ``--policy-pack-config`` document. ``pack_python``: run the
    pack as its own process with that Python (its virtualenv), else in this process. ``dry_run``: a preview
    (the default, what ``aiplat review`` and ``pulumi preview`` run); False: as the pack the update loads
    sees it (``PULUMI_DRY_RUN=false``), where an unknown document is a violation, not left to the update."""
    project = pack if isinstance(pack, PackProject) else read_pack_project(pack or default_pack_dir())
    env = engine_environment(plan, dry_run=dry_run)
    analyzer: Analyzer = (
        PackProcess(project, env, pack_python) if pack_python else InProcessPack(project, env)
    )
    try:
        info = analyzer.info()
        analyzer.configure(
            analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=reconcile_config(info, pack_config))
        )
        analyzer.configure_stack(
            analyzer_pb2.AnalyzerStackConfigureRequest(
                stack=str(plan["stack"]),
                project=str(plan["project"]),
                organization=DEFAULT_ORGANIZATION,
                dry_run=dry_run,
                config={CONFIG_KEY: json.dumps(plan.get("config") or {})},
                tags={"pulumi:project": str(plan["project"]), "pulumi:runtime": "python"},
            )
        )
        severities = {
            p.name: analyzer_pb2.PolicySeverity.Name(p.severity).removeprefix("POLICY_SEVERITY_").lower()
            for p in info.policies
        }
        review = StackReview(
            stack=str(plan["stack"]),
            pack=info.name,
            version=project.version,
            policies=len(info.policies),
            resources=len(plan["resources"]) + 1,
        )
        for request in analyze_requests(plan):
            _collect(review, analyzer.analyze(request), request.urn, severities)
        _collect(review, analyzer.analyze_stack(analyze_stack_request(plan)), None, severities)
        return review
    finally:
        analyzer.close()


def review_configured_plan(
    plan: Mapping[str, Any], *, stacks_dir: Path | None = None, **options: Any
) -> StackReview:
    """``review_plan`` with the stack's own pack config (``<stacks folder>/policy-pack/<stack>.json``, the
    defaults where it has none): what ``aiplat review`` and ``make plan`` give a stack without a
    ``--policy-pack-config`` file."""
    config = read_stack_pack_config(str(plan["stack"]), stacks_dir)
    return review_plan(plan, pack_config=config, **options)
