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
