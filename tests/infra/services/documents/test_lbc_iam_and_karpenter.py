"""IAM documents of the cluster services: the load balancer controller's upstream policy and Karpenter's
controller policies fit IAM's managed-policy size and keep their scoping."""

from __future__ import annotations

import json

import pytest

from infra.core.policy_quotas import MANAGED_POLICY_CHARS as MANAGED_POLICY_MAX
from infra.core.policy_quotas import iam_size
from infra.karpenter import documents as karpenter
from infra.services.documents import lbc_iam


def _size(doc: dict) -> int:
    return iam_size(json.dumps(doc))


def test_lbc_policy_is_upstreams_and_fits() -> None:
    doc = lbc_iam.controller_policy("aws")
    assert len(doc["Statement"]) == 16 and _size(doc) < MANAGED_POLICY_MAX
    actions = {
        a for s in doc["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert len(actions) == 80  # the v3.5.0 file's 80 unique actions
    with pytest.raises(ValueError, match="iam_policy_cn.json"):
        lbc_iam.controller_policy("aws-cn")


@pytest.mark.parametrize("region", ["us-east-1", "ap-southeast-1"])
def test_what_the_controller_role_gets_is_two_policies_that_each_fit(region: str) -> None:
    """Measured on the scoped documents the stacks deploy (longer than upstream's: region, account and
    cluster conditions), not on the upstream file."""
    scoped = lbc_iam.scoped_policy(cluster_name="aiplat-prod-infer", region=region, account_id="123456789012")
    assert _size(scoped) > MANAGED_POLICY_MAX  # why it is split
    parts = lbc_iam.scoped_policies(
        cluster_name="aiplat-prod-infer", region=region, account_id="123456789012"
    )
    assert tuple(parts) == lbc_iam.PARTS
    assert all(_size(d) < MANAGED_POLICY_MAX for d in parts.values())
    assert [s for d in parts.values() for s in d["Statement"]] == scoped["Statement"]


def test_karpenter_policies_fit_and_are_scoped_to_the_cluster() -> None:
    docs = karpenter.controller_policies(
        partition="aws",
        region="ap-east-1",
        account_id="123456789012",
        cluster_name="aiplat-prod-infer",
        node_role_arn="arn:aws:iam::123456789012:role/node",
        queue_arn="arn:aws:sqs:ap-east-1:123456789012:q",
    )
    assert set(docs) == {
        "NodeLifecycle",
        "IAMIntegration",
        "EKSIntegration",
        "Interruption",
        "ZonalShift",
        "ResourceDiscovery",
    }
    assert tuple(docs) == karpenter.CONTROLLER_POLICY_NAMES  # the component declares these
    assert all(_size(d) < MANAGED_POLICY_MAX for d in docs.values())
    assert sum(_size(d) for d in docs.values()) > MANAGED_POLICY_MAX  # they could not be one policy
    lifecycle = {s["Sid"]: s for s in docs["NodeLifecycle"]["Statement"]}
    deletion = lifecycle["AllowScopedDeletion"]["Condition"]["StringEquals"]
    assert deletion == {"aws:ResourceTag/kubernetes.io/cluster/aiplat-prod-infer": "owned"}
    passrole = docs["IAMIntegration"]["Statement"][0]
    assert (
        passrole["Resource"] == "arn:aws:iam::123456789012:role/node" and passrole["Action"] == "iam:PassRole"
    )
    assert docs["Interruption"]["Statement"][0]["Resource"] == "arn:aws:sqs:ap-east-1:123456789012:q"
    regional = docs["ResourceDiscovery"]["Statement"][0]["Condition"]["StringEquals"]
    assert regional == {"aws:RequestedRegion": "ap-east-1"}


def test_interruption_queue_refuses_plain_http_and_takes_eventbridge() -> None:
    doc = karpenter.interruption_queue_policy("arn:aws:sqs:us-east-1:1:q")
    allow, deny = doc["Statement"]
    assert allow["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {p["detail-type"][0] for p in karpenter.INTERRUPTION_EVENTS.values()} == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
