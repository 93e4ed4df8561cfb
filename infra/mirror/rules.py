"""Rules on the image cache: what AWS refuses when it creates a pull through cache rule, and the charts'
images that are not from our ECR by digest (a warning in the plan, a refusal before a deployment)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel

from infra.core.charts import ChartPin
from infra.core.config import KubernetesAccess, Role
from infra.core.facts import Unreadable
from infra.mirror.documents import (
    COPY_AREA,
    SECRET_PREFIX,
    CacheLayout,
    Gap,
    Placement,
    chart_gaps,
    chart_pins,
    needs_credentials,
    placement,
)
from infra.mirror.pins import ImagePin
from infra.stack.registry import Finding, Need, Phase, RuleContext, at, error, info, rule, skipped, warning

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

CREATE_DOC = "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-creating-rule.html"
HOWTO = "docs/how-to/image-cache.md"
# AWS: ecrRepositoryPrefix 2-30 characters, this pattern (CreatePullThroughCacheRule)
RULE_PREFIX = re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*")
RULE_PREFIX_MAX = 30
# AWS::ECR::PullThroughCacheRule CredentialArn pattern
CREDENTIAL_ARN = re.compile(
    r"arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):secret:"
    r"ecr-pullthroughcache/[a-zA-Z0-9/_+=.@-]+"
)


def stack_charts(cfg: PlatformConfig) -> list[tuple[str, ChartPin]]:
    """Every chart the stack installs, with its dotted field path, as the wiring decides: sections the stack
    does not install are None or ``enabled: false`` (the section's or the chart's own: FSx, monitoring,
    logs, the load balancer controller, metrics-server, cert-manager); no chart at all with
    ``kubernetes_access: skip``; Kueue only with teams; Karpenter only with its node pools; the EFA plugin
    only where a pool has EFA; OpenCost only on train stacks with monitoring."""
    out: list[tuple[str, ChartPin]] = []
    if cfg.cluster_services.kubernetes_access is KubernetesAccess.skip:
        return out

    def walk(model: BaseModel, path: tuple[str, ...]) -> None:
        if getattr(model, "enabled", True) is False:
            return
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, ChartPin) and getattr(value, "enabled", True) is not False:
                out.append((".".join((*path, name)), value))
            if isinstance(value, BaseModel):
                walk(value, (*path, name))

    walk(cfg, ())
    efa = any(getattr(p, "efa", False) for p in cfg.node_pools.values())
    return [
        (p, c)
        for p, c in out
        if not (p.startswith("queueing.") and not cfg.teams)
        and not (p.endswith("efa_device_plugin") and not efa)
        and not (p == "cluster_services.karpenter" and not cfg.cluster_services.karpenter.node_pools)
        # OpenCost on train stacks with monitoring (infra/opencost/rules.py installs_opencost)
        and not (p == "opencost.chart" and not (cfg.role is Role.train and cfg.monitoring.enabled))
    ]


def cache_prefix(cfg: PlatformConfig) -> str:
    """The first part of the cache's repository names: the config's, else the stack's prefix
    (``aiplat-prod-train``). ECR keeps a rule's prefix unique per account and region (a second
    CreatePullThroughCacheRule with it fails with PullThroughCacheRuleAlreadyExistsException), so the
    stacks of one account and region each get their own; ``infra/plan/names.py`` refuses a clash."""
    return cfg.image_cache.prefix or cfg.names.stack_prefix


def layout(cfg: PlatformConfig, registry: str = "<account>.dkr.ecr.<region>.amazonaws.com") -> CacheLayout:
    ic = cfg.image_cache
    return CacheLayout(
        registry=registry,
        prefix=cache_prefix(cfg),
        upstreams={u.url: name for name, u in ic.upstreams.items()},
    )


def _minio(cfg: PlatformConfig) -> str | None:
    """The MinIO chart's version when the stack installs it (pinned by storage.minio, no ChartPin)."""
    st = cfg.storage
    if st.backend == "minio" and st.minio is not None and cluster_installs(cfg):
        return st.minio.chart_version
    return None


