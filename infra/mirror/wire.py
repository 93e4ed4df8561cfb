"""Wiring of the image cache: the region's registry and the config's upstreams -> the pull through cache
rules (``ImageCache``), and every chart's images pointed at them (``cached_chart``)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from infra.context import StackContext
from infra.core.charts import ChartPin, ChartRef, chart_ref
from infra.mirror.component import CacheRule, ImageCache, ImageCacheArgs
from infra.mirror.documents import COPY_AREA, CacheLayout, chart_image_values, placement
from infra.mirror.rules import cache_prefix, layout, stack_pins


def registry_host(ctx: StackContext) -> str:
    """The stack's private ECR registry in its region."""
    suffix = "amazonaws.com.cn" if ctx.account.partition == "aws-cn" else "amazonaws.com"
    return f"{ctx.account.account_id}.dkr.ecr.{ctx.cfg.region}.{suffix}"


def cache_layout(ctx: StackContext) -> CacheLayout:
    return layout(ctx.cfg, registry_host(ctx))


def cached_chart(ctx: StackContext, pin: ChartPin, *, chart: str | None = None) -> ChartRef:
    """The chart's pin with its images in the region's cache (``infra/mirror/pins.py``)."""
    name = chart or pin.chart
    return chart_ref(pin, chart=chart, image_values=chart_image_values(name, pin.version, cache_layout(ctx)))


def cached_image(ctx: StackContext, ref: str) -> str:
    """An upstream image reference (by digest) pulled through the region's cache instead."""
    return cache_layout(ctx).cached_ref(ref)


def recorded_images(ctx: StackContext) -> list[str]:
    """Every image the stack's charts run, where it is pulled from in the stack's ECR (the cache or the copy
    area) with its recorded digest (``infra/mirror/digests.py``): ``<registry>/<repository>@sha256:...``.
    An image without a digest is none of them (``chart-images-pinned-to-deploy`` refuses its stack)."""
    cache = cache_layout(ctx)
    out = set()
    for pin in stack_pins(ctx.cfg):
        if pin.digest is not None:
            where = placement(cache, pin.image)
            out.add(f"{where.registry}/{where.repository}@{pin.digest}")
    return sorted(out)


def wire_image_cache(
    ctx: StackContext, *, data_key_arn: pulumi.Input[str], node_role_names: Sequence[pulumi.Input[str]]
) -> ImageCache:
    """The pull through cache rules, the nodes' grant to pull through them, and the copy area's creation
    template (its repositories under the stack's data key)."""
    ic, prefix = ctx.cfg.image_cache, cache_prefix(ctx.cfg)
    cache = ImageCache(
        "image-cache",
        ImageCacheArgs(
            rules={
                name: CacheRule(
                    prefix=f"{prefix}/{name}", upstream_url=u.url, credential_arn=u.credential_arn
                )
                for name, u in ic.upstreams.items()
            },
            copy_prefix=f"{prefix}/{COPY_AREA}",
            kms_key_arn=data_key_arn,
            partition=ctx.account.partition,
            region=ctx.cfg.region,
            account_id=ctx.account.account_id,
            node_role_names=list(node_role_names),
        ),
        opts=pulumi.ResourceOptions(provider=ctx.provider),
    )
    ctx.export("imageCachePrefixes", cache.prefixes)
    return cache
