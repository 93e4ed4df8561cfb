"""The load balancer controller's WAF and Shield permissions, bound to the resources AWS authorizes them on.
Pure data, used by ``lbc_iam.scoped_policy``.

What AWS's Service Authorization Reference lists for each action of upstream's policy (the pages as published
in June 2026; "*" = required resource type, "-" = none, the action takes ``Resource: "*"`` only):

https://docs.aws.amazon.com/service-authorization/latest/reference/list_awswafv2.html

* ``AssociateWebACL``: ``webacl*``, and the protected resource (``loadbalancer/app/`` among amplify-app,
  apigateway, apprunner, appsync, userpool, verified-access-instance); no action condition key.
* ``DisassociateWebACL``: the protected resource only (``loadbalancer/app/`` ...); no condition key.
* ``GetWebACLForResource``: ``webacl*`` and the protected resource; no condition key.
* ``GetWebACL``: ``webacl*``; condition key ``aws:ResourceTag/${TagKey}``.
* ARNs: ``webacl`` ``arn:${Partition}:wafv2:${Region}:${Account}:${Scope}/webacl/${Name}/${Id}``
  (condition key ``aws:ResourceTag/${TagKey}``); ``loadbalancer/app/``
  ``arn:${Partition}:elasticloadbalancing:${Region}:${Account}:loadbalancer/app/${LoadBalancerName}/${LoadBalancerId}``
  with **no** condition key.

https://docs.aws.amazon.com/service-authorization/latest/reference/list_awswafregional.html

* ``AssociateWebACL``: ``loadbalancer/app/*`` and ``webacl*``; ``DisassociateWebACL`` and
  ``GetWebACLForResource``: ``loadbalancer/app/*``; ``GetWebACL``: ``webacl*``; no action condition key.
* ARNs: ``webacl`` ``arn:${Partition}:waf-regional:${Region}:${Account}:webacl/${Id}``
  (``aws:ResourceTag/${TagKey}``); ``loadbalancer/app/`` as above, with no condition key.

https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsshield.html

* ``GetSubscriptionState``: -; ``CreateProtection``: - (condition keys ``aws:RequestTag/${TagKey}``,
  ``aws:TagKeys``); ``DescribeProtection`` and ``DeleteProtection``: ``protection*``
  (``arn:${Partition}:shield::${Account}:protection/${Id}``, ``aws:ResourceTag/${TagKey}``).

What the controller passes (kubernetes-sigs/aws-load-balancer-controller v3.5.0): pkg/deploy/wafv2 and
pkg/deploy/wafregional ``web_acl_association_manager.go`` call Associate/DisassociateWebACL and
GetWebACLForResource with ``ResourceArn`` = the ALB the stack built (pkg/ingress/
model_build_load_balancer_addons.go, pkg/gateway/model/addons/waf.go: ``lbARN``) and the web ACL of the
annotation (wafv2: its ARN; waf-regional: its ID, which AWS resolves in the caller's account and region); it
never calls GetWebACL. pkg/deploy/shield/protection_manager.go: GetSubscriptionState, DescribeProtection by
``ResourceArn`` (the ALB), CreateProtection with ``ResourceArn`` and ``Name`` (no tags), DeleteProtection by
``ProtectionId``.

So, as narrow as the reference allows without refusing what the controller does:

* WAF (both): the load balancer is an ALB of our account and region, the web ACL a regional one of our
  account and region. No tag condition: the reference lists none for ``loadbalancer/app/`` under WAF (a key a
  resource type does not list is absent from the request, so a condition on it denies), and the web ACL's
  ``aws:ResourceTag`` would be the web ACL's tags: it is not the controller's and does not carry its cluster
  tag, so such a condition would refuse every association. WAF therefore cannot tell one cluster's ALB from
  another's of the same account and region.
* Statements are grouped by the resource types the reference lists (load balancer only; load balancer and web
  ACL; web ACL only): an action is authorized only against its own resource types, and a ``wafv2:`` action
  never against a ``waf-regional`` ARN, so no action gets a resource it could not be asked for.
* ``shield:DeleteProtection``: our account's protections (Shield has no regions in its ARNs and no
  resource-based policies). No tag condition: the controller creates its protections without tags.
* Kept on ``"*"`` (in upstream's statement): ``shield:GetSubscriptionState`` and ``shield:CreateProtection``
  (no resource type; CreateProtection's only keys are request tags, and the controller sends none), and
  ``shield:DescribeProtection``: the controller looks the protection up by the ALB's ARN, before one exists,
  and which resource AWS authorizes a lookup of a missing protection against is not documented; the
  narrowing would be to our own account only, which a Shield call cannot leave anyway.

Not in upstream's policy, so not here: WAF V2 lists ``elasticloadbalancing:CreateWebACLAssociation``,
``DeleteWebACLAssociation`` and ``GetLoadBalancerWebACL`` (permission-only; ``loadbalancer/app/*`` with
``aws:ResourceTag``, so the cluster tag could bound them) among the dependent actions of Associate,
Disassociate and GetWebACLForResource, beside ``SetWebAcl``; and the controller resolves a
``wafv2-acl-name`` annotation with ``wafv2:ListWebACLs`` (pkg/ingress/model_builder.go). The platform's
Ingress names its web ACL by ARN.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LB = "loadbalancer"
WEB_ACL = "webacl"
PROTECTION = "protection"

# action -> the resource types the reference lists for it (of those the controller uses)
RESOURCE_TYPES: dict[str, tuple[str, ...]] = {
    "wafv2:AssociateWebACL": (LB, WEB_ACL),
    "wafv2:GetWebACLForResource": (LB, WEB_ACL),
    "wafv2:DisassociateWebACL": (LB,),
    "wafv2:GetWebACL": (WEB_ACL,),
    "waf-regional:AssociateWebACL": (LB, WEB_ACL),
    "waf-regional:DisassociateWebACL": (LB,),
    "waf-regional:GetWebACLForResource": (LB,),
    "waf-regional:GetWebACL": (WEB_ACL,),
    "shield:DeleteProtection": (PROTECTION,),
}


def arn(kind: str, service: str, *, partition: str, region: str, account_id: str) -> str:
    """Our account's (and region's) ARN pattern of ``kind`` as ``service``'s actions name it."""
    if kind == LB:  # ALBs only: WAF protects no network load balancer
        return f"arn:{partition}:elasticloadbalancing:{region}:{account_id}:loadbalancer/app/*/*"
    if kind == WEB_ACL and service == "wafv2":  # an ALB takes a REGIONAL-scope web ACL only
        return f"arn:{partition}:wafv2:{region}:{account_id}:regional/webacl/*/*"
    if kind == WEB_ACL and service == "waf-regional":
        return f"arn:{partition}:waf-regional:{region}:{account_id}:webacl/*"
    if kind == PROTECTION:
        return f"arn:{partition}:shield::{account_id}:protection/*"
    raise ValueError(f"no ARN for {kind!r} of {service!r}")


