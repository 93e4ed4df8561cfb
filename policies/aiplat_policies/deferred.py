"""What a preview could not review: documents unknown at preview that other rules leave to the update.

On a new stack every policy document built from resources of the same update is unknown at preview: the
IRSA trust policies (the cluster's OIDC issuer exists only after CreateCluster), role and resource policies
that name a key, queue, role or bucket ARN of this update. Refusing them would block the first preview of
every stack; passing them silently would hide them. Rules that read them declare ``defers`` and skip them at
preview; this ADVISORY rule lists each one, with the rules that will check it and when, so the preview says
what it did not review.

Why the update checks them: the engine runs every policy pack again during ``pulumi up``, with the inputs
resolved (the update allows no unknowns: step_generator.go ``allowUnknowns := sg.deployment.opts.DryRun``).
Resource rules run before each resource is created or changed and a mandatory violation stops the update
there (pulumi/pulumi pkg/resource/deploy/step_generator.go ``generateSteps`` and analyze_snapshot.go
``analyzeResource``); stack rules run on the final state at the end and fail the update
(step_generator.go ``AnalyzeResources``). The pack learns which run it is from ``PULUMI_DRY_RUN``, which the
CLI sets for each policy pack process (sdk/go/common/resource/plugin/analyzer_plugin.go ``constructEnv``,
from pkg/engine/update.go ``PolicyAnalyzerOptions.DryRun``). Same in the pulumi-policy README: "Policy rules
run during pulumi preview and pulumi up, asserting that cloud resource definitions comply with the policy
immediately before they are created or updated".
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
