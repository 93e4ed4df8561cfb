"""Cost tags (provider default tags count), data residency, load balancer TLS, IAM, ECR, protection and
CloudTrail rules."""

from __future__ import annotations

import json

import pytest

from tests.policies.conftest import KEY_ARN, TAGS, UNKNOWN, R

VPC = "aws:ec2/vpc:Vpc"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
TAGS_RULE = "required-cost-tags"


def test_default_tags_count(check):
    check(TAGS_RULE, [R(VPC, "vpc", {"cidrBlock": "10.0.0.0/16", "tags": {"Name": "x"}})], None)


def test_resource_tags_count_without_default_tags(check):
    check(TAGS_RULE, [R(VPC, "vpc", {"tags": dict(TAGS)})], None, default_tags=None)


def test_missing_tags(check):
    check(
        TAGS_RULE,
        [R(VPC, "vpc", {"tags": {"CostCenter": "ml", "Project": "p"}})],
        "tags ['Owner', 'Environment', 'Workload'] are missing",
        default_tags=None,
    )


def test_tags_all_of_stack_state_count(check):
    check(TAGS_RULE, [R(VPC, "vpc", {"tagsAll": dict(TAGS)})], None, default_tags={})


def test_non_taggable_types_are_not_checked(check):
    check(TAGS_RULE, [R("aws:kms/alias:Alias", "alias", {"name": "alias/x"})], None, default_tags=None)


def test_required_tags_from_config(check):
    config = {TAGS_RULE: {"requiredTags": ["CostCenter", "DataClass"]}}
    check(TAGS_RULE, [R(VPC, "vpc", {})], "tags ['DataClass'] are missing", pack_config=config)


def test_launch_template_tags_what_it_launches(check):
    specs = [
        {"resourceType": kind, "tags": dict(TAGS)} for kind in ("instance", "volume", "network-interface")
    ]
    check(TAGS_RULE, [R(LT, "lt", {"tagSpecifications": specs})], None)
    check(TAGS_RULE, [R(LT, "lt", {"tagSpecifications": specs[:1]})], "tag_specifications for volume lack")
    check(TAGS_RULE, [R(LT, "lt", {})], "tag_specifications for instance lack ['CostCenter'")


def test_karpenter_node_class_tags_its_nodes(check):
    node_class = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
    check(TAGS_RULE, [R(node_class, "nc", {"spec": {"tags": dict(TAGS)}})], None)
    check(
        TAGS_RULE,
        [R(node_class, "nc", {"spec": {"tags": {"Project": "aiplat"}}})],
        "spec.tags lack ['CostCenter'",
    )
    check(
        TAGS_RULE,
        [R(node_class, "nc", {"spec": {}})],
        "the nodes Karpenter launches would carry no cost tags",
    )


RESIDENCY = "data-residency-regions"


@pytest.mark.parametrize(
    ("plan_kw", "resource", "expected"),
    [
        ({"role": "infer", "stack": "prod-hk-infer", "region": "ap-east-1"}, R(VPC, "vpc", {}), None),
        (
            {"role": "infer", "stack": "prod-us-infer", "region": "us-east-1"},
            R(VPC, "vpc", {}),
            "created in us-east-1, which is not allowed for infer stacks (['ap-east-1', 'ap-southeast-1'])",
        ),
        # per-resource region (pulumi-aws v7): an infer resource placed in us-east-1
        (
            {"role": "infer", "stack": "prod-hk-infer", "region": "ap-east-1"},
            R(VPC, "vpc", {"region": "us-east-1"}),
            "created in us-east-1",
        ),
        # a train stack's replica in an inference region
        ({}, R("aws:s3/bucket:Bucket", "replica", {"bucket": "r", "region": "ap-east-1"}), None),
        (
            {},
            R("aws:s3/bucket:Bucket", "replica", {"bucket": "r", "region": "eu-central-1"}),
            "created in eu-central-1",
        ),
        ({"role": "oops"}, R(VPC, "vpc", {}), "the stack's role is unknown"),
        ({}, R(VPC, "vpc", {"region": UNKNOWN}), "created in <unknown at preview>"),
    ],
    ids=[
        "infer-home",
        "infer-in-us",
        "infer-resource-in-us",
        "train-replica",
        "train-elsewhere",
        "no-role",
        "unknown-region",
    ],
)
def test_data_residency_regions(check, plan_kw, resource, expected):
    check(RESIDENCY, [resource], expected, **plan_kw)


def test_residency_checks_the_provider_itself(check):
    result = check(RESIDENCY, [], "created in us-east-1", role="infer", stack="prod-us-infer")
    assert {d.resource for d in result.mandatory if d.policy == RESIDENCY} == {"aws aws"}