# The one call that puts a web ACL in front of an ALB: bound to the stack's own web ACLs when it names them
ASSOCIATE = "wafv2:AssociateWebACL"


def split(
    actions: list[str],
    *,
    partition: str,
    region: str,
    account_id: str,
    web_acls: Sequence[str] | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """``actions`` of one upstream ``Resource: "*"`` statement split into those that stay on ``"*"`` and
    statements binding the others to :data:`RESOURCE_TYPES` (one per set of resource types, in upstream's
    order).

    ``web_acls``: the WAFv2 web ACLs the stack's Ingresses name (the ARN of ``waf: arn``, the ARN pattern of
    the one ``waf: create`` makes, none without a WAF): ``wafv2:AssociateWebACL`` may put only those in front
    of an ALB, and is not granted when there are none. None: any regional web ACL of the account and region.
    The lookups and ``DisassociateWebACL`` keep every web ACL of the account and region: the controller
    reads and clears an ALB's association whatever it is."""
    keep = [a for a in actions if a not in RESOURCE_TYPES]
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for a in actions:
        if a in RESOURCE_TYPES:
            if a == ASSOCIATE and web_acls is not None and not web_acls:
                continue  # no web ACL of ours to associate
            own = a == ASSOCIATE and web_acls is not None
            groups.setdefault((RESOURCE_TYPES[a], own), []).append(a)
    statements = []
    for (kinds, own), acts in groups.items():
        resources: list[str] = []
        for a in acts:
            service = a.split(":", 1)[0]
            for kind in kinds:
                if own and kind == WEB_ACL:
                    named = list(web_acls or ())
                else:
                    named = [arn(kind, service, partition=partition, region=region, account_id=account_id)]
                resources += [r for r in named if r not in resources]
        statements.append(
            {
                "Effect": "Allow",
                "Action": acts,
                "Resource": resources[0] if len(resources) == 1 else resources,
            }
        )
    return keep, statements
