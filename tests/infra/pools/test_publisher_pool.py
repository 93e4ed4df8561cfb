"""The release publisher's node pool on every shipped and example train stack: planned as a tainted,
labelled managed node group of its own, and the publisher's namespace bound to the policy that pins its pods
there (tests/infra/admission/test_publisher_nodes.py evaluates the policy)."""

from __future__ import annotations

import pytest

from infra.core.labels import PUBLISHER_NODE_LABEL, PUBLISHER_TAINT
from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS
from tests.support.config_cases import assert_refused

P = "aiplat:platform"
ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def test_every_train_stack_is_checked(plans) -> None:
    assert sum(p.config["role"] == "train" for p in plans.values()) >= 7


@pytest.mark.parametrize("stack", ALL)
def test_the_publisher_runs_on_a_tainted_pool_of_its_own(plans, stack: str) -> None:
    plan = plans[stack]
    if plan.config["role"] != "train":
        return
    key, value, _ = PUBLISHER_TAINT
    groups = plan.by_type(NODE_GROUP)
    tainted = [g for g in groups if any(t["key"] == key for t in g.inputs.get("taints") or [])]
    [group] = tainted  # one pool, and no other node group carries the taint
    [taint] = group.inputs["taints"]
    # the EKS API's spelling of the effect (NodeGroup taints: NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE)
    assert (taint["value"], taint["effect"]) == (value, "NO_SCHEDULE")
    assert group.inputs["labels"][PUBLISHER_NODE_LABEL[0]] == PUBLISHER_NODE_LABEL[1]
    scaling = group.inputs["scalingConfig"]
    assert scaling["desiredSize"] >= 1 and scaling["minSize"] >= 1
    # no other pool labels its nodes as the publisher's
    for g in groups:
        if g is not group:
            assert PUBLISHER_NODE_LABEL[0] not in (g.inputs.get("labels") or {})
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        return
    # the publisher's namespace is a workload namespace, which the pinning policy is bound to
    namespace = plan.config["storage"]["publisher"]["namespace"]
    [ns] = [
        n for n in plan.by_type("kubernetes:core/v1:Namespace") if n.inputs["metadata"]["name"] == namespace
    ]
    [binding] = [
        b for b in plan.by_type(BINDING) if b.inputs["spec"]["policyName"] == "aiplat-publisher-nodes"
    ]
    selector = binding.inputs["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]
    assert selector.items() <= ns.inputs["metadata"]["labels"].items()
    [policy] = [p for p in plan.by_type(VAP) if p.inputs["metadata"]["name"] == "aiplat-publisher-nodes"]
    assert any(f"'{namespace}'" in v["expression"] for v in policy.inputs["spec"]["validations"])


def _publisher(raw: dict) -> dict:
    [name] = [n for n, p in raw["node_pools"].items() if PUBLISHER_TAINT[0] in (p.get("taints") or {})]
    return raw["node_pools"][name]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(
            lambda c: c["node_pools"].pop("publisher"),
            f"{P}.node_pools: no pool for the release publisher: its pods (which may kms:Sign releases) "
            "would share nodes with other pods",
            id="no-pool",
        ),
        pytest.param(
            lambda c: _publisher(c)["taints"][PUBLISHER_TAINT[0]].update(effect="PreferNoSchedule"),
            f"{P}.node_pools: no pool for the release publisher",
            id="soft-taint",
        ),
        pytest.param(
            lambda c: _publisher(c).update(labels={}),
            f"{P}.node_pools: no pool for the release publisher",
            id="no-label",
        ),
        pytest.param(
            lambda c: _publisher(c).update(min_size=0, desired_size=0),
            f"{P}.node_pools.publisher.desired_size: 0: no cluster autoscaler grows a managed node group",
            id="empty",
        ),
        pytest.param(
            lambda c: c["node_pools"].update(publisher2=dict(_publisher(c))),
            f"{P}.node_pools: pools ['publisher', 'publisher2'] all carry the publisher's label and taint",
            id="two-pools",
        ),
    ],
)
def test_a_train_stack_without_a_proper_publisher_pool_is_refused(stack_config, monitors, mutate, expected):
    raw = stack_config("prod-us-train")
    mutate(raw)
    assert_refused(raw, expected, monitors)
