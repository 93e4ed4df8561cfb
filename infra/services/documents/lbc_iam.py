"""The AWS Load Balancer Controller's IAM policy, kept verbatim from upstream as data, and narrowed to one
cluster, region and account (``scoped_policy``: what the controller's role gets). Pure.

The policy is ``infra/services/data/lbc_iam_policy.json``: kubernetes-sigs/aws-load-balancer-controller
``docs/install/iam_policy.json`` at the tag of the pinned chart
(``cluster_services.load_balancer_controller``), with the commit it was read at and the date, written by
``aiplat facts upstream --load-balancer-controller <tag>`` when the chart is upgraded. The file is for the
``aws`` partition; upstream ships other files for aws-cn and aws-us-gov.
https://docs.aws.amazon.com/eks/latest/userguide/lbc-helm.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infra.services.documents import lbc_waf_shield

POLICY_FILE = Path(__file__).parents[1] / "data" / "lbc_iam_policy.json"
_UPSTREAM = json.loads(POLICY_FILE.read_text())
SOURCE_TAG: str = _UPSTREAM["tag"]
SOURCE: str = _UPSTREAM["source"]
SERVICE_ACCOUNT = "aws-load-balancer-controller"

POLICY: dict[str, Any] = _UPSTREAM["policy"]


def controller_policy(partition: str = "aws") -> dict[str, Any]:
    """The upstream policy for ``partition`` (only ``aws``: other partitions have their own upstream file)."""
    if partition != "aws":
        raise ValueError(
            f"partition {partition!r}: use upstream's iam_policy for that partition (e.g. iam_policy_cn.json)"
        )
    return POLICY


CLUSTER_TAG = "elbv2.k8s.aws/cluster"
_EXISTS = "false"  # "Null": {key: "false"}: the key is present


def scoped_policy(
    *,
    cluster_name: str,
    region: str,
    account_id: str,
    partition: str = "aws",
    web_acls: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The upstream policy narrowed to one cluster, region and account, so that the controller of one
    stack (a dev cluster) cannot change another stack's load balancers or security groups:

    * every existence check of the ``elbv2.k8s.aws/cluster`` tag (``Null: false``), on the resource or the
      request, becomes ``StringEquals`` to this cluster's name: the value the controller writes
      (``--cluster-name``);
    * every EC2 / Elastic Load Balancing statement gets ``aws:RequestedRegion`` = the stack's region, and
      ARNs with any region and account (``*:*``) name ours;
    * the unconditioned ``Authorize/RevokeSecurityGroupIngress`` on ``*`` becomes two statements: security
      groups the controller made for this cluster (the tag above), and the node security group it opens to
      the load balancer, which carries ``kubernetes.io/cluster/<name>`` (the scoping upstream recommends,
      docs/deploy/installation.md at v3.5.0).

    * the listener and rule statements upstream leaves unconditioned are bound to the cluster's tag
      (``_listener_statements``);
    * the WAF actions and ``shield:DeleteProtection`` are bound to the ARNs of our account (and region) of
      the resource types AWS authorizes them on (``lbc_waf_shield``: what AWS's service authorization
      reference lists for each, and why none of them can take the cluster's tag), and
      ``wafv2:AssociateWebACL`` to ``web_acls``, the stack's own web ACLs (None: any of the account and
      region; empty: not granted).

    The IAM, ACM and Cognito lookups and the Shield actions AWS authorizes on ``"*"`` only keep upstream's
    form.
    """
    out: list[dict[str, Any]] = []
    for original in controller_policy(partition)["Statement"]:
        st = json.loads(json.dumps(original))  # a deep copy of plain JSON data
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        regional = all(a.split(":", 1)[0] in ("ec2", "elasticloadbalancing") for a in actions)
        cond = st.get("Condition", {})
        nulls = cond.pop("Null", {})
        equals = cond.setdefault("StringEquals", {})
        for key, value in nulls.items():
            if key.endswith(f"Tag/{CLUSTER_TAG}") and value == _EXISTS:
                equals[key] = cluster_name
            else:
                cond.setdefault("Null", {})[key] = value
        if regional:
            equals["aws:RequestedRegion"] = region
        if not equals:
            del cond["StringEquals"]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        resources = [r.replace(":*:*:", f":{region}:{account_id}:") if r != "*" else r for r in resources]
        st["Resource"] = resources[0] if len(resources) == 1 else resources
        if cond:
            st["Condition"] = cond
        if any(a in lbc_waf_shield.RESOURCE_TYPES for a in actions):
            keep, bound = lbc_waf_shield.split(
                actions, partition=partition, region=region, account_id=account_id, web_acls=web_acls
            )
            out += ([{**st, "Action": keep}] if keep else []) + bound
            continue
        if (tagged := _listener_statements(st, actions, cluster_name)) is not None:
            out += tagged
            continue
        ingress = {"ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"}
        if (
            set(actions) == ingress
            and set(cond) == {"StringEquals"}
            and list(equals) == ["aws:RequestedRegion"]
        ):
            managed = json.loads(json.dumps(st))
            managed["Condition"]["StringEquals"][f"aws:ResourceTag/{CLUSTER_TAG}"] = cluster_name
            nodes = json.loads(json.dumps(st))
            nodes["Condition"]["Null"] = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": _EXISTS}
            out += [managed, nodes]
            continue
        out.append(st)
    return {"Version": POLICY["Version"], "Statement": out}


