"""Nodes: IMDSv2 with hop limit 1, no public IPs, no SSH, GPU nodes tainted.

Nodes come from EKS managed node groups (with our launch templates), Karpenter (EC2NodeClass + NodePool
custom resources) or, rarely, plain EC2 instances.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from infra.core import instance_types
from infra.karpenter.documents import INSTANCE_FAMILY_LABEL as INSTANCE_FAMILY_KEY
from infra.karpenter.documents import INSTANCE_TYPE_LABEL as INSTANCE_TYPE_KEY
from infra.pools.documents.nodes import (
    GPU_TAINT_KEY,
    IMDS_HOP_LIMIT,
    TAINT_EFFECTS,
    TOOLKIT_CONFIG,
    TOOLKIT_GPU_ISOLATION,
)

from .aws import INSTANCE, LAUNCH_TEMPLATE, NODE_GROUP, SUBNET, linked
from .core import (
    HIGH,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    dig,
    number,
    resource_rule,
    stack_rule,
    truthy,
    violation,
)
from .network import SG_TYPES, ingress_of

EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
# NodePool requirement keys (well-known labels):
# https://karpenter.sh/docs/concepts/scheduling/#well-known-labels


@resource_rule(
    "imds-v2-hop-limit-1",
    description="Nodes require IMDSv2 tokens with a response hop limit of 1, so pods (one hop further) "
    "cannot read the node role's credentials.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html"
    "#_restrict_access_to_the_instance_profile_assigned_to_the_worker_node",
    types=(LAUNCH_TEMPLATE, INSTANCE, NODE_GROUP, EC2_NODE_CLASS),
    unknowns="An unknown token setting or hop limit is a violation (they are literals).",
)
def imds_v2_hop_limit_1(r: Res, ctx: Ctx) -> Iterator[Violation]:
    fix = "set metadata_options http_tokens 'required' and http_put_response_hop_limit 1"
    if r.type == NODE_GROUP:
        if r.get("launchTemplate") is None:
            yield violation(
                "the node group has no launch template; EKS's default one sets hop limit 2",
                "give the node group a launch template with " + fix.removeprefix("set "),
            )
        return
    if r.type == EC2_NODE_CLASS:
        options = r.get("spec", "metadataOptions")
        if options is None:
            # Karpenter's defaults: httpTokens required, hop limit 1 (karpenter.sh/docs/concepts/nodeclasses)
            return
        tokens, hops = (
            dig(options, "httpTokens", default="required"),
            number(dig(options, "httpPutResponseHopLimit", default=1)),
        )
    else:
        options = r.get("metadataOptions") or {}
        tokens, hops = dig(options, "httpTokens"), number(dig(options, "httpPutResponseHopLimit"))
    if dig(options, "httpEndpoint") == "disabled":
        return  # no instance metadata at all
    if tokens != "required":
        yield violation(f"IMDSv1 is allowed (http_tokens {tokens})", fix)
    if hops != IMDS_HOP_LIMIT:
        shown = format(hops, "g") if isinstance(hops, float) else hops or "unset (AWS default 1, EKS 2)"
        yield violation(f"IMDS hop limit is {shown}", fix)


def _public_ip_problems(r: Res) -> list[str]:
    if r.type == LAUNCH_TEMPLATE:
        return [
            f"networkInterfaces[{i}] associates a public IP"
            for i, n in enumerate(as_list(r.get("networkInterfaces")))
            if truthy(dig(n, "associatePublicIpAddress")) in (True, UNKNOWN)
        ]
    if r.type == INSTANCE and truthy(r.get("associatePublicIpAddress")) in (True, UNKNOWN):
        return ["the instance associates a public IP"]
    if r.type == EC2_NODE_CLASS and truthy(r.get("spec", "associatePublicIPAddress")) in (True, UNKNOWN):
        return ["spec.associatePublicIPAddress is true"]
    return []


@stack_rule(
    "nodes-no-public-ip",
    description="Nodes get no public IP: launch templates, instances and node classes do not ask for one and "
    "node groups run in subnets that do not hand them out.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html",
    unknowns="An unknown 'associate public IP' or 'map public IP on launch' counts as true. Node group "
    "subnets "
    "are found by property dependency (subnet ids are unknown at preview).",
)
def nodes_no_public_ip(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    fix = "run nodes in private subnets; leave associate_public_ip_address unset/false"
    for r in stack.of_type(LAUNCH_TEMPLATE, INSTANCE, EC2_NODE_CLASS):
        for problem in _public_ip_problems(r):
            yield violation(f"{r.label}: {problem}", fix, r.urn)
    subnets = stack.of_type(SUBNET)
    for ng in stack.of_type(NODE_GROUP):
        public = [
            s
            for s in linked(ng, "subnetIds", subnets)
            if truthy(s.get("mapPublicIpOnLaunch")) in (True, UNKNOWN)
        ]
        if public:
            yield violation(
                f"node group {ng.name!r} runs in subnets that map public IPs on launch "
                f"({[s.name for s in public]})",
                fix,
                ng.urn,
            )


@resource_rule(
    "nodes-no-ssh",
    description="Nobody SSHes into nodes: no key pairs, no node group remote access (which opens port 22 to "
    "0.0.0.0/0 without source groups), no ingress rule on port 22 from an address range.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/APIReference/API_RemoteAccessConfig.html",
    types=(NODE_GROUP, LAUNCH_TEMPLATE, INSTANCE, *SG_TYPES),
    unknowns="An unknown key name or remote access block counts as set; unknown ports count as all ports.",
)
def nodes_no_ssh(r: Res, ctx: Ctx) -> Iterator[Violation]:
    fix = "use SSM Session Manager (the node role has it) instead of SSH keys and port 22"
    if r.type == NODE_GROUP and r.get("remoteAccess") is not None:
        yield violation("the node group enables SSH remote access", fix)
    if r.type in (LAUNCH_TEMPLATE, INSTANCE) and r.get("keyName") is not None:
        yield violation(f"an SSH key pair is set (key_name {r.get('keyName')})", fix)
    for rule in ingress_of(r):
        if rule.cidrs and rule.covers(22):
            yield violation(f"ingress on {rule.ports()} from {[str(c) for c in rule.cidrs]} admits SSH", fix)


def node_group_types(r: Res, templates: list[Res] | None = None) -> list[Any]:
    """Instance types of a node group: its own list, else its launch template's (Capacity Blocks)."""
    types = as_list(r.get("instanceTypes"))
    if not types and templates:
        types = [t.get("instanceType") for t in templates if t.get("instanceType") is not None]
    return types


