"""A plan as the analyzer requests the Pulumi engine sends a policy pack.

For every resource the engine sends ``Analyze`` an ``AnalyzeRequest`` (type, name, URN, inputs, options,
provider), then ``AnalyzeStack`` one ``AnalyzeStackRequest`` with every resource and its parent,
dependencies and property dependencies (pulumi/pulumi sdk/go/common/resource/plugin/analyzer_plugin.go,
``Analyze`` / ``AnalyzeStack``). The plan recorded all of it (``infra/plan/runner.py``).

One difference, on purpose: in ``AnalyzeStack`` the engine sends each resource's state (its outputs); a
plan has no deployed state, so each resource carries its recorded inputs. For a new stack that is what a
preview's planned state holds too (inputs, with computed outputs unknown); rules read inputs only.
The root stack resource (``pulumi:pulumi:Stack``) carries the stack's outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2

STACK_TYPE = "pulumi:pulumi:Stack"


def _struct(value: Mapping[str, Any] | None) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(dict(value or {}))
    return s


def stack_urn(plan: Mapping[str, Any]) -> str:
    """The root stack resource's URN:
    ``urn:pulumi:<stack>::<project>::pulumi:pulumi:Stack::<project>-<stack>``."""
    stack, project = plan["stack"], plan["project"]
    return f"urn:pulumi:{stack}::{project}::{STACK_TYPE}::{project}-{stack}"


def _resources(plan: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The plan's resources and the root stack resource the engine also analyzes."""
    root = {
        "urn": stack_urn(plan),
        "type": STACK_TYPE,
        "name": f"{plan['project']}-{plan['stack']}",
        "parent": None,
        "provider": None,
        "inputs": {},
        "dependencies": [],
        "propertyDependencies": {},
        "options": {},
    }
    return [root, *plan["resources"]]


def _options(r: Mapping[str, Any]) -> analyzer_pb2.AnalyzerResourceOptions:
    opts = r.get("options") or {}
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=bool(opts.get("protect")),
        ignoreChanges=list(opts.get("ignoreChanges") or []),
        deleteBeforeReplace=bool(opts.get("deleteBeforeReplace")),
        deleteBeforeReplaceDefined=bool(opts.get("deleteBeforeReplace")),
        additionalSecretOutputs=list(opts.get("additionalSecretOutputs") or []),
        parent=r.get("parent") or "",
    )


def _providers(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {r["urn"]: r for r in plan["resources"] if str(r["type"]).startswith("pulumi:providers:")}


def _provider(
    r: Mapping[str, Any], providers: Mapping[str, Mapping[str, Any]]
) -> analyzer_pb2.AnalyzerProviderResource | None:
    """The resource's provider; references are ``<provider URN>::<provider id>``."""
    ref = r.get("provider")
    if not ref:
        return None
    p = providers.get(str(ref).rsplit("::", 1)[0])
    if p is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(
        type=p["type"], urn=p["urn"], name=p["name"], properties=_struct(p.get("inputs"))
    )


def analyze_requests(plan: Mapping[str, Any]) -> Iterator[analyzer_pb2.AnalyzeRequest]:
    """One ``AnalyzeRequest`` per resource, as the engine sends them during a preview."""
    providers = _providers(plan)
    for r in _resources(plan):
        request = analyzer_pb2.AnalyzeRequest(
            type=r["type"],
            urn=r["urn"],
            name=r["name"],
            properties=_struct(r.get("inputs")),
            options=_options(r),
        )
        provider = _provider(r, providers)
        if provider is not None:
            request.provider.CopyFrom(provider)
        yield request


def analyze_stack_request(plan: Mapping[str, Any]) -> analyzer_pb2.AnalyzeStackRequest:
    """The ``AnalyzeStackRequest`` with every resource of the plan."""
    providers = _providers(plan)
    resources = []
    for r in _resources(plan):
        props = plan.get("outputs") if r["type"] == STACK_TYPE else r.get("inputs")
        resource = analyzer_pb2.AnalyzerResource(
            type=r["type"],
            urn=r["urn"],
            name=r["name"],
            properties=_struct(props),
            options=_options(r),
            parent=r.get("parent") or "",
            dependencies=list(r.get("dependencies") or []),
        )
        for key, urns in (r.get("propertyDependencies") or {}).items():
            resource.propertyDependencies[key].urns.extend(urns)
        provider = _provider(r, providers)
        if provider is not None:
            resource.provider.CopyFrom(provider)
        resources.append(resource)
    return analyzer_pb2.AnalyzeStackRequest(resources=resources)
