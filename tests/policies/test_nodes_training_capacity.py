"""Node rules, training pools (stack rules following node group -> launch template -> subnets, placement
group and security groups), instance-type allowlist and GPU budget."""

from __future__ import annotations

import pytest

from infra.io.policypack import read_stack_pack_config
from infra.pools.rules import zone_spread
from tests.policies.conftest import KEY_ARN, UNKNOWN, R

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
SG = "aws:ec2/securityGroup:SecurityGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
IMDS_OK = {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0}
EBS = [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true", "kmsKeyId": KEY_ARN, "volumeType": "gp3"}}]


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (R(LT, "lt", {"metadataOptions": IMDS_OK}), None),
        (R(LT, "lt", {"metadataOptions": IMDS_OK | {"httpPutResponseHopLimit": 2.0}}), "IMDS hop limit is 2"),
        (
            R(LT, "lt", {"metadataOptions": IMDS_OK | {"httpTokens": "optional"}}),
            "IMDSv1 is allowed (http_tokens optional)",
        ),
        (R(LT, "lt", {}), "IMDS hop limit is unset"),
        (
            R(LT, "lt", {"metadataOptions": IMDS_OK | {"httpPutResponseHopLimit": UNKNOWN}}),
            "IMDS hop limit is <unknown at preview>",
        ),
        (R(LT, "lt", {"metadataOptions": {"httpEndpoint": "disabled"}}), None),
        (R(NG, "ng", {"instanceTypes": ["m6i.xlarge"]}), "EKS's default one sets hop limit 2"),
        (R(NODE_CLASS, "nc", {"spec": {"amiFamily": "AL2023"}}), None),  # Karpenter's default: required, 1
        (
            R(NODE_CLASS, "nc", {"spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}}),
            "IMDS hop limit is 2",
        ),
    ],
    ids=[
        "ok",
        "hop2",
        "v1",
        "unset",
        "unknown",
        "disabled",
        "nodegroup-default",
        "karpenter-default",
        "karpenter-hop2",
    ],
)
def test_imds_v2_hop_limit_1(check, resource, expected):
    check("imds-v2-hop-limit-1", [resource], expected)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            [
                R(SUBNET, "private-a", {"availabilityZone": "us-east-1a", "mapPublicIpOnLaunch": False}),
                R(NG, "ng", {"instanceTypes": ["m6i.xlarge"]}, deps={"subnetIds": ["private-a"]}),
            ],
            None,
        ),
        (
            [
                R(SUBNET, "public-a", {"availabilityZone": "us-east-1a", "mapPublicIpOnLaunch": True}),
                R(NG, "ng", {"instanceTypes": ["m6i.xlarge"]}, deps={"subnetIds": ["public-a"]}),
            ],
            "node group 'ng' runs in subnets that map public IPs on launch (['public-a'])",
        ),
        (
            [R(LT, "lt", {"networkInterfaces": [{"deviceIndex": 0, "associatePublicIpAddress": "true"}]})],
            "networkInterfaces[0] associates a public IP",
        ),
        (
            [R(NODE_CLASS, "nc", {"spec": {"associatePublicIPAddress": True}})],
            "spec.associatePublicIPAddress is true",
        ),
    ],
    ids=["private", "public-subnet", "lt-public-ip", "nodeclass-public-ip"],
)
def test_nodes_no_public_ip(check, resources, expected):
    check("nodes-no-public-ip", resources, expected)


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (R(LT, "lt", {"metadataOptions": IMDS_OK}), None),
        (R(NG, "ng", {"remoteAccess": {"ec2SshKey": "ops"}}), "the node group enables SSH remote access"),
        (R(LT, "lt", {"keyName": "ops"}), "an SSH key pair is set (key_name ops)"),
        (
            R(
                SG,
                "sg",
                {
                    "ingress": [
                        {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["10.0.0.0/8"]}
                    ]
                },
            ),
            "admits SSH",
        ),
        (
            R(
                SG,
                "sg",
                {
                    "ingress": [
                        {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["10.0.0.0/8"]}
                    ]
                },
            ),
            None,
        ),
        # the EFA group's self-reference has no address range
        (
            R(
                "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                "efa-in",
                {"ipProtocol": "-1", "referencedSecurityGroupId": UNKNOWN},
            ),
            None,
        ),
    ],
    ids=["none", "remote-access", "key-pair", "port-22", "port-443", "efa-self"],
)
def test_nodes_no_ssh(check, resource, expected):
    check("nodes-no-ssh", [resource], expected)


GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]


def nodepool(
    name: str,
    limit: float | None = None,
    families: list[str] | None = None,
    *,
    categories: list[str] | None = None,
    taints: list[dict] | None = None,
) -> R:
    """A Karpenter NodePool requiring ``families`` and/or ``categories`` (neither: no requirement), with a
    GPU ``limit`` and ``taints`` where given."""
    requirements = [
        {"key": f"karpenter.k8s.aws/instance-{key}", "operator": "In", "values": values}
        for key, values in (("family", families), ("category", categories))
        if values
    ]
    template: dict = {"requirements": requirements}
    if taints is not None:
        template["taints"] = taints
    spec: dict = {"template": {"spec": template}}
    if limit is not None:
        spec["limits"] = {"nvidia.com/gpu": limit}
    return R(NODE_POOL, name, {"spec": spec})


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            R(
                NG,
                "gpu",
                {"instanceTypes": ["g5.xlarge"], "amiType": "AL2023_x86_64_NVIDIA", "taints": GPU_TAINT},
            ),
            None,
        ),
        (
            R(
                NG,
                "cpu",
                {"instanceTypes": ["m6i.xlarge"], "amiType": "AL2023_x86_64_STANDARD", "taints": []},
            ),
            None,
        ),
        (
            R(NG, "gpu", {"instanceTypes": ["g5.xlarge"], "amiType": "AL2023_x86_64_NVIDIA", "taints": []}),
            "lacks the nvidia.com/gpu=true:NO_SCHEDULE taint",
        ),
        (R(NG, "gpu", {"instanceTypes": ["p5.48xlarge"]}), "lacks the nvidia.com/gpu"),
        (
            nodepool("gpu", families=["g5", "g6"]),
            "GPU NodePool lacks the nvidia.com/gpu:NoSchedule taint",
        ),
        (
            nodepool("gpu", categories=["g"], taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
            None,
        ),
    ],
    ids=["gpu-tainted", "cpu", "gpu-untainted", "gpu-by-type", "karpenter-untainted", "karpenter-tainted"],
)
def test_gpu_nodes_tainted(check, resource, expected):
    check("gpu-nodes-tainted", [resource], expected)


def efa_interfaces(n: int, sg_ids=(UNKNOWN, UNKNOWN)) -> list[dict]:
    return [
        {
            "deviceIndex": 0.0 if card == 0 else 1.0,
            "networkCardIndex": float(card),
            "interfaceType": "efa" if card == 0 else "efa-only",
            "securityGroups": list(sg_ids),
            "deleteOnTermination": "true",
        }
        for card in range(n)
    ]


SELF_RULES = [
    R(
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "efa-in",
        {"ipProtocol": "-1", "securityGroupId": UNKNOWN, "referencedSecurityGroupId": UNKNOWN},
        deps={"securityGroupId": ["efa-sg"], "referencedSecurityGroupId": ["efa-sg"]},
    ),
    R(
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        "efa-out",
        {"ipProtocol": "-1", "securityGroupId": UNKNOWN, "referencedSecurityGroupId": UNKNOWN},
        deps={"securityGroupId": ["efa-sg"], "referencedSecurityGroupId": ["efa-sg"]},
    ),
]


def pool(
    *,
    zones=("us-east-1a",),
    interfaces: int = 32,
    itype: str = "p5.48xlarge",
    placement: str | None = "cluster",
    reservation: bool = False,
    self_rules: list[R] | None = None,
    labels: dict | None = None,
) -> list[R]:
    """A p5 training pool as the GpuNodePool component declares it (ids unknown, as at preview)."""
    subnets = [
        R(SUBNET, f"private-{z}", {"availabilityZone": z, "mapPublicIpOnLaunch": False}) for z in zones
    ]
    lt_inputs = {"blockDeviceMappings": EBS, "metadataOptions": IMDS_OK}
    lt_deps: dict[str, list[str]] = {}
    if interfaces:
        lt_inputs["networkInterfaces"] = efa_interfaces(interfaces)
        lt_deps["networkInterfaces"] = ["efa-sg"]
    resources = [
        *subnets,
        R(SG, "efa-sg", {"description": "EFA"}),
        *(SELF_RULES if self_rules is None else self_rules),
    ]
    if placement:
        resources.append(R(PG, "pg", {"name": "train-cluster", "strategy": placement}))
        lt_inputs["placement"] = {"groupName": UNKNOWN}
        lt_deps["placement"] = ["pg"]
    if reservation:
        lt_inputs["capacityReservationSpecification"] = {
            "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
        }
    resources.append(R(LT, "train-lt", lt_inputs, deps=lt_deps))
    resources.append(
        R(
            NG,
            "train-ng",
            {
                "instanceTypes": [itype],
                "scalingConfig": {"minSize": 2.0, "desiredSize": 2.0, "maxSize": 4.0},
                "labels": labels if labels is not None else {"vpc.amazonaws.com/efa.present": "true"},
                "taints": GPU_TAINT,
                "launchTemplate": {"id": UNKNOWN, "version": UNKNOWN},
                "subnetIds": [UNKNOWN] * len(zones),
            },
            deps={"subnetIds": [f"private-{z}" for z in zones], "launchTemplate": ["train-lt"]},
        )
    )
    return resources


