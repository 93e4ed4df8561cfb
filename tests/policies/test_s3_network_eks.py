"""S3 bucket rules (stack rules over the bucket's setting resources), network and EKS control-plane rules."""

from __future__ import annotations

import json

import pytest

from tests.policies.conftest import KEY_ARN, UNKNOWN, R

BUCKET = "aws:s3/bucket:Bucket"
NAME = "aiplat-prod-us-east-1-datasets"
ARNS = [f"arn:aws:s3:::{NAME}", f"arn:aws:s3:::{NAME}/*"]
TLS_ONLY = {
    "Sid": "DenyInsecureTransport",
    "Effect": "Deny",
    "Principal": "*",
    "Action": "s3:*",
    "Resource": ARNS,
    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
}
TLS_FLOOR = {
    "Sid": "DenyOldTls",
    "Effect": "Deny",
    "Principal": "*",
    "Action": "s3:*",
    "Resource": ARNS,
    "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}},
}
LIFECYCLE_RULES = [
    {
        "id": "abort",
        "status": "Enabled",
        "abortIncompleteMultipartUpload": {"daysAfterInitiation": 7.0},
        "filter": {"prefix": ""},
    },
    {
        "id": "noncurrent",
        "status": "Enabled",
        "noncurrentVersionExpiration": {"noncurrentDays": 90.0},
        "filter": {"prefix": ""},
    },
]


def settings(kind: str, role: str, inputs: dict) -> R:
    return R(f"aws:s3/{kind}", f"data-{role}", {"bucket": NAME} | inputs, deps={"bucket": ["data"]})


def compliant(**override) -> list[R]:
    """A bucket with every setting the S3 rules ask for; ``override`` replaces or (None) drops one."""
    parts = {
        "pab": settings(
            "bucketPublicAccessBlock:BucketPublicAccessBlock",
            "pab",
            {
                "blockPublicAcls": True,
                "blockPublicPolicy": True,
                "ignorePublicAcls": True,
                "restrictPublicBuckets": True,
            },
        ),
        "policy": settings(
            "bucketPolicy:BucketPolicy",
            "policy",
            {"policy": json.dumps({"Statement": [TLS_ONLY, TLS_FLOOR]})},
        ),
        "versioning": settings(
            "bucketVersioning:BucketVersioning",
            "versioning",
            {"versioningConfiguration": {"status": "Enabled"}},
        ),
        "lifecycle": settings(
            "bucketLifecycleConfiguration:BucketLifecycleConfiguration",
            "lifecycle",
            {"rules": LIFECYCLE_RULES},
        ),
        "sse": settings(
            "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "sse",
            {
                "rules": [
                    {
                        "applyServerSideEncryptionByDefault": {
                            "sseAlgorithm": "aws:kms",
                            "kmsMasterKeyId": KEY_ARN,
                        }
                    }
                ]
            },
        ),
    }
    for key, value in override.items():
        parts[key] = value
    return [R(BUCKET, "data", {"bucket": NAME}), *(p for p in parts.values() if p is not None)]


def policy_with(*statements: dict) -> R:
    return settings(
        "bucketPolicy:BucketPolicy", "policy", {"policy": json.dumps({"Statement": list(statements)})}
    )


S3_RULES = [
    "s3-public-access-block",
    "s3-tls-only",
    "s3-tls-floor",
    "s3-versioning",
    "s3-lifecycle",
    "s3-bucket-cmk-encryption",
]


@pytest.mark.parametrize("policy", S3_RULES)
def test_compliant_bucket_passes(check, policy):
    check(policy, compliant(), None)


