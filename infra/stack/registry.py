"""Findings, the rule registry and the phases rules run in.

A rule is one small named function from a ``RuleContext`` to findings. It declares the phases that use it
(``plan``: before any resource, under ``aiplat plan`` and ``pulumi up``; ``preflight``: against the live AWS
API) and what it needs from the context (AWS facts, the other stacks, the region list), so a phase runs
exactly the rules whose inputs it has. Like AWS ParallelCluster's validators, the same rule is never written
twice. The policy pack judges planned resources, not a ``RuleContext``: it imports these modules' limits and
checks (``policies/README.md``) rather than running a phase of its own. Pure: no I/O, no Pulumi.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from infra.core.errors import ConfigError
from infra.core.facts import LiveFacts, RegionFacts
from infra.core.project import CONFIG_KEY
from infra.core.stacks import StackIndex
from infra.core.trainer_settings import TrainerSettings
from infra.stack.allowlists import PackAllowlists

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


class Level(StrEnum):
    """``error`` stops the plan; ``warning`` is printed and the plan goes on; ``info`` is a note;
    ``skipped`` says a check could not run and why (preflight: never shown as a pass)."""

    error = "error"
    warning = "warning"
    info = "info"
    skipped = "skipped"  # the check did not run (an input it needs was not read): the finding says why


class Phase(StrEnum):
    plan = "plan"
    preflight = "preflight"


# The rules that ask what preflight asks the live account again (offerings by zone ID, EFA, zone names).
PLAN_AND_PREFLIGHT = (Phase.plan, Phase.preflight)


class Need(StrEnum):
    """What a rule reads besides the config."""

    facts = "facts"  # RegionFacts: zones, offerings, instance types
    stacks = "stacks"  # StackIndex: the project's other stacks
    regions = "regions"  # the AWS region names
    account = "account"  # LiveFacts: the live account (preflight), whether or not the credentials work
    credentials = "credentials"  # LiveFacts whose credentials work: region opt-in, IAM
    live_region = "live_region"  # LiveFacts of a region that answers: quotas, reservations, add-ons...
    trainer = "trainer"  # TrainerSettings of the trainer config files the stack names


@dataclass(frozen=True)
class Finding:
    """One problem: how bad, which config field, what is wrong, how to fix it, where AWS documents it."""

    level: Level
    field: str
    problem: str
    fix: str | None = None
    doc: str | None = None
    rule: str = ""
    # the AWS data a refusal on AWS facts was judged on, and its date (``RegionFacts.source``)
    data: str = ""

    def one_line(self) -> str:
        return self.as_config_error().one_line()

    def as_config_error(self) -> ConfigError:
        return ConfigError(self.field, self.problem, self.fix, doc=self.doc, data=self.data or None)


def error(field: str, problem: str, fix: str | None = None, doc: str | None = None) -> Finding:
    return Finding(Level.error, field, problem, fix, doc)


def warning(field: str, problem: str, fix: str | None = None, doc: str | None = None) -> Finding:
    return Finding(Level.warning, field, problem, fix, doc)


def info(field: str, problem: str, fix: str | None = None, doc: str | None = None) -> Finding:
    """A note: what a check found when it passed (preflight prints it in the 'pass' row)."""
    return Finding(Level.info, field, problem, fix, doc)


def skipped(field: str, why: str, fix: str | None = None, doc: str | None = None) -> Finding:
    """A check that did not run: why (an API that was denied, an input not read), and how to let it run."""
    return Finding(Level.skipped, field, why, fix, doc)


def at(*parts: str) -> str:
    """``aiplat:platform.<parts...>``: the dotted field name errors use."""
    return ".".join([CONFIG_KEY, *parts])


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may read. Fields a phase does not have stay None/empty."""

    cfg: PlatformConfig
    stack: str = ""
    facts: RegionFacts | None = None
    stacks: StackIndex | None = None
    regions: frozenset[str] = frozenset()
    live: LiveFacts | None = None
    # trainer config files the training section names, by what names them ('runtime', 'runs.<name>')
    trainer: Mapping[str, TrainerSettings] | None = None
    # what the policy pack will allow this stack: the defaults with its pack config file on top
    allowlists: PackAllowlists = field(default_factory=PackAllowlists)

    def has(self, need: Need) -> bool:
        return {
            Need.facts: self.facts is not None,
            Need.stacks: self.stacks is not None,
            Need.regions: bool(self.regions),
            Need.account: self.live is not None,
            Need.credentials: self.live is not None and self.live.credentials_work,
            Need.live_region: self.live is not None and self.live.region_usable,
            Need.trainer: self.trainer is not None,
        }[need]


Check = Callable[[RuleContext], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    phases: frozenset[Phase]
    needs: frozenset[Need]
    check: Check


_REGISTRY: dict[str, Rule] = {}


def rule(
    name: str, *, phases: Iterable[Phase] = (Phase.plan,), needs: Iterable[Need] = ()
) -> Callable[[Check], Check]:
    """Register ``check`` under a kebab-case ``name``; its docstring's first line is the description."""

    def register(check: Check) -> Check:
        if name in _REGISTRY:
            raise ValueError(f"rule {name!r} is registered twice")
        description = (check.__doc__ or "").strip().splitlines()[0] if check.__doc__ else name
        _REGISTRY[name] = Rule(name, description, frozenset(phases), frozenset(needs), check)
        return check

    return register


def registered() -> Mapping[str, Rule]:
    return dict(_REGISTRY)


def applicable(phase: Phase, ctx: RuleContext, *, requiring: Need | None = None) -> list[Rule]:
    """The rules of ``phase`` whose needs ``ctx`` has (and that need ``requiring``, when given)."""
    return [
        r
        for r in _REGISTRY.values()
        if phase in r.phases
        and all(ctx.has(n) for n in r.needs)
        and (requiring is None or requiring in r.needs)
    ]


def check_rule(r: Rule, ctx: RuleContext) -> list[Finding]:
    """One rule's findings, each tagged with the rule's name; a refusal by a rule on AWS facts also names
    the data that answered and its date (``RegionFacts.source``), so a stale snapshot is visible."""
    source = ctx.facts.source if ctx.facts is not None and Need.facts in r.needs else ""
    return [
        replace(f, rule=r.name, data=source) if source and f.level is Level.error else replace(f, rule=r.name)
        for f in r.check(ctx)
    ]


def run_rules(phase: Phase, ctx: RuleContext, *, requiring: Need | None = None) -> list[Finding]:
    """Every finding of the rules of ``phase`` whose needs ``ctx`` has.

    ``requiring`` keeps only the rules that need that input: the program runs the rules that need no AWS
    facts first (a bad region must be refused before a provider is configured for it), then fetches the
    facts and runs ``requiring=Need.facts``.
    """
    return [f for r in applicable(phase, ctx, requiring=requiring) for f in check_rule(r, ctx)]
