"""The load balancer controller's WAF and Shield permissions, evaluated on the scoped policy
(tests/support/iam_eval.py): allowed on what the controller passes (its ALB, the annotation's web ACL, its
protections), refused on another account's or region's, and left on ``"*"`` where AWS authorizes only that
(infra/services/documents/lbc_waf_shield.py has the reference behind each)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.services.documents import lbc_iam
from tests.support.iam_eval import Principal, Target, decide

ACCOUNT, OTHER_ACCOUNT = "123456789012", "210987654321"
REGION, OTHER_REGION = "ap-southeast-1", "us-east-1"
CLUSTER = "aiplat-prod-infer"
TAG = "elbv2.k8s.aws/cluster"
ACL_ID = "3ce5f282-9773-5808-bef4-dabc5a9b9e64"


def _statements(web_acls: list[str] | None = None) -> list[dict[str, Any]]:
    doc = lbc_iam.scoped_policy(cluster_name=CLUSTER, region=REGION, account_id=ACCOUNT, web_acls=web_acls)
    return doc["Statement"]


def _lbc(web_acls: list[str] | None = None) -> Principal:
    return Principal("lbc", f"arn:aws:iam::{ACCOUNT}:role/lbc", tuple(_statements(web_acls)))


def _alb(account: str = ACCOUNT, region: str = REGION, kind: str = "app") -> str:
    return f"arn:aws:elasticloadbalancing:{region}:{account}:loadbalancer/{kind}/k8s-infer-web-0123/4567"


def _web_acl(service: str, account: str = ACCOUNT, region: str = REGION, scope: str = "regional") -> str:
    if service == "wafv2":
        return f"arn:aws:wafv2:{region}:{account}:{scope}/webacl/aiplat-prod-infer-inference/{ACL_ID}"
    return f"arn:aws:waf-regional:{region}:{account}:webacl/{ACL_ID}"


def _decide(action: str, arn: str, tags: dict[str, str] | None = None, region: str = REGION) -> str:
    return decide(_lbc(), action, Target(arn, "waf", tags=tags or {}), {"aws:RequestedRegion": region})


@pytest.mark.parametrize("service", ["wafv2", "waf-regional"])
def test_web_acl_association_is_bound_to_our_accounts_and_regions_albs_and_web_acls(service: str) -> None:
    ours, acl = _alb(), _web_acl(service)
    # AssociateWebACL is authorized on both resources of the call: the controller's ALB and the web ACL
    associate = f"{service}:AssociateWebACL"
    assert _decide(associate, ours, {TAG: CLUSTER}) == "allow"
    assert (
        _decide(associate, acl) == "allow"
    )  # the web ACL is not the controller's: it carries no cluster tag
    for other in (_alb(account=OTHER_ACCOUNT), _alb(region=OTHER_REGION), _alb(kind="net")):
        assert _decide(associate, other, {TAG: CLUSTER}) == "implicit", other
    for other in (_web_acl(service, account=OTHER_ACCOUNT), _web_acl(service, region=OTHER_REGION)):
        assert _decide(associate, other) == "implicit", other
    if service == "wafv2":  # an ALB takes no CloudFront-scope web ACL
        assert _decide(associate, _web_acl(service, region="us-east-1", scope="global")) == "implicit"
    # the calls that name the ALB only
    for action in ("DisassociateWebACL", "GetWebACLForResource"):
        assert _decide(f"{service}:{action}", ours, {TAG: CLUSTER}) == "allow", action
        assert _decide(f"{service}:{action}", _alb(account=OTHER_ACCOUNT)) == "implicit", action
        assert _decide(f"{service}:{action}", _alb(region=OTHER_REGION)) == "implicit", action
    assert _decide(f"{service}:GetWebACLForResource", acl) == ("allow" if service == "wafv2" else "implicit")
    assert _decide(f"{service}:GetWebACL", acl) == "allow"
    assert _decide(f"{service}:GetWebACL", _web_acl(service, account=OTHER_ACCOUNT)) == "implicit"
    # WAF evaluates no tag on a load balancer (the reference lists none): another cluster's ALB of the same
    # account and region cannot be told apart (docs/platform/security.md says so)
    assert _decide(associate, _alb(), {TAG: "aiplat-dev-infer"}) == "allow"


def test_only_the_stacks_own_web_acl_is_put_in_front_of_an_alb() -> None:
    """With the stack's web ACLs named (the one ``waf: create`` makes, by name), AssociateWebACL takes only
    those; another web ACL of the same account and region is refused. The lookups and DisassociateWebACL
    keep every web ACL of the account and region (``waf: off`` clears whatever is attached)."""
    ours = f"arn:aws:wafv2:{REGION}:{ACCOUNT}:regional/webacl/aiplat-prod-infer-inference/*"
    lbc = _lbc([ours])

    def decide_(action: str, arn: str) -> str:
        return decide(lbc, action, Target(arn, "waf"), {"aws:RequestedRegion": REGION})

    other = f"arn:aws:wafv2:{REGION}:{ACCOUNT}:regional/webacl/someone-elses/{ACL_ID}"
    assert decide_("wafv2:AssociateWebACL", _web_acl("wafv2")) == "allow"
    assert decide_("wafv2:AssociateWebACL", _alb()) == "allow"
    assert decide_("wafv2:AssociateWebACL", other) == "implicit"
    assert decide_("wafv2:GetWebACLForResource", other) == "allow"
    assert decide_("wafv2:DisassociateWebACL", _alb()) == "allow"


def test_a_stack_without_a_web_acl_associates_none() -> None:
    lbc = _lbc([])
    acl = _web_acl("wafv2")
    for arn in (acl, _alb()):
        assert decide(lbc, "wafv2:AssociateWebACL", Target(arn, "waf"), {"aws:RequestedRegion": REGION}) == (
            "implicit"
        )
    assert not any("wafv2:AssociateWebACL" in st["Action"] for st in _statements([]))
    # it still reads and clears what an ALB has (an Ingress with waf: off says "none")
    for action in ("wafv2:DisassociateWebACL", "wafv2:GetWebACLForResource"):
        assert decide(lbc, action, Target(_alb(), "waf"), {"aws:RequestedRegion": REGION}) == "allow"


def test_shield_deletes_only_our_accounts_protections() -> None:
    ours = f"arn:aws:shield::{ACCOUNT}:protection/9b6d8e1a-3c4f-4f8a-b2d1-7e5c6a4b3f2e"
    other = f"arn:aws:shield::{OTHER_ACCOUNT}:protection/9b6d8e1a-3c4f-4f8a-b2d1-7e5c6a4b3f2e"
    assert _decide("shield:DeleteProtection", ours) == "allow"
    assert _decide("shield:DeleteProtection", other) == "implicit"


def test_actions_aws_authorizes_on_star_only_keep_it() -> None:
    """No resource type in the reference: the request's resource is ``*`` and a narrower Resource would
    refuse the controller. SetWebAcl keeps the region; the Shield ones are global."""
    assert _decide("elasticloadbalancing:SetWebAcl", "*") == "allow"
    assert _decide("elasticloadbalancing:SetWebAcl", "*", region=OTHER_REGION) == "implicit"
    for action in ("GetSubscriptionState", "CreateProtection", "DescribeProtection"):
        assert _decide(f"shield:{action}", "*", region="us-east-1") == "allow", action


def test_no_waf_or_shield_statement_asks_for_a_tag_aws_would_not_send() -> None:
    """A tag condition on these would deny: WAF lists no condition key for a load balancer, a web ACL's tags
    are not the controller's, and the controller creates protections without tags."""
    services = ("wafv2:", "waf-regional:", "shield:")
    for st in _statements():
        if any(a.startswith(services) for a in st["Action"]):
            assert "Condition" not in st, st


def test_every_upstream_action_is_still_granted_once() -> None:
    def actions(doc: dict[str, Any]) -> list[str]:
        return sorted(a for s in doc["Statement"] for a in s["Action"])

    upstream = sorted({a for s in lbc_iam.POLICY["Statement"] for a in s["Action"]})
    scoped = actions({"Statement": _statements()})
    waf_shield = [a for a in scoped if a.startswith(("wafv2:", "waf-regional:", "shield:"))]
    assert sorted(set(scoped)) == upstream
    assert len(waf_shield) == len(set(waf_shield)) == 12  # each in one statement