ELB = "elasticloadbalancing:"
LISTENER_CREATE = ("CreateListener", "CreateRule")
LISTENER_DELETE = ("DeleteListener", "DeleteRule")
LISTENER_CHANGE = (
    "ModifyListener",
    "AddListenerCertificates",
    "RemoveListenerCertificates",
    "ModifyRule",
    "SetRulePriorities",
)


def _listener_statements(
    st: dict[str, Any], actions: list[str], cluster_name: str
) -> list[dict[str, Any]] | None:
    """Upstream's listener and rule statements that name no condition (Resource ``*`` or any listener),
    bound to this cluster's tag: the controller (v3.5.0, feature gate ``ListenerRulesTagging``, on by
    default: pkg/config/feature_gates.go) creates every listener and rule with its tracking tags, the
    ``elbv2.k8s.aws/cluster`` tag among them (pkg/deploy/elbv2/listener_manager.go and
    listener_rule_manager.go ``req.Tags``; pkg/deploy/tracking/provider.go), so

    * CreateListener/CreateRule: ``aws:RequestTag/elbv2.k8s.aws/cluster`` = the cluster, and the AddTags
      of that tagging on create (``elasticloadbalancing:CreateAction``);
    * DeleteListener/DeleteRule, ModifyListener, Add/RemoveListenerCertificates, ModifyRule,
      SetRulePriorities, and AddTags/RemoveTags on listeners and rules: ``aws:ResourceTag/...`` = the
      cluster (the tag changes as upstream's load balancer statement: never of the cluster tag itself).

    ``SetWebAcl`` (the permission WAF checks when it associates a web ACL with a load balancer) keeps
    ``Resource: "*"`` and the region: AWS's service authorization reference lists it as a permission-only
    action with no resource type and no condition key
    (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awselasticloadbalancingv2.html),
    so neither a load balancer ARN nor its cluster tag can bound it; the web ACL calls it guards are bound in
    ``lbc_waf_shield``. None: not such a statement.
    """
    names = {a.removeprefix(ELB) for a in actions}
    region_only = st.get("Condition", {}).get("StringEquals", {})
    if list(region_only) != ["aws:RequestedRegion"] or set(st.get("Condition", {})) != {"StringEquals"}:
        return None
    region = region_only["aws:RequestedRegion"]
    request, resource = f"aws:RequestTag/{CLUSTER_TAG}", f"aws:ResourceTag/{CLUSTER_TAG}"

    def statement(
        acts: tuple[str, ...], resources: Any, equals: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        cond: dict[str, Any] = {"StringEquals": {**equals, "aws:RequestedRegion": region}, **extra}
        return {
            "Effect": "Allow",
            "Action": [ELB + a for a in acts],
            "Resource": resources,
            "Condition": cond,
        }

    if names == {*LISTENER_CREATE, *LISTENER_DELETE}:
        return [
            statement(LISTENER_CREATE, "*", {request: cluster_name}),
            statement(LISTENER_DELETE, "*", {resource: cluster_name}),
        ]
    if names == {"AddTags", "RemoveTags"} and all(":listener" in r for r in _as_list(st["Resource"])):
        return [
            statement(
                ("AddTags",),
                st["Resource"],
                {request: cluster_name, "elasticloadbalancing:CreateAction": list(LISTENER_CREATE)},
            ),
            statement(
                ("AddTags", "RemoveTags"), st["Resource"], {resource: cluster_name}, Null={request: "true"}
            ),
        ]
    if names == {"SetWebAcl", *LISTENER_CHANGE}:
        return [
            statement(("SetWebAcl",), "*", {}),
            statement(LISTENER_CHANGE, "*", {resource: cluster_name}),
        ]
    return None


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


# The scoped policy is over IAM's 6,144-character quota for one managed policy (infra/core/quotas.py), so
# the role gets it as two managed policies: what the controller reads and does on EC2 (and on IAM, ACM,
# Cognito, WAF and Shield), and what it changes on Elastic Load Balancing. Order kept, statements
# unchanged; together exactly the scoped policy (a test checks it).
PART_EC2 = "ec2"
PART_ELB = "elb"
PARTS = (PART_EC2, PART_ELB)


def _part_of(statement: dict[str, Any]) -> str:
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    changes_elb = any(
        a.startswith("elasticloadbalancing:") and not a.split(":", 1)[1].startswith("Describe")
        for a in actions
    )
    return PART_ELB if changes_elb else PART_EC2


def scoped_policies(
    *,
    cluster_name: str,
    region: str,
    account_id: str,
    partition: str = "aws",
    web_acls: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """:func:`scoped_policy` split into the managed policies of :data:`PARTS` (part -> document)."""
    doc = scoped_policy(
        cluster_name=cluster_name,
        region=region,
        account_id=account_id,
        partition=partition,
        web_acls=web_acls,
    )
    parts: dict[str, list[dict[str, Any]]] = {p: [] for p in PARTS}
    for st in doc["Statement"]:
        parts[_part_of(st)].append(st)
    return {p: {"Version": doc["Version"], "Statement": sts} for p, sts in parts.items()}