def karpenter_requirements(r: Res) -> dict[str, list[tuple[str, list[Any]]]]:
    """key -> [(operator, values)] of a NodePool's template requirements."""
    out: dict[str, list[tuple[str, list[Any]]]] = {}
    for req in as_list(r.get("spec", "template", "spec", "requirements")):
        if isinstance(req, dict):
            out.setdefault(str(req.get("key")), []).append(
                (str(req.get("operator")), as_list(req.get("values")))
            )
    return out


def karpenter_allowed(r: Res, key: str) -> list[str]:
    """The values a NodePool's ``In`` requirements on ``key`` allow (instance types, families ...)."""
    return [str(v) for op, values in karpenter_requirements(r).get(key, []) if op == "In" for v in values]


def karpenter_is_gpu(r: Res) -> bool:
    """Whether a NodePool may launch GPU instances (GPU count, category, family or type requirements)."""
    reqs = karpenter_requirements(r)
    for op, values in reqs.get("karpenter.k8s.aws/instance-gpu-count", []):
        if op in ("Gt", "Exists") or (op == "In" and any(str(v) != "0" for v in values)):
            return True
    for key in ("karpenter.k8s.aws/instance-category", INSTANCE_FAMILY_KEY, INSTANCE_TYPE_KEY):
        for op, values in reqs.get(key, []):
            # a category ('g'), a family ('g5') or a type ('g5.xlarge'): its family decides
            if op == "In" and any(instance_types.is_gpu_family(str(v)) for v in values):
                return True
    return False


def _has_gpu_taint(taints: list[Any], effect: str) -> bool:
    return any(dig(t, "key") == GPU_TAINT_KEY and dig(t, "effect") == effect for t in taints)


