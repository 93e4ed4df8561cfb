"""What a preview could not review: documents unknown at preview that other rules leave to the update.

On a new stack every policy document built from resources of the same update (IRSA trust policies, policies
naming an ARN of this update) is unknown at preview; refusing would block every first preview, passing
silently would hide them. This ADVISORY rule lists each deferred one and the rules that will check it.

The update checks them because the engine runs the pack again during ``pulumi up`` with inputs resolved
(pulumi/pulumi step_generator.go ``allowUnknowns := sg.deployment.opts.DryRun``): resource rules before each
resource is created or changed, a mandatory violation stopping the update (``generateSteps``,
analyze_snapshot.go ``analyzeResource``), stack rules at the end (``AnalyzeResources``). The pack knows
which run it is from ``PULUMI_DRY_RUN`` (analyzer_plugin.go ``constructEnv``, from pkg/engine/update.go
``PolicyAnalyzerOptions.DryRun``). https://github.com/pulumi/pulumi-policy#overview
"""

from __future__ import annotations

from collections.abc import Iterator

from .core import ADVISORY, MEDIUM, Ctx, Res, Violation, registered, resource_rule, violation


def deferred_by(r: Res) -> dict[str, list[tuple[str, str]]]:
    """where -> [(rule, when it is checked)] for every document of ``r`` a rule leaves to the update."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rule in registered():
        if rule.defers is None:
            continue
        for where in rule.defers(r):
            out.setdefault(where, []).append((rule.name, rule.checked_when))
    return out


def _when(rules: list[tuple[str, str]]) -> str:
    by_when: dict[str, list[str]] = {}
    for name, when in sorted(rules):
        by_when.setdefault(when, []).append(name)
    return "; ".join(f"{', '.join(names)} {when}" for when, names in by_when.items())


@resource_rule(
    "checked-at-update",
    description="Lists each policy document a preview cannot review because it is computed from resources "
    "of the same update (IRSA trust policies, policies naming key, queue or bucket ARNs); the rules that "
    "skip it at preview check it during the update, with the value resolved.",
    severity=MEDIUM,
    enforcement=ADVISORY,
    doc="https://github.com/pulumi/pulumi-policy#overview",
    types=(),
    unknowns="This rule is about unknowns: at preview it reports every document another rule deferred; "
    "outside a preview it reports nothing (the deferring rules then refuse an unknown document themselves).",
)
def checked_at_update(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if not ctx.at_preview:
        return
    for where, rules in sorted(deferred_by(r).items()):
        yield violation(
            f"{r.label}: {where} is unknown at preview (computed from resources this update creates), so "
            f"the preview did not review it; the engine checks the resolved value: {_when(rules)}",
            "nothing to change if it only waits for ARNs of this update (`aiplat review` checks the same "
            "document offline with every value known); a mandatory violation found then stops the update",
        )