REPLICATION = "data-residency-replication"


def s3_replication(dest: str, dest_region: str | None) -> list[R]:
    out = [
        R(
            "aws:s3/bucketReplicationConfig:BucketReplicationConfig",
            "replication",
            {
                "bucket": "src",
                "rules": [
                    {"id": "to-hk", "status": "Enabled", "destination": {"bucket": f"arn:aws:s3:::{dest}"}}
                ],
            },
        )
    ]
    if dest_region:
        out.append(R("aws:s3/bucket:Bucket", "dest", {"bucket": dest, "region": dest_region}))
    return out


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (s3_replication("hk-artifacts", "ap-east-1"), None),
        (s3_replication("eu-artifacts", "eu-central-1"), "S3 replication rule 'to-hk' goes to eu-central-1"),
        (s3_replication("elsewhere", None), "goes to a bucket outside this stack (region unknown)"),
        (
            [
                R(
                    "aws:ecr/replicationConfiguration:ReplicationConfiguration",
                    "ecr",
                    {
                        "replicationConfiguration": {
                            "rules": [
                                {"destinations": [{"region": "ap-southeast-1"}, {"region": "us-west-2"}]}
                            ]
                        }
                    },
                )
            ],
            "ECR replicates images to us-west-2",
        ),
    ],
    ids=["allowed", "other-region", "outside-stack", "ecr"],
)
def test_data_residency_replication(check, resources, expected):
    check(REPLICATION, resources, expected)


LISTENER = "aws:lb/listener:Listener"


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        (
            {
                "protocol": "HTTPS",
                "port": 443,
                "sslPolicy": "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
                "certificateArn": "arn:c",
            },
            None,
        ),
        (
            {"protocol": "HTTPS", "port": 443, "sslPolicy": "ELBSecurityPolicy-2016-08"},
            "HTTPS listener uses security policy ELBSecurityPolicy-2016-08",
        ),
        (
            {"protocol": "TLS", "port": 443, "sslPolicy": "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"},
            "TLS listener uses",
        ),
        ({"protocol": "HTTPS", "port": 443}, "unset (defaults to ELBSecurityPolicy-2016-08)"),
        ({"protocol": "HTTP", "port": 80}, None),
    ],
    ids=["tls13", "2016", "tls12-res", "unset", "http"],
)
def test_lb_tls13_policy(check, inputs, expected):
    check("lb-tls13-policy", [R(LISTENER, "l", inputs)], expected)


REDIRECT = {"type": "redirect", "redirect": {"protocol": "HTTPS", "port": "443", "statusCode": "HTTP_301"}}


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"protocol": "HTTP", "port": 80, "defaultActions": [REDIRECT]}, None),
        (
            {
                "protocol": "HTTP",
                "port": 80,
                "defaultActions": [{"type": "forward", "targetGroupArn": "arn:tg"}],
            },
            "HTTP listener actions ['forward'] serve plain text",
        ),
        ({"protocol": "HTTPS", "port": 443, "defaultActions": [{"type": "forward"}]}, None),
    ],
    ids=["redirect", "forward", "https"],
)
def test_lb_http_redirect_only(check, inputs, expected):
    check("lb-http-redirect-only", [R("aws:alb/listener:Listener", "l", inputs)], expected)


INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
ALB = "alb.ingress.kubernetes.io/"


