"""IAM documents of the cluster services: the load balancer controller's upstream policy and Karpenter's
controller policies fit IAM's managed-policy size and keep their scoping."""

from __future__ import annotations

import json

import pytest

from infra.karpenter import documents as karpenter
from infra.services.documents import lbc_iam

# IAM quota: a managed policy document holds at most 6,144 characters, whitespace not counted.
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html
MANAGED_POLICY_MAX = 6144


def _size(doc: dict) -> int:
    return len(json.dumps(doc, separators=(",", ":")))


def test_lbc_policy_is_upstreams_and_fits() -> None:
    doc = lbc_iam.controller_policy("aws")
    assert len(doc["Statement"]) == 16 and _size(doc) < MANAGED_POLICY_MAX
    actions = {
        a for s in doc["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert len(actions) == 80  # the v3.5.0 file's 80 unique actions
    with pytest.raises(ValueError, match="iam_policy_cn.json"):
        lbc_iam.controller_policy("aws-cn")


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
