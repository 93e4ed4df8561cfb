"""The Route 53 drainer of ``aiplat rollout`` against a local moto server over HTTP: the drain switch the
stack made (a CALCULATED health check with threshold 1 and no children, inverted: serving, as
infra/edge/component.py declares it) has its Inverted flag cleared by the drain and set again by the undrain.
moto keeps the flag, it does not evaluate health; what Route 53 makes of each state is its API reference's
(infra/edge/documents.py)."""

from __future__ import annotations

from typing import Any

from infra.edge.documents import DRAIN_CHECK_TYPE, DRAIN_HEALTH_THRESHOLD, OUTPUT, SERVING_INVERTED
from infra.io.stackfiles import load_stack_config
from infra.ops.drain import ROUTE53_REGION, Route53Drainer

HK = load_stack_config("prod-hk-infer")


def _switch(aws, ref: str = "hk") -> str:
    """The drain switch as the stack creates it (the provider's CreateHealthCheck of infra/edge)."""
    created = aws.client("route53", ROUTE53_REGION).create_health_check(
        CallerReference=f"drain-switch-{ref}",
        HealthCheckConfig={
            "Type": DRAIN_CHECK_TYPE,
            "HealthThreshold": DRAIN_HEALTH_THRESHOLD,
            "ChildHealthChecks": [],
            "Inverted": SERVING_INVERTED,
        },
    )
    return created["HealthCheck"]["Id"]


def _serving(aws, switch: str) -> bool:
    """Whether the switch lets the region serve: inverted, since the check itself is always unhealthy."""
    check = aws.client("route53", ROUTE53_REGION).get_health_check(HealthCheckId=switch)
    return check["HealthCheck"]["HealthCheckConfig"]["Inverted"] is True


def _drainer(aws, outputs: dict[str, Any], waits: list[float]) -> Route53Drainer:
    return Route53Drainer(
        lambda service, region: aws.client(service, region),
        lambda stack: outputs.get(stack, {}),
        wait_s=90,
        sleep=waits.append,
    )


def test_drain_clears_the_switchs_inversion_and_waits_then_undrain_puts_it_back(aws) -> None:
    switch = _switch(aws)
    waits: list[float] = []
    drainer = _drainer(aws, {"prod-hk-infer": {OUTPUT: {"drainSwitch": switch}}}, waits)

    assert _serving(aws, switch)
    step = drainer.drain("prod-hk-infer", HK)
    assert step.ok and not _serving(aws, switch)
    assert waits == [90]  # cached answers expire before the update starts
    assert "ap-east-1 out of api.inference.example.com" in step.detail

    step = drainer.undrain("prod-hk-infer", HK)
    assert step.ok and _serving(aws, switch)
    assert waits == [90]


def test_a_stack_not_yet_in_the_global_endpoint_has_nothing_to_drain(aws) -> None:
    waits: list[float] = []
    step = _drainer(aws, {}, waits).drain("prod-hk-infer", HK)
    assert step.ok and "nothing to drain" in step.detail and waits == []


def test_a_switch_route53_does_not_know_fails_the_drain(aws) -> None:
    waits: list[float] = []
    outputs = {"prod-hk-infer": {OUTPUT: {"drainSwitch": "0b6e4f3c-0000-4000-8000-000000000000"}}}
    step = _drainer(aws, outputs, waits).drain("prod-hk-infer", HK)
    assert not step.ok and "route53: 0b6e4f3c" in step.detail and "NoSuchHealthCheck" in step.detail
    assert waits == []


def test_a_region_is_not_drained_while_the_other_one_is(aws) -> None:
    hk_switch, sg_switch = _switch(aws), _switch(aws, "sg")
    outputs = {
        "prod-hk-infer": {OUTPUT: {"drainSwitch": hk_switch}},
        "prod-sg-infer": {OUTPUT: {"drainSwitch": sg_switch}},
    }
    waits: list[float] = []
    configs = {s: load_stack_config(s) for s in ("prod-us-train", "prod-hk-infer", "prod-sg-infer")}
    drainer = Route53Drainer(
        lambda service, region: aws.client(service, region),
        lambda stack: outputs.get(stack, {}),
        configs=configs,
        wait_s=90,
        sleep=waits.append,
    )
    assert drainer.drain("prod-sg-infer", configs["prod-sg-infer"]).ok  # left drained by a failed wave
    step = drainer.drain("prod-hk-infer", HK)
    assert not step.ok and _serving(aws, hk_switch)
    assert step.detail.startswith("prod-sg-infer is out of api.inference.example.com already")
    assert drainer.undrain("prod-sg-infer", configs["prod-sg-infer"]).ok
    assert drainer.drain("prod-hk-infer", HK).ok and not _serving(aws, hk_switch)