def ingress(**annotations) -> R:
    ann = {f"{ALB}certificate-arn": "arn:aws:acm:ap-east-1:1:certificate/x"} | {
        f"{ALB}{k.replace('_', '-')}": v for k, v in annotations.items()
    }
    return R(
        INGRESS,
        "inference",
        {"metadata": {"name": "inference", "annotations": ann}, "spec": {"ingressClassName": "alb"}},
    )


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([ingress(ssl_policy="ELBSecurityPolicy-TLS13-1-3-2021-06")], None),
        ([ingress()], "Ingress 'inference' gets security policy ELBSecurityPolicy-2016-08"),
        (
            [
                ingress(),
                R(
                    "kubernetes:helm.sh/v3:Release",
                    "lbc",
                    {
                        "chart": "aws-load-balancer-controller",
                        "values": {"defaultSSLPolicy": "ELBSecurityPolicy-TLS13-1-3-2021-06"},
                    },
                ),
            ],
            None,
        ),
        (
            [
                ingress(
                    ssl_policy="ELBSecurityPolicy-TLS13-1-3-2021-06",
                    listen_ports=json.dumps([{"HTTP": 80}, {"HTTPS": 443}]),
                )
            ],
            "listens on HTTP: a request sent there travels unencrypted",
        ),
        (
            [
                ingress(
                    ssl_policy="ELBSecurityPolicy-TLS13-1-3-2021-06",
                    listen_ports=json.dumps([{"HTTP": 80}, {"HTTPS": 443}]),
                    ssl_redirect="443",
                )
            ],
            "listens on HTTP: a request sent there travels unencrypted",
        ),
        (
            [
                ingress(
                    ssl_policy="ELBSecurityPolicy-TLS13-1-3-2021-06",
                    listen_ports=json.dumps([{"HTTPS": 443}]),
                )
            ],
            None,
        ),
        (
            [
                R(
                    "kubernetes:core/v1:Service",
                    "nlb",
                    {
                        "metadata": {
                            "name": "nlb",
                            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-ssl-cert": "arn:c"},
                        },
                        "spec": {"type": "LoadBalancer"},
                    },
                )
            ],
            "Service 'nlb' (NLB TLS) gets security policy ELBSecurityPolicy-2016-08",
        ),
    ],
    ids=[
        "annotated",
        "default-policy",
        "controller-default",
        "http-no-redirect",
        "http-redirect",
        "https-only",
        "nlb-default",
    ],
)
def test_k8s_load_balancer_tls13(check, resources, expected):
    check("k8s-load-balancer-tls13", resources, expected)


ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def doc(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            R(
                ROLE_POLICY,
                "p",
                {
                    "policy": doc(
                        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*"]}
                    )
                },
            ),
            None,
        ),
        (
            R(
                ROLE_POLICY,
                "p",
                {"policy": doc({"Sid": "All", "Effect": "Allow", "Action": "*", "Resource": "*"})},
            ),
            "statement 'All' allows every action on ['*']",
        ),
        (
            R(ROLE_POLICY, "p", {"policy": doc({"Effect": "Allow", "Action": "*:*", "Resource": "arn:x"})}),
            "allows every action",
        ),
        (
            R(
                "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                "a",
                {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
            ),
            "attaches arn:aws:iam::aws:policy/AdministratorAccess",
        ),
        (
            R(
                "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                "a",
                {"policyArn": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"},
            ),
            None,
        ),
        (
            R(
                "aws:iam/role:Role",
                "r",
                {
                    "assumeRolePolicy": doc(),
                    "inlinePolicies": [
                        {"name": "x", "policy": doc({"Effect": "Allow", "Action": "*", "Resource": "*"})}
                    ],
                },
            ),
            "inlinePolicies[0] statement",
        ),
    ],
    ids=["scoped", "star", "star-star", "admin-attached", "managed-ok", "inline"],
)
def test_iam_no_admin(check, resource, expected):
    check("iam-no-admin", [resource], expected)


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ({"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::1:role/trainer"}, None),
        (
            {"Sid": "Pass", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"},
            "statement 'Pass' allows iam:PassRole on '*'",
        ),
        ({"Effect": "Allow", "Action": ["iam:Pass*"], "Resource": ["*"]}, "allows iam:PassRole on '*'"),
        ({"Effect": "Allow", "Action": "iam:*", "Resource": "*"}, "allows iam:PassRole on '*'"),
        ({"Effect": "Deny", "Action": "iam:PassRole", "Resource": "*"}, None),
    ],
    ids=["named-role", "star", "pass-wildcard", "iam-star", "deny"],
)
def test_iam_no_passrole_wildcard(check, statement, expected):
    check("iam-no-passrole-wildcard", [R(ROLE_POLICY, "p", {"policy": doc(statement)})], expected)


OIDC = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/ABC"


def trust(condition: dict | None, principal: dict | str | None = None) -> R:
    stmt = {
        "Sid": "Irsa",
        "Effect": "Allow",
        "Principal": principal or {"Federated": OIDC},
        "Action": "sts:AssumeRoleWithWebIdentity",
    }
    if condition is not None:
        stmt["Condition"] = condition
    return R("aws:iam/role:Role", "role", {"assumeRolePolicy": doc(stmt)})


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        (
            trust(
                {
                    "StringEquals": {
                        f"{ISSUER}:sub": "system:serviceaccount:training:trainer",
                        f"{ISSUER}:aud": "sts.amazonaws.com",
                    }
                }
            ),
            None,
        ),
        (
            trust({"StringEquals": {f"{ISSUER}:aud": "sts.amazonaws.com"}}),
            "lets any identity of ABC assume the role",
        ),
        (
            trust(
                {
                    "StringLike": {
                        f"{ISSUER}:sub": "system:serviceaccount:*:*",
                        f"{ISSUER}:aud": "sts.amazonaws.com",
                    }
                }
            ),
            "lets any identity",
        ),
        (
            trust({"StringEquals": {f"{ISSUER}:sub": "system:serviceaccount:a:b"}}),
            "does not check the token audience",
        ),
        (trust(None, {"AWS": "*"}), "trust statement 'Irsa' lets any principal assume the role"),
        (trust(None, {"Service": "eks.amazonaws.com"}), None),
    ],
    ids=["irsa", "no-sub", "wildcard-sub", "no-aud", "any-principal", "service"],
)
def test_iam_trust_scoped(check, role, expected):
    check("iam-trust-scoped", [role], expected)


