"""Config of queueing: the ``teams:`` that share the GPUs and the ``queueing:`` section (Kueue).

``teams``: per team a namespace, a LocalQueue, a ClusterQueue with a nominal GPU quota per pool (a Kueue
ResourceFlavor per GPU pool), and a trainer service account with an IAM role of its own. The names are
derived in ``infra/queueing/names.py``. ``queueing``: the Kueue chart pin, the WorkloadPriorityClasses,
the cohort every team's ClusterQueue joins (borrowing and preemption), all-or-nothing admission
(``waitForPodsReady``), topology-aware scheduling and KueueViz. Checks that need the pools, the instance
facts or the policy pack are rules (``infra/queueing/rules.py``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.cluster.config import PrincipalArn
from infra.core.charts import ChartPin
from infra.core.config import Strict

# re-exported for the composed schema, which imports config modules only
from infra.queueing.names import TEAM_SERVICE_ACCOUNT as TEAM_SERVICE_ACCOUNT
from infra.queueing.names import team_namespace
from infra.services.config import NAMESPACE_PATTERN
from infra.storage.config.security import ROLE_ARN

# A team name: a DNS label short enough that 'team-<team>' is one too, and that the IAM role name
# '<stack prefix>-team-<team>' fits AWS's 64 characters (rule 'team-role-name-fits').
TEAM_NAME = r"^[a-z]([a-z0-9-]{0,28}[a-z0-9])?$"
# A Kubernetes object name (WorkloadPriorityClass, Cohort: DNS subdomain; we keep to a label).
OBJECT_NAME = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
# A Kueue/metav1 duration ('5m', '1h30m', '90s').
DURATION = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"


class KueueChartConfig(ChartPin):
    """The Kueue chart: controller, webhooks and its CRDs (in the chart's templates, so Helm installs and
    upgrades them with the release). Upgrading is changing ``version``."""

    repo: str = Field(
        "oci://registry.k8s.io/kueue/charts",
        description="OCI registry of the chart (kubernetes-sigs/kueue charts/kueue/README.md, v0.19.2: "
        "'helm install kueue oci://registry.k8s.io/kueue/charts/kueue').",
    )
    chart: str = Field("kueue", description="Chart name.")
    version: str = Field(
        "0.19.2",
        description="Default: kubernetes-sigs/kueue tag v0.19.2 (8eab687, 2026-08-20), the newest release on "
        "2026-12-02; Chart.yaml version 0.19.2. The Kueue objects follow the v1beta2 CRDs of this version.",
    )
    namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] = Field(
        "kueue-system", description="Namespace of the controller (the chart README's)."
    )


class PriorityClassConfig(Strict):
    """A WorkloadPriorityClass: the order Kueue admits and preempts in (higher first)."""

    value: Annotated[int, Field(ge=-1_000_000_000, le=1_000_000_000)] = Field(
        description="Priority (higher is admitted first and preempts lower within the ClusterQueue)."
    )
    description: str = Field("", description="What the class is for (shown by kubectl).")


def _default_priorities() -> dict[str, PriorityClassConfig]:
    return {
        "production": PriorityClassConfig(value=1000, description="Production training runs."),
        "research": PriorityClassConfig(value=500, description="Research runs and experiments."),
        "dev": PriorityClassConfig(value=100, description="Development and debugging; preempted first."),
    }


class ReclaimWithinCohort(StrEnum):
    """Kueue ``preemption.reclaimWithinCohort``: may a ClusterQueue preempt workloads of other queues in
    the cohort that borrow its nominal quota? ``Never``, ``LowerPriority`` or ``Any``."""

    Never = "Never"
    LowerPriority = "LowerPriority"
    Any = "Any"


class WithinClusterQueue(StrEnum):
    """Kueue ``preemption.withinClusterQueue``: may a pending workload preempt admitted ones of the same
    ClusterQueue? ``Never``, ``LowerPriority`` or ``LowerOrNewerEqualPriority``."""

    Never = "Never"
    LowerPriority = "LowerPriority"
    LowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"


class CohortConfig(Strict):
    """The cohort every team's ClusterQueue joins: unused nominal quota of one team can be borrowed by the
    others, and is reclaimed (by preemption) when its owner needs it."""

    name: Annotated[str, Field(pattern=OBJECT_NAME)] = Field("gpus", description="Name of the Cohort object.")
    reclaim_within_cohort: ReclaimWithinCohort = Field(
        ReclaimWithinCohort.Any,
        description="Preempt workloads of other teams that borrow this team's quota: Never, LowerPriority or "
        "Any (a team always gets its nominal quota back).",
    )
    within_cluster_queue: WithinClusterQueue = Field(
        WithinClusterQueue.LowerPriority,
        description="Preempt the team's own admitted workloads of lower priority for a pending one: Never, "
        "LowerPriority or LowerOrNewerEqualPriority.",
    )


class BackoffConfig(Strict):
    """How a workload whose pods did not all become ready is requeued
    (``waitForPodsReady.requeuingStrategy``)."""

    base_delay_s: Annotated[int, Field(ge=1, le=86400)] = Field(
        60, description="First requeue delay (seconds); doubles with every requeue (with jitter)."
    )
    max_delay_s: Annotated[int, Field(ge=1, le=86400)] = Field(
        3600, description="Longest requeue delay (seconds)."
    )
    limit_count: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        10,
        description="Requeues before the workload is deactivated (it then needs `kubectl` to reactivate); "
        "None: requeue forever.",
    )

    @model_validator(mode="after")
    def _order(self) -> BackoffConfig:
        if self.max_delay_s < self.base_delay_s:
            raise ValueError(
                f"max_delay_s ({self.max_delay_s}) is below base_delay_s ({self.base_delay_s}); raise it"
            )
        return self


class WaitForPodsReadyConfig(Strict):
    """All-or-nothing admission: a multi-node job holds its quota only if all its pods become ready within
    ``timeout``; otherwise Kueue evicts it, frees the GPUs and requeues it with backoff."""

    enabled: bool = Field(True, description="Turn on waitForPodsReady in the Kueue manager config.")
    timeout: Annotated[str, Field(pattern=DURATION)] = Field(
        "15m",
        description="How long an admitted workload may take until all its pods are ready (image pulls of the "
        "trainer image and node start-up included), e.g. '15m'.",
    )
    # Off: Kueue's blockAdmission is one switch for the whole cluster, so one team's slow image pull would
    # stop admission in every team's queue for up to ``timeout``. A deadlock of two half-started jobs is
    # still broken by ``timeout`` and the requeue with backoff (Kueue v0.19.2
    # site/content/en/docs/tasks/manage/setup_wait_for_pods_ready.md, "Drawbacks").
    block_admission: bool = Field(
        False,
        description="Admit the next workload only once every admitted one, any team's, has all its pods "
        "ready (sequential admission across the whole cluster: one slow job holds up every queue). Off: "
        "half-started jobs that hold each other's GPUs are evicted after `timeout` and requeued.",
    )
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)


class KueueVizConfig(Strict):
    """KueueViz, Kueue's web UI: queues, workloads and flavors in a browser. ClusterIP only (no Ingress);
    reach it with `kubectl port-forward` (docs/platform/queueing.md)."""

    enabled: bool = Field(False, description="Install KueueViz (backend and frontend).")


class QueueingConfig(Strict):
    """Kueue and how the teams share the GPUs. Installed on train stacks that declare ``teams``."""

    kueue: KueueChartConfig = Field(default_factory=lambda: KueueChartConfig())
    priority_classes: dict[Annotated[str, Field(pattern=OBJECT_NAME)], PriorityClassConfig] = Field(
        default_factory=_default_priorities,
        description="WorkloadPriorityClasses by name (default production 1000, research 500, dev 100).",
    )
    default_priority: str = Field(
        "research", description="Priority class of a job that names none (a key of priority_classes)."
    )
    cohort: CohortConfig = Field(default_factory=CohortConfig)
    wait_for_pods_ready: WaitForPodsReadyConfig = Field(default_factory=WaitForPodsReadyConfig)
    topology_aware: bool = Field(
        True,
        description="Topology-aware scheduling on EFA pools: a Topology over the EKS network-topology node "
        "labels, named by the EFA pools' flavors, so a job's nodes sit close in the network.",
    )
    kueueviz: KueueVizConfig = Field(default_factory=KueueVizConfig)

    @model_validator(mode="after")
    def _priorities(self) -> QueueingConfig:
        if not self.priority_classes:
            raise ValueError("priority_classes is empty; declare at least one, e.g. {research: {value: 500}}")
        if self.default_priority not in self.priority_classes:
            raise ValueError(
                f"default_priority {self.default_priority!r} is not a key of priority_classes "
                f"{sorted(self.priority_classes)}; use one of them"
            )
        return self


class QuotaConfig(Strict):
    """A team's quota on one pool's flavor: nominal GPUs, and how much it may borrow or lend in the cohort."""

    gpus: Annotated[int, Field(ge=0)] = Field(
        description="Nominal GPUs the team is guaranteed on the pool (at most the pool's max_size x GPUs "
        "per node, rule 'team-quota-fits-pool')."
    )
    borrowing_limit: Annotated[int, Field(ge=0)] | None = Field(
        None, description="Most GPUs the team may borrow from the cohort beyond its nominal (None: no limit)."
    )
    lending_limit: Annotated[int, Field(ge=0)] | None = Field(
        None,
        description="Most of its nominal GPUs the team lends to the cohort while it does not use them "
        "(None: all). At most gpus.",
    )

    @model_validator(mode="after")
    def _lend(self) -> QuotaConfig:
        if self.lending_limit is not None and self.lending_limit > self.gpus:
            raise ValueError(
                f"lending_limit {self.lending_limit} is above gpus {self.gpus}; a team lends only its own "
                "nominal quota, lower it"
            )
        return self


# The release publisher's one IAM role reads '<team>/outputs/' of the checkpoints bucket of each team with
# releases, and its jobs' run records ('<team>/*/run-records/*', where it takes the job and its image): two
# S3 object ARNs and three s3:prefix values per team (about 380 characters with a 30-character team name and
# a 63-character bucket), in the role's inline policy, which IAM caps at 10,240 characters
# (infra/core/policy_quotas.py). 14 such teams keep it under 80 % of that quota whatever the names (77 %);
# the grant cannot be a pattern without reaching the teams that did not opt in. The other per-team grants
# are patterns or on the team's own role, so the number of teams itself has no such ceiling.
MAX_RELEASING_TEAMS = 14

# An ECR repository name segment (the CreateRepository pattern, one path segment).
# https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepository.html
REPOSITORY_NAME = r"^[a-z0-9]+([._-][a-z0-9]+)*$"


def _role_arns(v: list[str]) -> list[str]:
    for arn in v:
        if not ROLE_ARN.match(arn):
            raise ValueError(f"{arn!r} is not an IAM role ARN; use arn:aws:iam::<account id>:role/<name>")
    if len(set(v)) != len(v):
        raise ValueError(f"{v} names a role twice; list each once")
    return v


class TeamRegistryConfig(Strict):
    """The team's own ECR repositories, '<name_prefix>-<environment>/teams/<team>/<repository>' in the
    stack's registry: tags immutable, scanned on push, encrypted with the data key, expired like the
    platform's (registry.untagged_expire_days, keep_images) and replicated to storage.replicate_to.

    Only the team's CI role and ``pushers`` may push (a repository policy denies everyone else, the team's
    pods included); the nodes pull by digest, and the admission policies run these images only in the
    team's namespace (docs/how-to/byo-training.md)."""

    repositories: list[Annotated[str, Field(pattern=REPOSITORY_NAME, max_length=64)]] = Field(
        default_factory=list,
        description="Repository names under '<name_prefix>-<environment>/teams/<team>/', e.g. [byo-llama].",
    )
    ci_assumed_by: list[str] = Field(
        default_factory=list,
        description="IAM role ARNs (the team's CI runners) that may assume the team's CI role "
        "'<stack prefix>-team-<team>-ci', which may push to these repositories and nothing else. Empty: no "
        "CI role. Each role must exist when pulumi up runs (IAM refuses a trust policy naming a missing "
        "principal).",
    )
    pushers: list[str] = Field(
        default_factory=list,
        description="More IAM role ARNs of the team that may push (people's roles); the repository policy "
        "allows them, and their own identity policy must allow ecr:GetAuthorizationToken. Each must exist "
        "when pulumi up runs (ECR refuses a policy naming a missing principal).",
    )

    @field_validator("repositories")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a repository twice; list each once")
        return v

    @field_validator("ci_assumed_by", "pushers")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        return _role_arns(v)


