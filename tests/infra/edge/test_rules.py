"""Plan-time rules of the global endpoint: its zone, and what the infer stacks serving one name agree on
(the served names, API keys' source, validation record owner), checked against the project's real
stack files; one region only is a warning."""

from __future__ import annotations

import dataclasses

import pytest

from infra.edge.rules import global_endpoint_agreement, global_endpoint_one_account, global_endpoint_regions
from infra.io.stackfiles import load_stack_config, read_stack_index
from infra.stack.registry import Level, RuleContext
from tests.support.config_cases import RULES, all_of, assert_refused, drop_at, set_at

GE = "aiplat:platform.inference.global_endpoint"
V = "20261130T100100Z-step4"
HK_CERT = "arn:aws:acm:ap-east-1:123456789012:certificate/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"

CASES = [
    (
        "no-zone",
        all_of(
            drop_at("inference.https.dns_zone_id"),
            drop_at("inference.https.dns_zone_name"),
            set_at("inference.https.certificate_arn", HK_CERT),
        ),
        f"{GE}.name: api.inference.example.com needs a Route 53 zone for its latency records and "
        "certificate validation, and inference.https names none; fix: set inference.https.dns_zone_id and "
        "dns_zone_name",
    ),
    (
        "outside-the-zone",
        set_at("inference.global_endpoint.name", "api.example.org"),
        f"{GE}.name: api.example.org is not below the zone example.com (inference.https.dns_zone_name)",
    ),
    (
        "the-regional-name",
        set_at("inference.global_endpoint.name", "sg.inference.example.com"),
        f"{GE}.name: sg.inference.example.com is also this region's name (inference.https.domain)",
    ),
    (
        "a-model-only-here",
        set_at(
            "inference.models.gpt2-medium",
            {"release": {"name": "gpt2-medium", "version": V}, "node_pools": ["gpu"]},
        ),
        "aiplat:platform.inference.models: 'gpt2-medium' is served here but not by prod-hk-infer, which "
        "serves the same global name api.inference.example.com: Route 53 sends a client to either region by "
        "latency, never by the model it asks for, so a request for 'gpt2-medium' landing in prod-hk-infer "
        "would get 404; fix: serve 'gpt2-medium' in prod-hk-infer too",
    ),
    (
        "a-model-only-there",
        all_of(
            set_at(
                "inference.models.gpt2-medium",
                {"release": {"name": "gpt2-small", "version": V}, "node_pools": ["gpu"]},
            ),
            drop_at("inference.models.gpt2-small"),
        ),
        "aiplat:platform.inference.models: prod-hk-infer serves 'gpt2-small' under the same global name "
        "api.inference.example.com, this stack does not: a request for 'gpt2-small' routed here by latency "
        "would get 404; fix: serve 'gpt2-small' here too, or remove it from prod-hk-infer",
    ),
    (
        "an-adapter-only-here",
        all_of(
            set_at("inference.models.gpt2-small.lora", {}),
            set_at(
                "inference.models.gpt2-small.adapters",
                {"support-bot": {"release": {"name": "support-bot", "version": V}}},
            ),
        ),
        "aiplat:platform.inference.models: 'support-bot' is served here but not by prod-hk-infer",
    ),
    (
        "another-key-source",
        set_at("storage.source_stack", "dev-us-train"),
        'aiplat:platform.storage.source_stack: storage.source_stack is "dev-us-train" here and '
        '"prod-us-train" in prod-hk-infer',
    ),
    (
        "an-owner-that-does-not-serve-the-name",
        set_at("inference.global_endpoint.validation_record_owner", "prod-us-train"),
        f"{GE}.validation_record_owner: 'prod-us-train' is not an infer stack serving "
        "api.inference.example.com (those are: prod-hk-infer, prod-sg-infer); no stack would declare "
        "the certificate's validation record",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "expected"), CASES, ids=[c[0] for c in CASES])
def test_refused_before_any_resource(stack_config, monitors, name, mutate, expected) -> None:
    raw = stack_config("prod-sg-infer")
    mutate(raw)
    assert_refused(raw, expected, monitors, RULES)


def test_the_shipped_infer_stacks_agree() -> None:
    stacks = read_stack_index()
    for stack in ("prod-hk-infer", "prod-sg-infer"):
        ctx = RuleContext(load_stack_config(stack), stack=stack, stacks=stacks)
        assert list(global_endpoint_agreement(ctx)) == []
        assert list(global_endpoint_regions(ctx)) == []
    # the index saw both stacks' terms (the rule compared something)
    assert stacks.stacks["prod-hk-infer"].serving == stacks.stacks["prod-sg-infer"].serving != ()


def test_stacks_of_one_name_in_two_accounts_are_refused(stack_doc, write_stack) -> None:
    """ACM's validation record is per domain and account: the owner's record validates nothing in another
    account, so SG would wait out the 75-minute validation and fail."""
    from infra.core.project import CONFIG_KEY
    from infra.schema.parse import parse_platform_config

    docs = {s: stack_doc(s) for s in ("prod-us-train", "prod-hk-infer", "prod-sg-infer")}
    docs["prod-hk-infer"]["config"][CONFIG_KEY]["security"]["account"]["id"] = "111111111111"
    for stack, doc in docs.items():
        folder = write_stack(stack, doc)
    stacks = read_stack_index(folder)
    sg = docs["prod-sg-infer"]["config"][CONFIG_KEY]

    def findings(account: str | None):
        sg["security"]["account"]["id"] = account
        ctx = RuleContext(parse_platform_config(sg), stack="prod-sg-infer", stacks=stacks)
        return list(global_endpoint_one_account(ctx))

    (refused,) = findings("222222222222")
    assert refused.level is Level.error
    assert refused.one_line().startswith(
        "aiplat:platform.security.account.id: this stack deploys into account 222222222222 and "
        "prod-hk-infer, which serves the same global name api.inference.example.com, into 111111111111: "
        "ACM validation records are per domain and account"
    )
    assert findings("111111111111") == []
    (unknown,) = findings(None)
    assert unknown.level is Level.warning and "prod-sg-infer names no security.account.id" in unknown.problem


def test_one_region_only_is_a_warning() -> None:
    stacks = read_stack_index()
    alone = dataclasses.replace(
        stacks, stacks={k: v for k, v in stacks.stacks.items() if k != "prod-sg-infer"}
    )
    ctx = RuleContext(load_stack_config("prod-hk-infer"), stack="prod-hk-infer", stacks=alone)
    (finding,) = global_endpoint_regions(ctx)
    assert finding.level is Level.warning
    assert finding.one_line() == (
        f"{GE}.name: api.inference.example.com is served from ap-east-1 only: when that region cannot "
        "serve, neither can the global name; fix: add the same inference.global_endpoint to an infer "
        "stack in another region (see https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/"
        "routing-policy-latency.html)"
    )


def test_release_versions_may_differ_between_the_regions_of_one_name(stack_config) -> None:
    """A promotion moves one region at a time: the same served names at other versions agree."""
    raw = stack_config("prod-sg-infer")
    raw["inference"]["models"]["gpt2-small"]["release"]["version"] = "20261201T000000Z-step9"
    from infra.schema.parse import parse_platform_config

    ctx = RuleContext(parse_platform_config(raw), stack="prod-sg-infer", stacks=read_stack_index())
    assert list(global_endpoint_agreement(ctx)) == []