def test_confused_deputy_is_advisory(check):
    flow = trust(None, {"Service": "vpc-flow-logs.amazonaws.com"})
    result = check(
        "iam-trust-confused-deputy",
        [flow],
        "trust for ['vpc-flow-logs.amazonaws.com'] has no aws:SourceAccount",
    )
    assert {d.enforcement for d in result.diagnostics if d.policy == "iam-trust-confused-deputy"} == {
        "advisory"
    }
    scoped = trust(
        {"StringEquals": {"aws:SourceAccount": "123456789012"}}, {"Service": "vpc-flow-logs.amazonaws.com"}
    )
    check("iam-trust-confused-deputy", [scoped], None)


REPO = "aws:ecr/repository:Repository"


def test_ecr_immutable_tags(check):
    check("ecr-immutable-tags", [R(REPO, "r", {"imageTagMutability": "IMMUTABLE"})], None)
    check(
        "ecr-immutable-tags",
        [R(REPO, "r", {})],
        "image tags are mutable (image_tag_mutability MUTABLE (default))",
    )
    check(
        "ecr-immutable-tags",
        [
            R(
                "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate",
                "t",
                {"imageTagMutability": "MUTABLE"},
            )
        ],
        "image_tag_mutability MUTABLE",
    )


def test_ecr_scan_on_push(check):
    check("ecr-scan-on-push", [R(REPO, "r", {"imageScanningConfiguration": {"scanOnPush": True}})], None)
    check(
        "ecr-scan-on-push",
        [R(REPO, "r", {"imageScanningConfiguration": {"scanOnPush": False}})],
        "images are not scanned on push",
    )


PROTECT = "protect-stateful-in-prod"
KEY = R("aws:kms/key:Key", "data-key", {"enableKeyRotation": True})


def test_protect_in_prod(check):
    protected = [R(KEY.type, KEY.name, KEY.inputs, protect=True), R(REPO, "repo", {}, protect=True)]
    check(PROTECT, protected, None)
    check(PROTECT, [KEY], "Key 'data-key' is not protected in a prod stack")
    check(PROTECT, [R(REPO, "repo", {})], "Repository 'repo' is not protected")
    check(PROTECT, [KEY], None, environment="dev", stack="dev-us-train")
    check(PROTECT, [KEY], "the stack's environment is unknown", environment="")


def test_access_log_buckets_are_not_data_buckets(check):
    data = R("aws:s3/bucket:Bucket", "data", {"bucket": "d"}, protect=True)
    logs = R("aws:s3/bucket:Bucket", "logs", {"bucket": "l"})
    logging = R(
        "aws:s3/bucketLogging:BucketLogging",
        "lg",
        {"bucket": "d", "targetBucket": "l"},
        deps={"targetBucket": ["logs"]},
    )
    check(PROTECT, [data, logs, logging], None)
    check(PROTECT, [R(data.type, data.name, data.inputs), logs, logging], "Bucket 'data' is not protected")


TRAIL = "aws:cloudtrail/trail:Trail"
GOOD_TRAIL = {
    "isMultiRegionTrail": True,
    "enableLogFileValidation": True,
    "kmsKeyId": KEY_ARN,
    "s3BucketName": "t",
}


@pytest.mark.parametrize(
    ("resources", "config", "expected"),
    [
        ([R(TRAIL, "trail", GOOD_TRAIL)], None, None),
        ([], None, "stack 'prod-us-train' declares no CloudTrail trail"),
        (
            [R(TRAIL, "trail", GOOD_TRAIL | {"isMultiRegionTrail": False})],
            None,
            "trail 'trail' is not multi-region",
        ),
        ([R(TRAIL, "trail", GOOD_TRAIL | {"kmsKeyId": UNKNOWN})], None, None),
        ([], {"cloudtrail-present": {"trailElsewhere": "organization trail o-abc"}}, None),
    ],
    ids=["trail", "none", "single-region", "unknown-key", "elsewhere"],
)
def test_cloudtrail_present(check, resources, config, expected):
    check("cloudtrail-present", resources, expected, pack_config=config)
