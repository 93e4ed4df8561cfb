"""Issue 33 (security, round two) on the plans: every finding of the review has a test here that fails on
the code before the fix, asserted on what the real program registered (or on the pure builders the
program uses, where the plan cannot show it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
INFER = ["prod-hk-infer", "prod-sg-infer"]
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _release(plan: Plan, name: str) -> RecordedResource:
    (r,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == name]
    return r


def _statements(r: RecordedResource, key: str = "policy") -> list[dict[str, Any]]:
    return json.loads(r.inputs[key])["Statement"]


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


# -- KEDA reads no Secret outside its namespace -----------------------------------------------------------


@pytest.mark.parametrize("stack", INFER)
def test_keda_operator_and_metrics_server_read_no_secret_outside_their_namespace(plan_stack, stack) -> None:
    # keda/values.yaml v2.20.2: with restrict.secret false the operator's ClusterRole lists and watches
    # every Secret of the cluster (templates/manager/clusterrole.yaml)
    values = _release(plan_stack(stack), "keda").inputs["values"]
    assert values["permissions"]["operator"]["restrict"]["secret"] is True
    assert values["permissions"]["metricServer"]["restrict"]["secret"] is True


# -- the platform trainer reads its own dataset prefix only ----------------------------------------------


def _trainer_policy(plan: Plan) -> list[dict[str, Any]]:
    return _statements(plan.one("aws:iam/rolePolicy:RolePolicy", "pod-roles-trainer-policy"))


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/dev-us-train", "examples/fsx"])
def test_platform_trainer_reads_only_its_own_dataset_prefix(plans, stack: str) -> None:
    plan = plans[stack]
    datasets = f"arn:aws:s3:::{plan.one('aws:s3/bucket:Bucket', 'storage-datasets').inputs['bucket']}"
    prefix = plan.config["storage"]["trainer"]["prefix"]
    reaching = [
        st
        for st in _trainer_policy(plan)
        if st["Effect"] == "Allow" and any(r.startswith(datasets) for r in _list(st["Resource"]))
    ]
    assert reaching
    for st in reaching:
        objects = [r for r in _list(st["Resource"]) if r.startswith(datasets + "/")]
        assert objects == [] or objects == [f"{datasets}/{prefix}/*"], st
        if "s3:ListBucket" in _list(st["Action"]):
            assert st["Condition"]["StringLike"]["s3:prefix"] == [f"{prefix}/*", prefix], st


@pytest.mark.parametrize("stack", ["dev-us-train", "fsx"])
def test_platform_runs_read_their_dataset_under_the_trainer_prefix(stack_config, stack: str) -> None:
    from infra.stack.parse import parse_platform_config
    from infra.storage.config.storage import BucketPurpose
    from infra.training.documents.stack import data_uri
    from tests.conftest import EXAMPLES_DIR
    from tests.support.config_cases import without_teams

    raw = stack_config(stack) if stack in STACKS else _example(EXAMPLES_DIR, stack)
    without_teams(raw)
    cfg = parse_platform_config(raw)
    assert cfg.training is not None
    for run in cfg.training.runs.values():
        uri = data_uri(cfg, run.dataset)
        if cfg.cluster_services.fsx.enabled:  # the FSx example links the trainer's prefix
            assert uri.startswith(cfg.cluster_services.fsx.mount_path), uri
        else:
            bucket = cfg.bucket_name(BucketPurpose.datasets)
            assert uri == f"s3://{bucket}/{cfg.storage.trainer.prefix}/{run.dataset}"


def _example(folder, name: str) -> dict:
    import yaml

    from infra.core.project import CONFIG_KEY

    return yaml.safe_load((folder / f"Pulumi.{name}.yaml").read_text())["config"][CONFIG_KEY]


# -- reserved team names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["trainer", "release"])
def test_a_team_may_not_take_a_platform_prefix(stack_config, name: str) -> None:
    from tests.conftest import assert_rejected

    raw = stack_config("prod-us-train")
    team = next(iter(raw["teams"].values()))
    assert_rejected(raw, f"teams.{name}", team, [f"teams.{name}: {name!r} is reserved", "rename the team"])


def test_a_team_may_not_take_the_first_segment_of_a_configured_prefix(stack_config) -> None:
    from tests.conftest import assert_rejected, with_value

    trainer = {"namespace": "training", "service_account": "trainer", "prefix": "platform/trainer"}
    raw = with_value(stack_config("prod-us-train"), "storage.trainer", trainer)
    team = next(iter(raw["teams"].values()))
    assert_rejected(raw, "teams.platform", team, ["teams.platform: 'platform' is reserved"])


# -- Karpenter's interruption queue takes only our rules' events -------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_interruption_queue_accepts_only_our_rules(plans, stack: str) -> None:
    plan = plans[stack]
    queues = plan.by_type("aws:sqs/queuePolicy:QueuePolicy")
    if not queues:
        pytest.skip("no Karpenter here")
    (policy,) = queues
    senders = [st for st in _statements(policy) if st["Effect"] == "Allow"]
    assert senders
    (queue,) = plan.by_type("aws:sqs/queue:Queue")
    feeding = [r for r in plan.by_type("aws:cloudwatch/eventRule:EventRule") if r.parent == queue.parent]
    for st in senders:
        assert st["Principal"] == {"Service": "events.amazonaws.com"}, st
        assert st["Condition"]["StringEquals"]["aws:SourceAccount"] == "123456789012"
        sources = st["Condition"]["ArnEquals"]["aws:SourceArn"]
        assert len(sources) == len(feeding) >= 4
        assert policy.urn and set(r.urn for r in feeding) <= set(policy.dependencies)
        assert all(":events:" in a and ":rule/" in a for a in sources)