class BudgetAction(StrEnum):
    """What reaching 100 % of a team's monthly budget does besides the ``TeamBudgetExhausted`` alert:
    ``hold`` sets the team's ClusterQueue ``stopPolicy: Hold`` (Kueue admits none of its new jobs; admitted
    ones run to completion) until the month turns or the budget is raised; ``alert`` only alerts."""

    hold = "hold"
    alert = "alert"


class BudgetConfig(Strict):
    """A team's monthly spend limit in USD, as OpenCost prices what its pods hold (the recording rules of
    ``infra/monitoring/rules/cost.yaml``; docs/how-to/team-spend.md). Months are calendar months in UTC."""

    monthly_usd: Annotated[float, Field(gt=0)] = Field(
        description="Budget per calendar month (UTC), in US dollars, of everything the team's pods hold "
        "(GPUs, CPUs, memory at OpenCost's prices)."
    )
    alert_at: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.8],
        description="Fractions of the budget (each above 0 and below 1) at which TeamBudgetThresholdReached "
        "warns the team; 100 % is always TeamBudgetExhausted. Default [0.8].",
    )
    on_exhausted: BudgetAction = Field(
        BudgetAction.hold,
        description="At 100 %: hold (the team's ClusterQueue stops admitting new jobs, running ones "
        "finish; lifted when the month turns or the budget is raised) or alert (only the alert).",
    )

    @field_validator("alert_at")
    @classmethod
    def _distinct(cls, v: list[float]) -> list[float]:
        if len(set(v)) != len(v):
            raise ValueError(f"alert_at {v} names a fraction twice; list each once")
        return sorted(v)