@pytest.mark.parametrize(
    ("policy", "override", "expected"),
    [
        ("s3-public-access-block", {"pab": None}, "bucket 'data' has no public access block"),
        (
            "s3-public-access-block",
            {
                "pab": settings(
                    "bucketPublicAccessBlock:BucketPublicAccessBlock",
                    "pab",
                    {
                        "blockPublicAcls": True,
                        "blockPublicPolicy": False,
                        "ignorePublicAcls": True,
                        "restrictPublicBuckets": True,
                    },
                )
            },
            "does not set ['blockPublicPolicy']",
        ),
        ("s3-tls-only", {"policy": None}, "bucket 'data' accepts requests without TLS"),
        ("s3-tls-only", {"policy": policy_with(TLS_FLOOR)}, "accepts requests without TLS"),
        # a deny that covers only the objects, not the bucket itself
        (
            "s3-tls-only",
            {"policy": policy_with(TLS_ONLY | {"Resource": ARNS[1:]})},
            "accepts requests without TLS",
        ),
        ("s3-tls-floor", {"policy": policy_with(TLS_ONLY)}, "bucket 'data' accepts TLS older than 1.2"),
        (
            "s3-tls-floor",
            {
                "policy": policy_with(
                    TLS_ONLY, TLS_FLOOR | {"Condition": {"NumericLessThan": {"s3:TlsVersion": "1.1"}}}
                )
            },
            "accepts TLS older than 1.2",
        ),
        ("s3-versioning", {"versioning": None}, "bucket 'data' is not versioned (status None)"),
        (
            "s3-versioning",
            {
                "versioning": settings(
                    "bucketVersioning:BucketVersioning",
                    "versioning",
                    {"versioningConfiguration": {"status": "Suspended"}},
                )
            },
            "not versioned (status Suspended)",
        ),
        (
            "s3-lifecycle",
            {"lifecycle": None},
            "abort incomplete multipart uploads or expire noncurrent versions",
        ),
        (
            "s3-lifecycle",
            {
                "lifecycle": settings(
                    "bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                    "lifecycle",
                    {"rules": LIFECYCLE_RULES[:1]},
                )
            },
            "has no enabled lifecycle rule to expire noncurrent versions",
        ),
    ],
    ids=[
        "pab-missing",
        "pab-flag-off",
        "tls-no-policy",
        "tls-no-statement",
        "tls-objects-only",
        "floor-missing",
        "floor-too-low",
        "versioning-missing",
        "versioning-suspended",
        "lifecycle-missing",
        "lifecycle-no-noncurrent",
    ],
)
def test_bucket_violations(check, policy, override, expected):
    check(policy, compliant(**override), expected)


def test_tls_floor_13_by_config(check):
    config = {"s3-tls-floor": {"minTlsVersion": 1.3}}
    check("s3-tls-floor", compliant(), "accepts TLS older than 1.3", pack_config=config)


TRAIL = "aws:cloudtrail/trail:Trail"


def trail_bucket(lock: bool) -> list[R]:
    bucket = R(BUCKET, "trail-bucket", {"bucket": "trail-logs", "objectLockEnabled": lock})
    trail = R(
        TRAIL,
        "trail",
        {"s3BucketName": "trail-logs", "isMultiRegionTrail": True},
        deps={"s3BucketName": ["trail-bucket"]},
    )
    out = [bucket, trail]
    if lock:
        out.append(
            R(
                "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration",
                "trail-lock",
                {"bucket": "trail-logs", "rule": {"defaultRetention": {"mode": "COMPLIANCE", "days": 365}}},
                deps={"bucket": ["trail-bucket"]},
            )
        )
    return out


@pytest.mark.parametrize(
    ("resources", "config", "expected"),
    [
        (trail_bucket(True), None, None),
        (
            trail_bucket(False),
            None,
            "bucket 'trail-bucket' must be immutable (CloudTrail trail 'trail' writes to it)",
        ),
        (compliant(), None, None),  # not an audit bucket
        (
            compliant(),
            {"s3-object-lock": {"bucketPatterns": ["*-datasets"]}},
            "its name matches s3-object-lock",
        ),
    ],
    ids=["locked", "unlocked", "not-required", "required-by-config"],
)
def test_s3_object_lock(check, resources, config, expected):
    check("s3-object-lock", resources, expected, pack_config=config)


