"""Every shipped stack's plan and every example's: no container image from outside the stack's own ECR
registry, nor one without a digest, in any chart's values or any pod template (Deployments, DaemonSets,
Jobs, training runtimes, ...), in any namespace; except the known gaps listed here, each of which the plan
warns about (rule ``chart-images-pinned``) and ``aiplat preflight`` refuses. A new gap fails this test; so
does a listed one that no plan has any more (then take it off the list)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from infra.mirror.documents import chart_pins
from infra.mirror.pins import NO_IMAGES
from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
RELEASE = "kubernetes:helm.sh/v3:Release"
DIGEST = r"@sha256:[a-f0-9]{64}"
POD_LISTS = ("containers", "initContainers", "ephemeralContainers")

# (chart, values path of the image) of the images no stored source gives a digest for: each is a warning
# in the plan and a refusal in preflight until `aiplat images resolve` reads it from the registry
# (infra/mirror/digests.py). An image whose registry no rule of the stack takes is copied into the stack's
# ECR (`aiplat images copy`), by that digest too.
KNOWN_GAPS: frozenset[tuple[str, str]] = frozenset(
    {
        # copied: no pull through cache rule takes cr.fluentbit.io or EKS's own ECR account, and the shipped
        # stacks configure none for ghcr.io or Docker Hub (they need credentials)
        ("aws-efa-k8s-device-plugin", "image"),
        ("fluent-bit", "image"),
        ("fluent-bit", "hotReload.image"),
        ("kubeflow-trainer", "image"),
        # cached
        ("aws-fsx-csi-driver", "image"),
        ("aws-fsx-csi-driver", "sidecars.livenessProbe.image"),
        ("aws-fsx-csi-driver", "sidecars.nodeDriverRegistrar.image"),
        ("aws-fsx-csi-driver", "sidecars.provisioner.image"),
        ("aws-fsx-csi-driver", "sidecars.resizer.image"),
    }
)


def _ours(region: str) -> re.Pattern[str]:
    registry = re.escape(f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/")
    return re.compile("^" + registry + r"[a-z0-9][a-z0-9._/-]*(:[\w][\w.-]*)?" + DIGEST + "$")


def _at(values: Any, path: str) -> Any:
    node = values
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def image_of(node: Any) -> str | None:
    """The image reference a chart's image mapping makes (registry, repository, tag, digest or sha), or
    None if it names no repository."""
    if not isinstance(node, dict) or not isinstance(node.get("repository"), str):
        return None
    ref = node["repository"]
    if node.get("registry"):
        ref = f"{node['registry']}/{ref}"
    tag = node.get("tag")
    if tag:
        ref += f":{tag}"
    if node.get("digest"):
        ref += "@" + str(node["digest"])
    elif node.get("sha"):
        ref += "@sha256:" + str(node["sha"])
    return ref


def _mappings(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str):
            yield ".".join(path), values
        for k, v in values.items():
            yield from _mappings(v, (*path, str(k)))


def _pod_images(obj: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(path, image) of every container of every pod spec anywhere in ``obj``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in POD_LISTS and isinstance(v, list):
                for c in v:
                    if isinstance(c, dict) and isinstance(c.get("image"), str):
                        yield ".".join((*path, k, str(c.get("name")))), c["image"]
            else:
                yield from _pod_images(v, (*path, str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _pod_images(v, (*path, str(i)))


def plan_gaps(plan: Plan) -> dict[tuple[str, str], str]:
    """(chart or resource, values path or container) -> the image, for every image that is not ours by
    digest."""
    ours = _ours(plan.region)
    gaps: dict[tuple[str, str], str] = {}
    for r in plan.resources:
        if r.type == RELEASE:
            chart = str(r.inputs["chart"]).rsplit("/", 1)[-1]
            version = str(r.inputs["version"])
            values = r.inputs.get("values") or {}
            pins = chart_pins(chart, version)
            if not chart_pins(chart, version, off=True) and (chart, version) not in NO_IMAGES:
                gaps[(chart, "*")] = "no image of the chart is recorded"
            for pin in pins:
                ref = image_of(_at(values, pin.values)) if pin.values != "" else None
                if ref is None or not ours.match(ref):
                    gaps[(chart, pin.values)] = ref or f"{pin.image}:{pin.tag} (the chart's default)"
            for path, node in _mappings(values):
                ref = image_of(node)
                if ref is not None and not ours.match(ref):
                    gaps.setdefault((chart, path), ref)
        for path, image in _pod_images(r.inputs):
            if not ours.match(image):
                gaps[(f"{r.type.rsplit(':', 1)[-1]}/{r.name}", path)] = image
    return gaps


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


@pytest.mark.parametrize("stack", ALL)
def test_every_image_is_ours_by_digest_but_the_known_gaps(plans, stack: str) -> None:
    plan = plans[stack]
    gaps = plan_gaps(plan)
    new = {k: v for k, v in gaps.items() if k not in KNOWN_GAPS}
    assert new == {}, f"{stack}: images not from our ECR by digest and not known gaps: {new}"
    # every known gap of the plan is one it warns about, and it warns about no chart it does not install
    warnings = [f.problem for f in plan.findings if f.rule == "chart-images-pinned"]
    warned = " ".join(warnings)
    for chart, path in gaps:
        assert f"{path}: " in warned or path == "*", (stack, chart, path)
    charts_warned = {m[1] for w in warnings if (m := re.search(r"image\(s\) of (\S+) not from", w))}
    assert charts_warned == {chart for chart, _ in gaps}, stack


@pytest.mark.parametrize("stack", ALL)
def test_the_images_left_at_the_charts_default_never_run(plans, stack: str) -> None:
    """An image recorded as off (``ImagePin.off``: no override, no digest) runs only under a value that every
    release of its chart in the plan sets the other way; the same image is no value of ours either."""
    for r in plans[stack].by_type(RELEASE):
        chart = str(r.inputs["chart"]).rsplit("/", 1)[-1]
        values = r.inputs.get("values") or {}
        for pin in chart_pins(chart, str(r.inputs["version"]), off=True):
            if pin.off is not None:
                assert _at(values, pin.off.path) is pin.off.value, (stack, chart, pin.values, pin.off.path)
                assert image_of(_at(values, pin.values)) is None, (stack, chart, pin.values)


def test_every_known_gap_still_occurs(plans) -> None:
    seen = set().union(*(plan_gaps(p) for p in plans.values()))
    assert KNOWN_GAPS - seen == set(), "known gaps no plan has any more: take them off KNOWN_GAPS"


def test_the_check_sees_a_tag_a_public_registry_and_the_charts_default() -> None:
    ours = _ours("us-west-2")
    good = f"{ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/aiplat-prod-train/quay/x/y@sha256:" + "a" * 64
    assert ours.match(good)
    assert not ours.match(good.split("@")[0] + ":v1")
    assert not ours.match("quay.io/x/y@sha256:" + "a" * 64)
    assert not ours.match(good.replace("us-west-2", "us-east-1"))
    assert image_of({"registry": "quay.io", "repository": "a/b", "tag": "v1", "sha": "a" * 64}) == (
        "quay.io/a/b:v1@sha256:" + "a" * 64
    )
    assert image_of({"repository": "r", "tag": "v1@sha256:" + "b" * 64}) == "r:v1@sha256:" + "b" * 64