@resource_rule(
    "gpu-nodes-tainted",
    description=f"GPU nodes carry the {GPU_TAINT_KEY}:NoSchedule taint, so only pods that tolerate it (GPU "
    "workloads) are scheduled there.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html",
    types=(NODE_GROUP, NODE_POOL),
    unknowns="An unknown instance type or AMI type counts as GPU; an unknown taint list is a violation.",
)
def gpu_nodes_tainted(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if r.type == NODE_GROUP:
        types = node_group_types(r)
        ami = r.get("amiType")
        gpu = (
            ami is UNKNOWN
            or "NVIDIA" in str(ami or "")
            or any(t is UNKNOWN or (instance_types.gpus(str(t)) or 0) > 0 for t in types)
        )
        if gpu and not _has_gpu_taint(
            as_list(r.get("taints")) if r.get("taints") is not UNKNOWN else [], TAINT_EFFECTS["NoSchedule"]
        ):
            yield violation(
                f"GPU node group ({types}, {ami}) lacks the {GPU_TAINT_KEY}=true:NO_SCHEDULE taint",
                f"add taint {{key: {GPU_TAINT_KEY}, value: 'true', effect: NO_SCHEDULE}}",
            )
    elif karpenter_is_gpu(r):
        taints = r.get("spec", "template", "spec", "taints")
        if not _has_gpu_taint(as_list(taints) if taints is not UNKNOWN else [], "NoSchedule"):
            yield violation(
                f"GPU NodePool lacks the {GPU_TAINT_KEY}:NoSchedule taint",
                f"add spec.template.spec.taints [{{key: {GPU_TAINT_KEY}, effect: NoSchedule}}]",
            )


# The device plugin's chart and the strategies that hand GPUs without the environment variable
# (NVIDIA/k8s-device-plugin README v0.20.0, DEVICE_LIST_STRATEGY; a comma-separated list is allowed).
DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
ENVVAR_STRATEGY = "envvar"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _toolkit_gaps(user_data: Any) -> list[str]:
    """The toolkit settings (``key = value``) the user data does not write."""
    text = user_data if isinstance(user_data, str) else ""
    return [
        f"{k} = {str(v).lower()}"
        for k, v in TOOLKIT_GPU_ISOLATION.items()
        if f"{k} = {str(v).lower()}" not in text
    ]


def _decoded(user_data: Any) -> Any:
    if not isinstance(user_data, str):
        return user_data
    try:
        return base64.b64decode(user_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return user_data


@stack_rule(
    "gpu-nodes-ignore-visible-devices-envvar",
    description="A container that requests no GPU sees none: every GPU node's user data sets the NVIDIA "
    f"container toolkit ({TOOLKIT_CONFIG}) to ignore NVIDIA_VISIBLE_DEVICES from unprivileged containers and "
    "take the device plugin's volume mounts, and the device plugin does not hand GPUs by environment "
    "variable.",
    severity=HIGH,
    doc="https://github.com/NVIDIA/k8s-device-plugin/tree/v0.20.0#setting-other-helm-chart-values",
    unknowns="An unknown user data or device list strategy is a violation (they are literals).",
)
def gpu_nodes_ignore_visible_devices_envvar(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    fix = "add infra/pools/documents/nodes.py gpu_isolation_script to the GPU nodes' user data"
    templates = stack.of_type(LAUNCH_TEMPLATE)
    for group in stack.of_type(NODE_GROUP):
        ami = group.get("amiType")
        if not (ami is UNKNOWN or "NVIDIA" in str(ami or "")):
            continue
        linked_templates = linked(group, "launchTemplate", templates)
        if not linked_templates:
            yield violation(
                f"GPU node group {group.name!r} has no launch template of this stack", fix, group.urn
            )
        for lt in linked_templates:
            gaps = _toolkit_gaps(_decoded(lt.get("userData")))
            if gaps:
                yield violation(
                    f"GPU launch template {lt.name!r}: user data does not set {gaps}", fix, lt.urn
                )
    for node_class in stack.of_type(EC2_NODE_CLASS):
        gaps = _toolkit_gaps(node_class.get("spec", "userData"))
        if gaps:
            yield violation(
                f"EC2NodeClass {node_class.name!r}: userData does not set {gaps}", fix, node_class.urn
            )
    for release in stack.of_type(RELEASE):
        if release.get("chart") != DEVICE_PLUGIN_CHART:
            continue
        strategy = release.get("values", "deviceListStrategy")
        listed = [s.strip() for s in strategy.split(",")] if isinstance(strategy, str) else []
        if not listed or ENVVAR_STRATEGY in listed:
            yield violation(
                f"the NVIDIA device plugin's deviceListStrategy is {strategy or 'unset (envvar)'}",
                "set values deviceListStrategy: volume-mounts (or cdi-cri)",
                release.urn,
            )
