"""Accounts (issue 24 item 5): a prod and a dev stack never share an AWS account unless both allow it, and
the credentials of `pulumi up` belong to the configured account."""

from __future__ import annotations

import pytest

from infra.core.project import CONFIG_KEY
from infra.io.stackfiles import read_stack_index
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config
from tests.conftest import assert_rejected

FIELD = "aiplat:platform.security.account.id"
SHIPPED = ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer")


def _findings(folder, stack: str, raw: dict) -> list:
    ctx = RuleContext(parse_platform_config(raw), stack=stack, stacks=read_stack_index(folder))
    return [f for f in run_rules(Phase.plan, ctx) if f.rule == "prod-and-dev-accounts-apart"]


def _write(write_stack, stack_doc, accounts: dict[str, dict]) -> tuple:
    docs = {}
    for name in SHIPPED:
        doc = stack_doc(name)
        if name in accounts:
            sec = doc["config"][CONFIG_KEY].setdefault("security", {})
            sec.setdefault("account", {}).update(accounts[name])
        folder = write_stack(name, doc)
        docs[name] = doc["config"][CONFIG_KEY]
    return folder, docs


def test_prod_and_dev_in_one_account_are_refused(stack_doc, write_stack) -> None:
    same = {"id": "111111111111"}
    folder, docs = _write(write_stack, stack_doc, {"dev-us-train": same, "prod-us-train": same})
    [finding] = _findings(folder, "dev-us-train", docs["dev-us-train"])
    assert finding.level is Level.error
    assert finding.one_line().startswith(
        f"{FIELD}: 111111111111 is also the account of prod stack prod-us-train: a dev and a prod stack in "
        "one account share IAM"
    )
    assert "security.account.allow_shared_account: true on both stacks" in finding.fix
    # and the prod stack sees it from its side
    [other] = _findings(folder, "prod-us-train", docs["prod-us-train"])
    assert "also the account of dev stack dev-us-train" in other.problem


def test_separate_accounts_or_sharing_allowed_by_both_pass(stack_doc, write_stack) -> None:
    folder, docs = _write(
        write_stack,
        stack_doc,
        {"dev-us-train": {"id": "222222222222"}, "prod-us-train": {"id": "111111111111"}},
    )
    assert _findings(folder, "dev-us-train", docs["dev-us-train"]) == []
    # two prod stacks in one account are fine
    folder, docs = _write(
        write_stack,
        stack_doc,
        {"prod-hk-infer": {"id": "111111111111"}, "prod-us-train": {"id": "111111111111"}},
    )
    assert _findings(folder, "prod-hk-infer", docs["prod-hk-infer"]) == []
    shared = {"id": "111111111111", "allow_shared_account": True}
    folder, docs = _write(write_stack, stack_doc, {"dev-us-train": shared, "prod-us-train": shared})
    assert _findings(folder, "dev-us-train", docs["dev-us-train"]) == []
    # one side allowing it is not enough
    folder, docs = _write(
        write_stack, stack_doc, {"dev-us-train": shared, "prod-us-train": {"id": "111111111111"}}
    )
    assert len(_findings(folder, "dev-us-train", docs["dev-us-train"])) == 1


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ("security.account.id", "12345", "'12345' is not a 12-digit AWS account ID"),
        ("security.account.deployer_role", "bad role", "'bad role' is not an IAM role name"),
        ("security.break_glass_principals", ["arn:aws:iam::123:root"], "is not an IAM role ARN"),
    ],
)
def test_bad_account_fields_are_refused(stack_config, path: str, value: object, fragment: str) -> None:
    assert_rejected(stack_config("prod-us-train"), path, value, [path, fragment])


def test_credentials_of_another_account_are_refused(stack_config) -> None:
    from infra.plan.runner import run_plan

    raw = stack_config("prod-us-train")
    raw["security"]["account"]["id"] = "999999999999"  # the offline plan's account is 123456789012
    with pytest.raises(Exception) as info:
        run_plan("prod-us-train", parse_platform_config(raw))
    assert (
        f"{FIELD}: is 999999999999 but the credentials are of account 123456789012; fix: deploy with "
        "credentials of account 999999999999" in str(info.value)
    )


def test_the_efa_exporter_image_must_be_pinned_by_digest(stack_config) -> None:
    assert_rejected(
        stack_config("prod-us-train"),
        "monitoring.efa_exporter_image",
        "public.ecr.aws/docker/library/python:3.12.12-slim-bookworm",
        ["monitoring.efa_exporter_image", "is not an image pinned by digest; fix: append @sha256:<digest>"],
    )