class TeamConfig(Strict):
    """A team sharing the GPUs: its namespace, queue, quotas and IAM role (names: infra/queueing/names.py)."""

    namespace: Annotated[str, Field(pattern=NAMESPACE_PATTERN)] | None = Field(
        None, description="Namespace of the team's jobs (default 'team-<team>')."
    )
    quotas: dict[str, QuotaConfig] = Field(
        description="Nominal GPU quota by pool name (a GPU pool of node_pools or a Karpenter NodePool of "
        "cluster_services.karpenter.node_pools); at least one."
    )
    default_priority: str | None = Field(
        None,
        description="Priority class of the team's jobs that name none (default queueing.default_priority).",
    )
    registry: TeamRegistryConfig = Field(default_factory=TeamRegistryConfig)
    priority_classes: list[Annotated[str, Field(pattern=OBJECT_NAME)]] | None = Field(
        None,
        description="The WorkloadPriorityClasses the team's jobs may name (keys of "
        "queueing.priority_classes; the admission policy aiplat-team-priorities refuses others). Unset: "
        "only the team's default priority, so no team preempts with 'production' unless it is listed.",
    )

    def allowed_priorities(self, stack_default: str) -> list[str]:
        """The priority classes the team may use (``stack_default``: queueing.default_priority)."""
        if self.priority_classes is not None:
            return list(self.priority_classes)
        return [self.default_priority or stack_default]

    members: dict[str, PrincipalArn] = Field(
        default_factory=dict,
        description="The team's people and tools that submit, watch and cancel its jobs: IAM role (or user) "
        "ARNs keyed by a short name. Each gets an EKS access entry in the team's Kubernetes group "
        "(aiplat-team-<team>), bound to the team's Role in its namespace only: TrainJobs, Jobs, "
        "ConfigMaps, pods and their logs, Kueue's workloads and queues read; never the namespace's "
        "NetworkPolicies, ResourceQuotas, LimitRanges or RBAC. An ARN may be a member of one team and have "
        "no cluster.access_entries entry (EKS gives a principal one access entry).",
    )
    budget: BudgetConfig | None = Field(
        None,
        description="Monthly spend limit in USD with its alerts and what 100 % does "
        "(docs/how-to/team-spend.md). None: no budget.",
    )
    receiver: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,31}$")] | None = Field(
        None,
        description="Alertmanager receiver (a key of monitoring.alertmanager.receivers) that gets every "
        "alert labelled with this team (its budget alerts, its idle jobs), whatever their severity. None: "
        "they reach only the receivers that take their severity.",
    )
    releases: bool = Field(
        False,
        description="The release publisher may read what the team's jobs leave under <team>/outputs/ of the "
        "checkpoints bucket and publish it into release/ (python -m trainer.release.publish --team <team>; "
        "the "
        "publisher's IAM role gets that read grant). Default false: nothing the team writes can be "
        f"published. At most {MAX_RELEASING_TEAMS} teams of a stack (the publisher's role names each one; "
        "docs/platform/scale.md).",
    )

    @field_validator("members")
    @classmethod
    def _member_names(cls, v: dict[str, str]) -> dict[str, str]:
        # the key names the member's access entry resource (a stable URN)
        for key in v:
            if not re.fullmatch(OBJECT_NAME, key):
                raise ValueError(f"member name {key!r} is not a lowercase name like 'alice' or 'ci'")
        return v

    @field_validator("quotas")
    @classmethod
    def _some_quota(cls, v: dict[str, QuotaConfig]) -> dict[str, QuotaConfig]:
        if not v:
            raise ValueError(
                "quotas is empty: a team without a quota has no queue to run in; give it one, "
                "e.g. {train: {gpus: 8}}"
            )
        return v