SG = "aws:ec2/securityGroup:SecurityGroup"
IN_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            R(
                SG,
                "lb",
                {
                    "ingress": [
                        {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["0.0.0.0/0"]}
                    ]
                },
            ),
            None,
        ),
        (
            R(
                SG,
                "vpc",
                {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["10.20.0.0/16"]}]},
            ),
            None,
        ),
        (
            R(
                SG,
                "ssh",
                {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]},
            ),
            "ingress on SSH (port 22) (protocol tcp) from ['0.0.0.0/0']",
        ),
        (
            R(
                SG,
                "v6",
                {
                    "ingress": [
                        {"protocol": "tcp", "fromPort": 8080, "toPort": 8080, "ipv6CidrBlocks": ["::/0"]}
                    ]
                },
            ),
            "ingress on ports 8080-8080 (protocol tcp) from ['::/0']",
        ),
        (
            R(IN_RULE, "all", {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"}),
            "ingress on all ports, SSH included (protocol -1) from ['0.0.0.0/0']",
        ),
        (
            R(IN_RULE, "unknown", {"ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": UNKNOWN}),
            None,
        ),
        (
            R(
                "aws:ec2/securityGroupRule:SecurityGroupRule",
                "r",
                {
                    "type": "ingress",
                    "protocol": "tcp",
                    "fromPort": 5432,
                    "toPort": 5432,
                    "cidrBlocks": ["0.0.0.0/0"],
                },
            ),
            "ingress on ports 5432-5432",
        ),
    ],
    ids=[
        "https-world",
        "vpc-only",
        "ssh-world",
        "ipv6-world",
        "rule-all-world",
        "unknown-cidr-443",
        "sg-rule-world",
    ],
)
def test_no_world_open_ingress(check, resource, expected):
    check("no-world-open-ingress", [resource], expected)


def test_unknown_cidr_counts_as_world(check):
    rule = R(IN_RULE, "unknown", {"ipProtocol": "tcp", "fromPort": 9090, "toPort": 9090, "cidrIpv4": UNKNOWN})
    check("no-world-open-ingress", [rule], "from ['<unknown at preview>']")


VPC = "aws:ec2/vpc:Vpc"
FLOW = "aws:ec2/flowLog:FlowLog"


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            [
                R(VPC, "vpc", {"cidrBlock": "10.20.0.0/16"}),
                R(
                    FLOW,
                    "flow",
                    {"vpcId": UNKNOWN, "logDestination": UNKNOWN, "trafficType": "ALL"},
                    deps={"vpcId": ["vpc"]},
                ),
            ],
            None,
        ),
        ([R(VPC, "vpc", {"cidrBlock": "10.20.0.0/16"})], "VPC 'vpc' has no flow log"),
        (
            [
                R(VPC, "vpc", {}),
                R(VPC, "other", {}),
                R(FLOW, "flow", {"logDestination": "arn:x"}, deps={"vpcId": ["other"]}),
            ],
            "VPC 'vpc' has no flow log",
        ),
    ],
    ids=["logged", "none", "other-vpc"],
)
def test_vpc_flow_logs(check, resources, expected):
    check("vpc-flow-logs", resources, expected)


LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (90, None),
        (None, "retention is 'never expire'"),
        (45, "retention_in_days 45 is not a CloudWatch Logs retention period; use e.g. 30"),
        (7, "retention 7 days is shorter than 14"),
        (UNKNOWN, "retention is unknown at preview"),
    ],
    ids=["90", "never", "not-accepted", "short", "unknown"],
)
def test_log_group_retention(check, days, expected):
    inputs = {"kmsKeyId": KEY_ARN} | ({} if days is None else {"retentionInDays": days})
    check("log-group-retention", [R(LOG_GROUP, "lg", inputs)], expected)


CLUSTER = "aws:eks/cluster:Cluster"


def cluster(vpc: dict | None = None, **inputs) -> R:
    vpc = {"endpointPrivateAccess": True, "endpointPublicAccess": False} if vpc is None else vpc
    return R(CLUSTER, "eks", {"vpcConfig": vpc, "version": "1.35"} | inputs)


