"""The pack's rules for issue 43's node and network findings, on real recorded plans: the stack as the program
builds it passes; the same plan with the fix taken out (an endpoint without policy or with an Allow that
names no account, a GPU launch template or EC2NodeClass without the toolkit setting, the device plugin on
``envvar``) is refused."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra.review import review_plan

ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
RELEASE = "kubernetes:helm.sh/v3:Release"
ENDPOINT_RULE = "interface-endpoint-account-policy"
GPU_RULE = "gpu-nodes-ignore-visible-devices-envvar"


@pytest.fixture(scope="module")
def train(plan_stack) -> dict[str, Any]:
    return plan_stack("prod-us-train").as_json()


@pytest.fixture(scope="module")
def karpenter(plan_stack) -> dict[str, Any]:
    return plan_stack("dev-us-train").as_json()


def _violations(plan: dict[str, Any], rule: str) -> list[str]:
    return [d.message for d in review_plan(plan).diagnostics if d.policy == rule]


def _resources(plan: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_]


def test_the_built_stacks_pass_both_rules(train, karpenter) -> None:
    for plan in (train, karpenter):
        assert _violations(plan, ENDPOINT_RULE) == []
        assert _violations(plan, GPU_RULE) == []


def test_an_interface_endpoint_without_policy_or_with_an_open_allow_is_refused(train) -> None:
    plan = copy.deepcopy(train)
    interface = [r for r in _resources(plan, ENDPOINT) if r["inputs"].get("vpcEndpointType") == "Interface"]
    sts = next(r for r in interface if r["inputs"]["serviceName"].endswith(".sts"))
    logs = next(r for r in interface if r["inputs"]["serviceName"].endswith(".logs"))
    del sts["inputs"]["policy"]
    document = json.loads(logs["inputs"]["policy"])
    document["Statement"].append(
        {"Sid": "Open", "Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}
    )
    logs["inputs"]["policy"] = json.dumps(document)
    found = _violations(plan, ENDPOINT_RULE)
    assert any(".sts has no policy" in m for m in found), found
    assert any(".logs: statement 'Open' allows without any of" in m for m in found), found
    assert len(found) == 2


def test_gpu_nodes_without_the_toolkit_setting_are_refused(train, karpenter) -> None:
    plan = copy.deepcopy(train)
    templates = [r for r in plan["resources"] if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"]
    gpu = next(r for r in templates if r["name"] == "pool-train-lt")
    gpu["inputs"].pop("userData")
    (plugin,) = [r for r in _resources(plan, RELEASE) if r["inputs"]["name"] == "nvidia-device-plugin"]
    plugin["inputs"]["values"]["deviceListStrategy"] = "envvar"
    found = _violations(plan, GPU_RULE)
    assert any("'pool-train-lt': user data does not set" in m for m in found), found
    assert any("deviceListStrategy is envvar" in m for m in found), found
    assert not any("pool-system-lt" in m for m in found), found  # CPU pools need nothing

    plan = copy.deepcopy(karpenter)
    (node_class,) = [r for r in plan["resources"] if r["type"].endswith(":EC2NodeClass")]
    node_class["inputs"]["spec"].pop("userData")
    (plugin,) = [r for r in _resources(plan, RELEASE) if r["inputs"]["name"] == "nvidia-device-plugin"]
    plugin["inputs"]["values"].pop("deviceListStrategy")
    found = _violations(plan, GPU_RULE)
    assert any("EC2NodeClass" in m and "userData does not set" in m for m in found), found
    assert any("deviceListStrategy is unset (envvar)" in m for m in found), found


DNS_RULE = "vpc-dns-firewall"
FW = "aws:route53/"


def test_a_vpc_without_a_blocking_dns_firewall_is_refused(train) -> None:
    assert _violations(train, DNS_RULE) == []
    unassociated = copy.deepcopy(train)
    unassociated["resources"] = [
        r for r in unassociated["resources"] if "FirewallRuleGroupAssociation" not in r["type"]
    ]
    (found,) = _violations(unassociated, DNS_RULE)
    assert "has no DNS Firewall rule group" in found
    alerting = copy.deepcopy(train)
    (catch_all,) = [
        r
        for r in alerting["resources"]
        if r["type"].endswith(":ResolverFirewallRule") and r["inputs"]["action"] == "BLOCK"
    ]
    catch_all["inputs"]["action"] = "ALERT"
    (found,) = _violations(alerting, DNS_RULE)
    assert "no DNS Firewall rule blocks the names not allowed" in found
    late = copy.deepcopy(train)
    (association,) = [r for r in late["resources"] if "FirewallRuleGroupAssociation" in r["type"]]
    association["inputs"]["priority"] = 10000
    (found,) = _violations(late, DNS_RULE)
    assert "association priority 10000 is outside 100-9900" in found
