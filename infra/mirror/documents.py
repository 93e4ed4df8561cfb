"""Pure builders: where an upstream image lives in the stack's ECR (pulled through a cache rule, or copied
into the copy area when no rule takes its registry), a chart's values overriding its images to there
(``pins.py``), the gaps left (no digest), and the nodes' IAM policy that pulls through. No I/O.

AWS's upstream registries and which need credentials: CreatePullThroughCacheRule (CLI reference
https://docs.aws.amazon.com/cli/latest/reference/ecr/create-pull-through-cache-rule.html) and
https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-creating-rule.html (2026-12-02).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from infra.mirror.pins import NO_IMAGES, PINS, ImagePin, Style

# upstream registry URL -> does AWS require a Secrets Manager secret for it
UPSTREAM_CREDENTIALS: Mapping[str, bool] = {
    "public.ecr.aws": False,
    "registry.k8s.io": False,
    "quay.io": False,
    "registry-1.docker.io": True,
    "ghcr.io": True,
    "registry.gitlab.com": True,
}
AZURE_SUFFIX = ".azurecr.io"  # <name>.azurecr.io, credentials required
# how an image names Docker Hub, and the URL a rule takes for it
DOCKER_HUB = "registry-1.docker.io"
SECRET_PREFIX = "ecr-pullthroughcache/"
# AWS: the ECR actions a principal needs to pull through a cache rule (besides pulling):
# https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html
PULL_THROUGH_ACTIONS = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")
# The images of registries no rule of the stack takes (nvcr.io, cr.fluentbit.io, EKS's own account, and
# ghcr.io/Docker Hub without a credentialed rule) are copied by digest (``aiplat images copy``) into
# ``<prefix>/copy/<upstream image>``; ECR creates each repository on the push from the stack's creation
# template (CREATE_ON_PUSH). An upstream may not be named ``copy``.
COPY_AREA = "copy"


def needs_credentials(url: str) -> bool | None:
    """Whether AWS requires credentials for upstream ``url``; None: AWS takes no rule for it."""
    if url.endswith(AZURE_SUFFIX):
        return True
    return UPSTREAM_CREDENTIALS.get(url)


@dataclass(frozen=True, kw_only=True)
class CacheLayout:
    """Where the region's cache is: the registry host, the prefix, and upstream URL -> rule name."""

    registry: str  # <account>.dkr.ecr.<region>.amazonaws.com
    prefix: str
    upstreams: Mapping[str, str]  # upstream URL -> name (rule prefix '<prefix>/<name>')

    def rule_prefix(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def cached(self, image: str) -> tuple[str, str] | None:
        """(registry, repository) of upstream ``image`` in the cache, or None if its registry is not cached.
        Docker Hub's official images live under ``library/`` upstream (as ECR names them)."""
        host, _, path = image.partition("/")
        if host == "docker.io":
            host = DOCKER_HUB
            if "/" not in path:
                path = f"library/{path}"
        name = self.upstreams.get(host)
        if name is None:
            return None
        return self.registry, f"{self.rule_prefix(name)}/{path}"

    def copied(self, image: str) -> tuple[str, str]:
        """(registry, repository) of upstream ``image`` in the copy area (the upstream host kept, Docker
        Hub's official images under ``docker.io/library/``)."""
        host, _, path = image.partition("/")
        if host == "docker.io" and "/" not in path:
            path = f"library/{path}"
        return self.registry, f"{self.rule_prefix(COPY_AREA)}/{host}/{path}"

    def cached_ref(self, ref: str) -> str:
        """The full reference ``ref`` (``repository[:tag][@sha256:...]``) in the cache, tag and digest
        kept; unchanged if its registry is not cached (e.g. already our ECR)."""
        name, at, digest = ref.partition("@")
        colon = name.find(":", name.rfind("/") + 1)
        repository, tag = (name[:colon], name[colon:]) if colon != -1 else (name, "")
        where = self.cached(repository)
        if where is None:
            return ref
        return f"{where[0]}/{where[1]}{tag}{at}{digest}"


class Placement(StrEnum):
    cached = "cached"  # pulled through the region's cache rule for its registry
    copied = "copied"  # copied by ``aiplat images copy`` (no rule takes its registry)


@dataclass(frozen=True)
class Where:
    kind: Placement
    registry: str
    repository: str


def placement(cache: CacheLayout, image: str) -> Where:
    """Where upstream ``image`` is pulled from in the stack's ECR."""
    where = cache.cached(image)
    if where is not None:
        return Where(Placement.cached, *where)
    return Where(Placement.copied, *cache.copied(image))


@dataclass(frozen=True)
class Gap:
    """An image of a chart that is not from our ECR by digest, and why."""

    chart: str
    values: str
    image: str
    why: str


def chart_pins(chart: str, version: str, *, off: bool = False) -> list[ImagePin]:
    """The images of ``chart`` at ``version`` that run (with ``off``, also those our values switch off)."""
    return [p for p in PINS if p.chart == chart and p.version == version and (off or p.off is None)]


def _digest_value(pin: ImagePin) -> str:
    assert pin.digest is not None
    return pin.digest.removeprefix("sha256:") if pin.digest_key == "sha" else pin.digest


def chart_image_values(chart: str, version: str, cache: CacheLayout) -> dict[str, Any]:
    """Values that point every pinned image of ``chart`` at ``version`` to the stack's ECR (the cache, or
    the copy area for a registry the cache has no rule for), with its digest where recorded."""
    out: dict[str, Any] = {}
    for pin in chart_pins(chart, version):
        where = placement(cache, pin.image)
        registry, repository = where.registry, where.repository
        node = out
        for key in pin.values.split("."):
            node = node.setdefault(key, {})
        if pin.style is Style.registry:
            node.update({"registry": registry, "repository": repository})
        else:
            node["repository"] = f"{registry}/{repository}"
        if pin.set_tag:
            node["tag"] = pin.tag
        if pin.digest is not None:
            if pin.digest_key is None:
                node["tag"] = f"{pin.tag}@{pin.digest}"
            else:
                node[pin.digest_key] = _digest_value(pin)
    return out


def chart_gaps(chart: str, version: str) -> list[Gap]:
    """What keeps ``chart`` at ``version`` from running only our ECR's images by digest."""
    pins = chart_pins(chart, version)
    if not chart_pins(chart, version, off=True) and (chart, version) not in NO_IMAGES:
        return [Gap(chart, "", "", f"no image of {chart} {version} is recorded in infra/mirror/pins.py")]
    return [
        Gap(chart, pin.values, pin.image, f"no digest of {pin.image}:{pin.tag} is recorded")
        for pin in pins
        if pin.digest is None
    ]


def pull_through_policy(*, partition: str, region: str, account_id: str, prefixes: Sequence[str]) -> dict:
    """The nodes' grant to import upstream images into the cache's repositories (and create them on the
    first pull), on the cache's prefixes only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PullThroughCache",
                "Effect": "Allow",
                "Action": list(PULL_THROUGH_ACTIONS),
                "Resource": [
                    f"arn:{partition}:ecr:{region}:{account_id}:repository/{p}/*" for p in sorted(prefixes)
                ],
            }
        ],
    }