@pytest.mark.parametrize(
    ("vpc", "expected"),
    [
        (None, None),
        (
            {
                "endpointPrivateAccess": True,
                "endpointPublicAccess": True,
                "publicAccessCidrs": ["52.94.76.0/24"],
            },
            None,
        ),
        ({"endpointPrivateAccess": True}, "the public endpoint admits 0.0.0.0/0 (no public_access_cidrs"),
        (
            {"endpointPrivateAccess": True, "endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]},
            "admits ['0.0.0.0/0']",
        ),
        (
            {
                "endpointPrivateAccess": True,
                "endpointPublicAccess": True,
                "publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"],
            },
            "cover 4294967296 public addresses",
        ),
        ({"endpointPrivateAccess": False, "endpointPublicAccess": False}, "the private endpoint is off"),
    ],
    ids=["private", "narrow-public", "default-public", "world", "halves", "no-private"],
)
def test_eks_private_endpoint(check, vpc, expected):
    check("eks-private-endpoint", [cluster(vpc)], expected)


@pytest.mark.parametrize(
    ("ranges", "refused"),
    [
        (["52.0.0.0/18"], True),  # 16,384 addresses: wider than any office or VPN egress
        (["52.0.0.0/20"], False),
        (["52.0.0.0/21", "54.0.0.0/21"], False),
        (["52.0.0.0/21", "54.0.0.0/20"], True),  # together wider than a /20
        (["10.0.0.0/8", "52.0.0.0/22"], False),  # private space does not count
    ],
    ids=["slash-18", "slash-20", "two-21s", "21-and-20", "private-plus-22"],
)
def test_public_endpoint_width_gets_one_verdict_from_plan_and_review(stack_config, ranges, refused):
    """The schema (aiplat plan) and eks-private-endpoint (aiplat review) judge by one function and one
    limit, so a CIDR list passes both or fails both."""
    from infra.core.errors import ConfigErrors
    from infra.schema.parse import parse_platform_config
    from tests.conftest import with_value
    from tests.policies.conftest import messages, review

    raw = with_value(stack_config("prod-us-train"), "cluster.endpoint_public_access_cidrs", ranges)
    try:
        parse_platform_config(raw)
        plan_problem = ""
    except ConfigErrors as exc:
        plan_problem = str(exc)
    vpc = {"endpointPrivateAccess": True, "endpointPublicAccess": True, "publicAccessCidrs": ranges}
    review_problems = messages(review([cluster(vpc)]), "eks-private-endpoint")
    assert bool(plan_problem) is bool(review_problems) is refused, (plan_problem, review_problems)
    if refused:
        (problem,) = review_problems
        assert problem.split("; fix: ")[0] in plan_problem


def test_eks_control_plane_logs(check):
    logs = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    check("eks-control-plane-logs", [cluster(enabledClusterLogTypes=logs)], None)
    check(
        "eks-control-plane-logs",
        [cluster(enabledClusterLogTypes=["api"])],
        "['audit', 'authenticator', 'controllerManager', 'scheduler'] are not enabled",
    )


@pytest.mark.parametrize(
    ("version", "as_of", "expected"),
    [
        ("1.35", "2026-11-30", None),
        (
            "1.33",
            "2026-11-30",
            "Kubernetes 1.33 left EKS standard support on 2026-07-29 (judged as of 2026-11-30)",
        ),
        ("1.33", "2026-07-29", None),
        ("1.27", "2026-11-30", "Kubernetes 1.27 is not in the EKS version calendar"),
        (None, "2026-11-30", "the Kubernetes version is not pinned"),
    ],
    ids=["current", "past", "last-day", "unknown-version", "unpinned"],
)
def test_eks_supported_version(check, version, as_of, expected):
    config = {"eks-supported-version": {"asOf": as_of}}
    inputs = {"vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False}}
    if version:
        inputs["version"] = version
    check("eks-supported-version", [R(CLUSTER, "eks", inputs)], expected, pack_config=config)


@pytest.mark.parametrize(
    ("policy", "config", "expected"),
    [
        ({"supportType": "STANDARD"}, None, None),
        (None, None, "upgrade policy support type is unset (EKS default: EXTENDED)"),
        ({"supportType": "EXTENDED"}, None, "support type is EXTENDED"),
        ({"supportType": "EXTENDED"}, {"eks-upgrade-policy": {"allowExtendedSupport": True}}, None),
    ],
    ids=["standard", "unset", "extended", "extended-allowed"],
)
def test_eks_upgrade_policy(check, policy, config, expected):
    inputs = {} if policy is None else {"upgradePolicy": policy}
    check("eks-upgrade-policy", [cluster(**inputs)], expected, pack_config=config)