def stack_gaps(cfg: PlatformConfig) -> list[tuple[str, Gap]]:
    """(config field of the chart, gap) for every chart the stack installs."""
    out = [(path, g) for path, c in stack_charts(cfg) for g in chart_gaps(c.chart, c.version)]
    # MinIO's chart is pinned by storage.minio (no ChartPin): its images count while storage.backend is minio
    if (minio := _minio(cfg)) is not None:
        out += [("storage.minio", g) for g in chart_gaps("minio", minio)]
    return out


def stack_pins(cfg: PlatformConfig) -> list[ImagePin]:
    """The recorded images of every chart the stack installs."""
    charts = [(c.chart, c.version) for _, c in stack_charts(cfg)]
    if (minio := _minio(cfg)) is not None:
        charts.append(("minio", minio))
    return [p for chart, version in charts for p in chart_pins(chart, version)]


def cluster_installs(cfg: PlatformConfig) -> bool:
    return cfg.cluster_services.kubernetes_access is not KubernetesAccess.skip


@rule("image-cache-rules-accepted")
def image_cache_rules_accepted(ctx: RuleContext) -> Iterator[Finding]:
    """Every pull through cache rule is one AWS creates: a supported upstream, its credentials where AWS
    requires them, a repository prefix of 2-30 characters, a secret in the stack's region."""
    ic = ctx.cfg.image_cache
    seen: dict[str, str] = {}
    account = ctx.cfg.security.account.id if ctx.cfg.security.account else None
    for name, up in sorted(ic.upstreams.items()):
        field = at("image_cache", "upstreams", name)
        prefix = f"{cache_prefix(ctx.cfg)}/{name}"
        if name == COPY_AREA:
            yield error(
                field,
                f"'{COPY_AREA}' is the name of the copy area ('{prefix}/...': the images of registries no "
                "rule takes, copied by `aiplat images copy`), not one an upstream may take",
                "give the upstream another name",
                HOWTO,
            )
        if not RULE_PREFIX.fullmatch(prefix) or not 2 <= len(prefix) <= RULE_PREFIX_MAX:
            yield error(
                field,
                f"the rule's repository prefix {prefix!r} is not one ECR takes (2-{RULE_PREFIX_MAX} "
                "characters: lower-case letters, digits, '.', '_', '-' between them, '/' between parts)",
                "set a shorter image_cache.prefix or shorten the upstream's name",
                CREATE_DOC,
            )
        if up.url in seen:
            yield error(
                field + ".url", f"{up.url} is cached by {seen[up.url]!r} already", "keep one", CREATE_DOC
            )
        seen.setdefault(up.url, name)
        needs = needs_credentials(up.url)
        if needs is None:
            yield error(
                field + ".url",
                f"{up.url!r} is no upstream registry ECR's pull through cache takes (Amazon ECR Public, "
                "Kubernetes, Quay, Docker Hub 'registry-1.docker.io', GitHub 'ghcr.io', GitLab, Azure)",
                "remove it; its images stay known gaps (aiplat plan warns)",
                CREATE_DOC,
            )
        elif needs and up.credential_arn is None:
            yield error(
                field + ".credential_arn",
                f"ECR needs credentials for {up.url}: a Secrets Manager secret named "
                f"'{SECRET_PREFIX}...' in {ctx.cfg.region}",
                f"create the secret ({HOWTO}) and set its ARN here",
                CREATE_DOC,
            )
        if up.credential_arn is not None:
            m = CREDENTIAL_ARN.fullmatch(up.credential_arn)
            if m is None:
                yield error(
                    field + ".credential_arn",
                    f"{up.credential_arn!r} is not the ARN of a secret named '{SECRET_PREFIX}...'",
                    f"use arn:aws:secretsmanager:<region>:<account>:secret:{SECRET_PREFIX}<name>-<suffix>",
                    CREATE_DOC,
                )
            elif m["region"] != ctx.cfg.region or (account and m["account"] != account):
                yield error(
                    field + ".credential_arn",
                    f"the secret is in {m['region']}/{m['account']}; ECR takes only a secret of "
                    "the rule's own "
                    f"account and region ({ctx.cfg.region}" + (f", {account})" if account else ")"),
                    "create the secret in the stack's region and account",
                    CREATE_DOC,
                )