TRAINING = [
    "training-pool-single-zone",
    "training-pool-placement",
    "training-pool-efa-interfaces",
    "training-pool-efa-security-group",
]


@pytest.mark.parametrize("policy", TRAINING)
def test_training_pool_compliant(check, policy):
    check(policy, pool(), None)


def test_training_pool_two_zones_has_the_plan_time_message(check):
    problem, fix = zone_spread("EFA", ["us-east-1a", "us-east-1b"], "one zone")
    result = check(
        "training-pool-single-zone",
        pool(zones=("us-east-1a", "us-east-1b")),
        f"node group 'train-ng': {problem}; fix: {fix}",
    )
    [message] = [d.message for d in result.mandatory if d.policy == "training-pool-single-zone"]
    assert "the pool uses EFA but spans 2 zones/subnets ['us-east-1a', 'us-east-1b']" in message


@pytest.mark.parametrize(
    ("kw", "policy", "expected"),
    [
        ({"placement": None}, "training-pool-placement", "no placement group and no capacity reservation"),
        ({"placement": "spread"}, "training-pool-placement", "placement groups ['pg'] are not 'cluster'"),
        ({"placement": None, "reservation": True}, "training-pool-placement", None),
        (
            {"interfaces": 16},
            "training-pool-efa-interfaces",
            "attaches 16 EFA interfaces but p5.48xlarge takes 32",
        ),
        (
            {"interfaces": 4, "itype": "p4d.24xlarge"},
            "training-pool-efa-interfaces",
            "attaches 4 EFA interfaces but p4d.24xlarge takes 4",
        ),
        (
            {"self_rules": SELF_RULES[:1]},
            "training-pool-efa-security-group",
            "no security group on its EFA interfaces allows all traffic",
        ),
        ({"self_rules": []}, "training-pool-efa-security-group", "(groups ['efa-sg'])"),
        # a p5 pool in a train stack without EFA at all: the silent TCP fallback
        (
            {"interfaces": 0, "labels": {}},
            "training-pool-efa-interfaces",
            "attaches 0 EFA interfaces but p5.48xlarge takes 32",
        ),
    ],
    ids=[
        "no-pg",
        "spread-pg",
        "reservation",
        "half-efa",
        "p4d-efa-type",
        "no-egress",
        "no-self-rules",
        "no-efa",
    ],
)
def test_training_pool_violations(check, kw, policy, expected):
    check(policy, pool(**kw), expected)


def test_p4d_needs_efa_on_every_card(check):
    """p4d keeps 'efa' on every card (infra/pools/documents/efa.py): an efa-only layout is not p4d's."""
    check("training-pool-efa-interfaces", pool(interfaces=4, itype="p4d.24xlarge"), "takes 4")
    resources = pool(interfaces=0, itype="p4d.24xlarge")
    lt = next(r for r in resources if r.type == LT)
    lt.inputs["networkInterfaces"] = [
        {"deviceIndex": 0.0 if c == 0 else 1.0, "networkCardIndex": float(c), "interfaceType": "efa"}
        for c in range(4)
    ]
    lt.deps["networkInterfaces"] = ["efa-sg"]
    check("training-pool-efa-interfaces", resources, None)


def test_big_gpu_pool_in_an_infer_stack_is_not_a_training_pool(check):
    check(
        "training-pool-efa-interfaces",
        pool(interfaces=0, labels={}),
        None,
        role="infer",
        stack="prod-hk-infer",
        region="ap-east-1",
    )


ALLOW = "instance-type-allowlist"


