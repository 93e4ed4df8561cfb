"""The image cache's pure builders: chart values pointed at the region's cache, the gaps, AWS's limits."""

from __future__ import annotations

from infra.mirror.digests import DIGESTS
from infra.mirror.documents import (
    CacheLayout,
    Placement,
    chart_gaps,
    chart_image_values,
    needs_credentials,
    placement,
)
from infra.mirror.pins import PINS

CACHE = CacheLayout(
    registry="111122223333.dkr.ecr.us-east-1.amazonaws.com",
    prefix="cache",
    upstreams={"public.ecr.aws": "ecr-public", "quay.io": "quay", "registry.k8s.io": "k8s"},
)


def test_karpenter_controller_from_the_cache_by_its_recorded_digest() -> None:
    values = chart_image_values("karpenter", "1.14.1", CACHE)
    image = values["controller"]["image"]
    assert image["repository"].startswith(CACHE.registry + "/cache/ecr-public/")
    assert image["digest"].startswith("sha256:") and len(image["digest"]) == len("sha256:") + 64
    assert chart_gaps("karpenter", "1.14.1") == []


def test_registry_style_values_split_registry_and_repository() -> None:
    values = chart_image_values("kube-prometheus-stack", "88.5.3", CACHE)
    image = values["prometheus"]["prometheusSpec"]["image"]
    assert image["registry"] == CACHE.registry
    assert image["repository"].startswith("cache/quay/")


def test_missing_digests_are_gaps_wherever_the_image_is_placed() -> None:
    # fluent-bit's registries (cr.fluentbit.io, ghcr.io) have no rule: its images are copied, and a copy
    # needs the digest too
    assert [g.why for g in chart_gaps("fluent-bit", "0.58.1")] == [
        "no digest of cr.fluentbit.io/fluent/fluent-bit:5.1.1 is recorded",
        "no digest of ghcr.io/jimmidyson/configmap-reload:v0.15.0 is recorded",
    ]
    assert any("no digest" in g.why for g in chart_gaps("aws-fsx-csi-driver", "1.17.0"))  # cached
    assert chart_gaps("dcgm-exporter", "4.8.2") == []  # copied, with its digest
    assert chart_gaps("cert-manager", "v1.21.1") == []  # every digest recorded (digests.py)
    assert chart_gaps("cert-manager", "v9.9.9")[0].why.startswith("no image of cert-manager")


def test_registries_without_a_rule_go_to_the_copy_area_with_their_digest() -> None:
    where = placement(CACHE, "nvcr.io/nvidia/k8s/dcgm-exporter")
    assert where.kind is Placement.copied
    assert (where.registry, where.repository) == (
        CACHE.registry,
        "cache/copy/nvcr.io/nvidia/k8s/dcgm-exporter",
    )
    assert placement(CACHE, "docker.io/busybox").repository == "cache/copy/docker.io/library/busybox"
    assert placement(CACHE, "quay.io/prometheus/prometheus").kind is Placement.cached
    # KEDA's images are on ghcr.io, which the default rules do not take: copied, by their recorded digests
    keda = chart_image_values("keda", "2.20.2", CACHE)["image"]["keda"]
    assert keda["registry"] == CACHE.registry
    assert keda["repository"] == "cache/copy/ghcr.io/kedacore/keda"
    assert keda["tag"] == "2.20.2@" + DIGESTS[("ghcr.io/kedacore/keda", "2.20.2")].digest
    # with a ghcr rule, the same image is pulled through it instead
    ghcr = CacheLayout(registry=CACHE.registry, prefix="cache", upstreams={"ghcr.io": "ghcr"})
    assert (
        chart_image_values("keda", "2.20.2", ghcr)["image"]["keda"]["repository"]
        == "cache/ghcr/kedacore/keda"
    )


def test_pins_name_a_source_and_only_sha256_digests() -> None:
    for pin in PINS:
        assert pin.source and pin.date
        assert pin.digest is None or (pin.digest.startswith("sha256:") and len(pin.digest) == 71)


def test_docker_hub_and_ghcr_need_credentials_nvcr_has_no_rule() -> None:
    assert needs_credentials("registry-1.docker.io") is True
    assert needs_credentials("ghcr.io") is True
    assert needs_credentials("quay.io") is False
    assert needs_credentials("nvcr.io") is None


def test_recorded_digests_go_into_the_values_with_their_source() -> None:
    values = chart_image_values("cert-manager", "v1.21.1", CACHE)
    assert (
        values["webhook"]["image"]["digest"]
        == DIGESTS[("quay.io/jetstack/cert-manager-webhook", "v1.21.1")].digest
    )
    # kube-prometheus-stack takes the hex only (``sha``), node-exporter's subchart the whole digest
    kps = chart_image_values("kube-prometheus-stack", "88.5.3", CACHE)
    sha = kps["prometheus"]["prometheusSpec"]["image"]["sha"]
    assert len(sha) == 64 and not sha.startswith("sha256:")
    for pin in PINS:
        if pin.digest is not None and pin.chart != "karpenter":
            assert pin.digest_source, pin
    # every recorded digest belongs to an image and tag some chart runs
    assert set(DIGESTS) <= {(p.image, p.tag) for p in PINS}


def test_a_full_reference_through_the_cache_keeps_tag_and_digest() -> None:
    digest = "@sha256:" + "c" * 64
    ref = "public.ecr.aws/docker/library/python:3.12.12-slim-bookworm" + digest
    assert CACHE.cached_ref(ref) == (
        f"{CACHE.registry}/cache/ecr-public/docker/library/python:3.12.12-slim-bookworm{digest}"
    )
    assert CACHE.cached_ref("quay.io/a/b" + digest) == f"{CACHE.registry}/cache/quay/a/b{digest}"
    ours = f"{CACHE.registry}/aiplat-prod/x{digest}"
    assert CACHE.cached_ref(ours) == ours
    assert CACHE.cached_ref("nvcr.io/nvidia/x:v1") == "nvcr.io/nvidia/x:v1"