def _by_chart(cfg: PlatformConfig) -> dict[str, list[Gap]]:
    out: dict[str, list[Gap]] = {}
    for path, gap in stack_gaps(cfg):
        out.setdefault(path, []).append(gap)
    return out


def _gap_line(g: Gap) -> str:
    return f"{g.values}: {g.image} ({g.why})" if g.values else g.why


@rule("chart-images-pinned")
def chart_images_pinned(ctx: RuleContext) -> Iterator[Finding]:
    """Every image of every chart comes from our ECR by digest; a warning per chart names the images that
    do not (aiplat preflight refuses the stack until they are pinned)."""
    for path, gaps in _by_chart(ctx.cfg).items():
        yield warning(
            at(*path.split(".")),
            f"{len(gaps)} image(s) of {gaps[0].chart} not from our ECR by digest, so `aiplat preflight` "
            "refuses this stack: " + "; ".join(_gap_line(g) for g in gaps),
            "read the digests from the registry with `aiplat images resolve` (it records them in "
            "infra/mirror/digests.py), or record one with its source",
            HOWTO,
        )


@rule("chart-images-pinned-to-deploy", phases=(Phase.preflight,))
def chart_images_pinned_to_deploy(ctx: RuleContext) -> Iterator[Finding]:
    """Before a deployment: every image of every chart from our ECR by digest (the system namespaces'
    admission policy refuses anything else, so the release would fail)."""
    charts = _by_chart(ctx.cfg)
    if not charts:
        pins = stack_pins(ctx.cfg)
        yield info(at("image_cache"), f"all {len(pins)} images of the stack's charts are pinned by digest")
    for path, gaps in charts.items():
        yield error(
            at(*path.split(".")),
            f"{len(gaps)} image(s) of {gaps[0].chart} not from our ECR by digest: "
            + "; ".join(_gap_line(g) for g in gaps),
            "run `aiplat images resolve` (it records the digests in infra/mirror/digests.py), then "
            "`aiplat images copy` for the images of registries no rule takes",
            HOWTO,
        )


def copied_images(cfg: PlatformConfig) -> list[tuple[str, str]]:
    """(repository, digest) of every image of the copy area the stack's charts run (those with a digest:
    the others are refused by ``chart-images-pinned-to-deploy``)."""
    cache = layout(cfg)
    out: list[tuple[str, str]] = []
    for pin in stack_pins(cfg):
        where = placement(cache, pin.image)
        if where.kind is Placement.copied and pin.digest is not None:
            out.append((where.repository, pin.digest))
    return sorted(set(out))


@rule("copied-images-present", phases=(Phase.preflight,), needs=(Need.live_region,))
def copied_images_present(ctx: RuleContext) -> Iterator[Finding]:
    """Before a deployment: every image of the copy area (registries no cache rule takes) is in the
    stack's ECR by its digest, or its chart's pods would not start."""
    assert ctx.live is not None
    missing: list[str] = []
    for repository, digest in copied_images(ctx.cfg):
        key = f"{repository}@{digest}"
        seen = ctx.live.copied_images.get(key)
        if isinstance(seen, Unreadable):
            yield skipped(at("image_cache"), f"{key}: not read ({seen})", "allow ecr:DescribeImages", HOWTO)
        elif seen is not True:
            missing.append(key)
    present = [k for k, seen in ctx.live.copied_images.items() if seen is True]
    if present and not missing:
        yield info(at("image_cache"), f"all {len(present)} copied images are in the stack's registry")
    if missing:
        yield error(
            at("image_cache"),
            f"{len(missing)} image(s) of the copy area are not in the stack's registry yet: "
            + "; ".join(missing),
            f"run `aiplat images copy --stack {ctx.stack or '<stack>'}` (after the copy area's creation "
            "template exists)",
            HOWTO,
        )