@pytest.mark.parametrize(
    ("stack", "resource", "expected"),
    [
        ("prod-us-train", R(NG, "ng", {"instanceTypes": ["p5.48xlarge"]}), None),
        (
            "prod-us-train",
            R(NG, "ng", {"instanceTypes": ["g5.xlarge"]}),
            "instance types ['g5.xlarge'] are not allowed in stack 'prod-us-train'",
        ),
        (
            "dev-us-train",
            R(NG, "ng", {"instanceTypes": ["p5.48xlarge"]}),
            "not allowed in stack 'dev-us-train'",
        ),
        ("someone-else", R(NG, "ng", {"instanceTypes": ["g6e.xlarge"]}), None),  # the default list
        ("prod-us-train", R(LT, "lt", {"instanceType": "p5en.48xlarge"}), None),
        (
            "prod-hk-infer",
            nodepool("np"),
            "does not limit instance types or families",
        ),
        (
            "prod-hk-infer",
            nodepool("np", families=["g5", "g6e"]),
            None,
        ),
        (
            "prod-hk-infer",
            nodepool("np", families=["p5"]),
            "instance types ['p5'] are not allowed",
        ),
    ],
    ids=[
        "p5-prod",
        "g5-prod",
        "p5-dev",
        "fallback",
        "lt-type",
        "nodepool-unbounded",
        "nodepool-families",
        "nodepool-p5-infer",
    ],
)
def test_instance_type_allowlist(check, stack, resource, expected):
    """Each shipped stack with its own pack config file (stacks/policy-pack/), any other with the default."""
    role = "infer" if "infer" in stack else "train"
    check(ALLOW, [resource], expected, read_stack_pack_config(stack), stack=stack, role=role)


def test_allowlist_from_pack_config(check):
    config = {ALLOW: {"allowedInstanceTypes": ["g5.*"]}}
    check(ALLOW, [R(NG, "ng", {"instanceTypes": ["g5.xlarge"]})], None, pack_config=config)


def ng(name: str, itype: str, max_size: float) -> R:
    return R(NG, name, {"instanceTypes": [itype], "scalingConfig": {"minSize": 0.0, "maxSize": max_size}})


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([ng("train", "p5.48xlarge", 4), ng("system", "m6i.2xlarge", 10)], None),
        (
            [ng("train", "p5.48xlarge", 5)],
            "stack 'prod-us-train' can run 40 GPUs (train 5x8), over its budget of 32",
        ),
        ([ng("train", "p5.48xlarge", UNKNOWN)], "node group 'train': GPU count unknown"),
        ([ng("new", "g7.xlarge", 1)], "GPU count unknown (types ['g7.xlarge']"),
        (
            [nodepool("np", categories=["g"])],
            "GPU NodePool 'np' sets no spec.limits['nvidia.com/gpu']",
        ),
        (
            [
                ng("train", "p5.48xlarge", 3),
                nodepool("np", 16, categories=["g"]),
            ],
            "can run 40 GPUs (train 3x8, np limit 16)",
        ),
    ],
    ids=["within", "over", "unknown-size", "unknown-type", "nodepool-unbounded", "nodepool-counts"],
)
def test_gpu_budget(check, resources, expected):
    """prod-us-train (the synthetic plans' stack) with its own pack config file: a budget of 32 GPUs."""
    check("gpu-budget", resources, expected, read_stack_pack_config("prod-us-train"))


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        # an infer stack whose GPUs come only from Karpenter: its limit is what the budget (24) holds
        ([nodepool("gpu", 16, ["g5", "g4dn"])], None),
        (
            [nodepool("gpu", 25, ["g5", "g4dn"])],
            "stack 'prod-hk-infer' can run 25 GPUs (gpu limit 25), over its",
        ),
        # two GPU NodePools add up; a CPU-only NodePool's limit is not a GPU count
        (
            [nodepool("a", 16, ["g5"]), nodepool("b", 16, ["g4dn"]), nodepool("cpu", 64, ["m6i"])],
            "can run 32 GPUs (a limit 16, b limit 16), over its budget of 24",
        ),
    ],
    ids=["karpenter-within", "karpenter-over", "karpenter-pools-add-up"],
)
def test_gpu_budget_of_a_karpenter_only_stack(check, resources, expected):
    config = read_stack_pack_config("prod-hk-infer")
    check("gpu-budget", resources, expected, config, stack="prod-hk-infer", role="infer", region="ap-east-1")