def check_team_names(teams: dict[str, TeamConfig]) -> dict[str, TeamConfig]:
    """Team names are DNS labels (the LocalQueue and 'team-<team>' namespace and ClusterQueue use them)."""
    for name in teams:
        if not re.fullmatch(TEAM_NAME, name):
            raise ValueError(
                f"team name {name!r} must be 1-30 lower-case letters, digits and '-', starting with a letter "
                "(it names the team's LocalQueue, namespace and IAM role)"
            )
    return teams


# Names no team may take whatever the stack's prefixes: the platform trainer's and the publisher's default
# key prefixes (storage.trainer.prefix 'trainer', release/ of the artifacts bucket), which a team's role
# ('<team>/' of the buckets) would otherwise reach.
RESERVED_TEAM_NAMES = ("trainer", "release")


def check_teams_config(
    teams: dict[str, TeamConfig],
    queueing: QueueingConfig,
    *,
    reserved_namespaces: set[str],
    reserved_names: Collection[str] = RESERVED_TEAM_NAMES,
) -> None:
    """Checks across the teams: names not the platform's prefixes, namespaces distinct and not the
    platform's, priorities declared."""
    releasing = sorted(name for name, team in teams.items() if team.releases)
    if len(releasing) > MAX_RELEASING_TEAMS:
        raise ValueError(
            f"teams: {len(releasing)} teams set releases ({', '.join(releasing)}); at most "
            f"{MAX_RELEASING_TEAMS} may: the release publisher's IAM role names each one's outputs prefix, "
            "and IAM caps the role's policies at 10,240 characters; set releases: false on the teams that "
            "do not publish models"
        )
    seen: dict[str, str] = {}
    for name, team in teams.items():
        if name in reserved_names:
            raise ValueError(
                f"teams.{name}: {name!r} is reserved ({sorted(reserved_names)}): the team's IAM role reaches "
                f"'{name}/' of the datasets and checkpoints buckets, a platform prefix; rename the team"
            )
        ns = team_namespace(name, team.namespace)
        if ns in reserved_namespaces:
            raise ValueError(
                f"teams.{name}.namespace: {ns!r} is a platform namespace ({sorted(reserved_namespaces)}); "
                f"give the team its own, e.g. 'team-{name}'"
            )
        if ns in seen:
            raise ValueError(
                f"teams.{name}.namespace: {ns!r} is also team {seen[ns]!r}'s; "
                "each team needs its own namespace"
            )
        seen[ns] = name
        if team.default_priority is not None and team.default_priority not in queueing.priority_classes:
            raise ValueError(
                f"teams.{name}.default_priority: {team.default_priority!r} is not a key of "
                f"queueing.priority_classes {sorted(queueing.priority_classes)}; use one of them"
            )
        for pc in team.priority_classes or ():
            if pc not in queueing.priority_classes:
                raise ValueError(
                    f"teams.{name}.priority_classes: {pc!r} is not a key of queueing.priority_classes "
                    f"{sorted(queueing.priority_classes)}; use one of them"
                )
        default = team.default_priority or queueing.default_priority
        allowed = team.allowed_priorities(queueing.default_priority)
        if default not in allowed:
            raise ValueError(
                f"teams.{name}.priority_classes: {allowed} lacks the team's default priority {default!r}, "
                "so its jobs that name none would be refused; add it"
            )
