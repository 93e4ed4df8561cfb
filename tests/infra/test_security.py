"""Security, proven on every plan (stacks/ and examples/): each test is one line of
docs/platform/security.md, checked on what the real program registered.

No pod borrows the node's credentials; nothing precious goes with a routine change; every access is on an
audit trail; a training job cannot publish to production.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS
from tests.support.config_cases import variant_name

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _doc(r: RecordedResource, key: str) -> dict[str, Any]:
    return json.loads(r.inputs[key])


def _statements(r: RecordedResource, key: str = "policy") -> dict[str, dict[str, Any]]:
    return {s.get("Sid", str(i)): s for i, s in enumerate(_doc(r, key)["Statement"])}


def _protected(plan: Plan) -> bool:
    sec = plan.config["security"]
    return sec["protect"] if sec["protect"] is not None else plan.config["environment"] == "prod"


def _s3(plan: Plan) -> bool:
    return plan.config["storage"]["backend"] == "s3"


# -- node credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_imds_hop_limit_1_everywhere(plans, stack: str) -> None:
    templates = plans[stack].by_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for lt in templates:
        meta = lt.inputs["metadataOptions"]
        assert meta["httpPutResponseHopLimit"] == 1 and meta["httpTokens"] == "required", lt.name


@pytest.mark.parametrize("stack", ALL)
def test_node_role_has_no_cni_or_parameter_store_access(plans, stack: str) -> None:
    plan = plans[stack]
    node_role = plan.one("aws:iam/role:Role", "cluster-node-role")
    on_node = [
        a.inputs["policyArn"]
        for a in plan.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == node_role.inputs["name"]
    ]
    assert not [p for p in on_node if p.endswith(("AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore"))]
    # nor on any other role of the plan (Karpenter's node role among them): the CNI policy only on vpc-cni's
    for a in plan.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        assert not a.inputs["policyArn"].endswith("AmazonSSMManagedInstanceCore"), a.name
        if a.inputs["policyArn"].endswith("AmazonEKS_CNI_Policy"):
            assert a.name.startswith("cluster-vpc-cni-"), a.name
    # vpc-cni gets the CNI policy through its own role, trusted by kube-system/aws-node only (IRSA)
    cni = plan.one("aws:iam/role:Role", "cluster-vpc-cni-role")
    (trust,) = _doc(cni, "assumeRolePolicy")["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert [v for k, v in trust["Condition"]["StringEquals"].items() if k.endswith(":sub")] == [
        "system:serviceaccount:kube-system:aws-node"
    ]
    cni_policies = [
        a.inputs["policyArn"]
        for a in plan.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.startswith("cluster-vpc-cni-")
    ]
    assert cni_policies == ["arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"]
    addon = next(a for a in plan.by_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni")
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{cni.name}"


@pytest.mark.parametrize("stack", ALL)
def test_session_manager_is_minimal_and_logged(plans, stack: str) -> None:
    plan = plans[stack]
    if not plan.config["security"]["session_manager"]:
        assert not plan.by_type("aiplat:sessions:NodeSessions")
        return
    group = plan.one("aws:cloudwatch/logGroup:LogGroup", "sessions-logs")
    assert group.inputs["kmsKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    doc = json.loads(plan.one("aws:ssm/document:Document").inputs["content"])
    assert doc["inputs"]["cloudWatchLogGroupName"] == group.inputs["name"]
    assert doc["inputs"]["cloudWatchEncryptionEnabled"] is True
    policy = _statements(plan.one("aws:iam/rolePolicy:RolePolicy", "sessions-node-policy"))
    actions = {a for st in policy.values() for a in st["Action"]}
    assert not [a for a in actions if a.startswith(("ssm:Get", "ssm:Send", "s3:", "kms:"))]


# -- protection ------------------------------------------------------------------------------------------


def _precious(plan: Plan) -> list[RecordedResource]:
    types = ("aws:kms/key:Key", "aws:s3/bucket:Bucket", "aws:ecr/repository:Repository")
    return [r for r in plan.resources if r.type in types]


@pytest.mark.parametrize("stack", ALL)
def test_keys_buckets_and_repositories_protected_in_prod(plans, stack: str) -> None:
    plan = plans[stack]
    precious = _precious(plan)
    assert precious
    want = _protected(plan)
    for r in precious:
        assert (r.options["protect"], r.options["retainOnDelete"]) == (want, want), r.name
    if plan.config["environment"] == "prod":
        assert want  # no prod stack turns it off


@pytest.mark.parametrize("stack", ALL)
def test_key_policies_separate_admins_and_guard_deletion(plans, stack: str) -> None:
    plan = plans[stack]
    admin = plan.outputs["keyRoles"]["keyAdmin"]
    glass = plan.outputs["keyRoles"]["breakGlass"]
    for key in plan.by_type("aws:kms/key:Key"):
        st = _statements(key)
        never = st["KeyAdministratorsNeverUseKey"]
        assert never["Effect"] == "Deny" and "kms:Decrypt" in never["Action"]
        assert never["Condition"] == {"ArnEquals": {"aws:PrincipalArn": admin}}
        if _protected(plan):
            only = st["OnlyBreakGlassDeletesKey"]
            assert only["Action"] == ["kms:ScheduleKeyDeletion", "kms:DisableKey"]
            assert only["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": glass}}
        else:
            assert "OnlyBreakGlassDeletesKey" not in st
    # the roles exist, named as the key policies name them, and the admin role has no key use
    roles = {r.inputs.get("name") for r in plan.by_type("aws:iam/role:Role")}
    assert {admin.rsplit("/", 1)[1], glass.rsplit("/", 1)[1]} <= roles
    admin_actions = {
        a
        for s in _statements(plan.one("aws:iam/rolePolicy:RolePolicy", "keyguard-key-admin-policy")).values()
        for a in s["Action"]
    }
    assert not [
        a for a in admin_actions if a in ("kms:*", "kms:Decrypt", "kms:GenerateDataKey*", "kms:CreateGrant")
    ]


@pytest.mark.parametrize("stack", ALL)
def test_key_deletion_disabling_policy_change_and_break_glass_alert(plans, stack: str) -> None:
    plan = plans[stack]
    topic = plan.one("aws:sns/topic:Topic")
    assert topic.inputs["kmsMasterKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    rules = [r for r in plan.by_type("aws:cloudwatch/eventRule:EventRule") if r.name.startswith("keyguard-")]
    key_regions = {k.inputs.get("region") or plan.region for k in plan.by_type("aws:kms/key:Key")}
    key_rules = [r for r in rules if r.name.startswith("keyguard-key-events")]
    assert {r.inputs.get("region") or plan.region for r in key_rules} == key_regions
    for rule in key_rules:
        pattern = json.loads(rule.inputs["eventPattern"])
        assert pattern["detail"]["eventName"] == ["ScheduleKeyDeletion", "DisableKey", "PutKeyPolicy"]
        assert pattern["detail-type"] == ["AWS API Call via CloudTrail"]
    # every AssumeRole of the break-glass role, in every region where the stack has keys
    glass_rules = [r for r in rules if r.name.startswith("keyguard-break-glass")]
    assert {r.inputs.get("region") or plan.region for r in glass_rules} == key_regions
    for rule in glass_rules:
        detail = json.loads(rule.inputs["eventPattern"])["detail"]
        assert detail["eventName"] == ["AssumeRole"]
        assert detail["requestParameters"]["roleArn"] == [plan.outputs["keyRoles"]["breakGlass"]]
    targets = [
        t for t in plan.by_type("aws:cloudwatch/eventTarget:EventTarget") if t.name.startswith("keyguard-")
    ]
    assert len(targets) == len(rules)
    for target in targets:
        if (target.inputs.get("region") or plan.region) == plan.region:
            assert target.inputs["arn"] == plan.outputs["keyAlertsTopic"]
        else:  # other regions forward to the home region's default bus
            assert target.inputs["arn"] == f"arn:aws:events:{plan.region}:123456789012:event-bus/default"


# -- audit -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_trail_and_data_events(plans, stack: str) -> None:
    plan = plans[stack]
    audit = plan.config["security"]["audit"]
    trails = plan.by_type("aws:cloudtrail/trail:Trail")
    if audit["trail"] == "existing":
        assert not trails and plan.outputs["auditTrail"] == audit["existing_trail"]
        return
    (trail,) = trails
    t = trail.inputs
    assert t["isMultiRegionTrail"] and t["enableLogFileValidation"] and t["includeGlobalServiceEvents"]
    assert t["kmsKeyId"] == plan.outputs["kmsKeyArns"]["logs"]
    bucket = plan.one("aws:s3/bucket:Bucket", "audit-bucket")
    assert t["s3BucketName"] == bucket.inputs["bucket"] and bucket.inputs["objectLockEnabled"] is True
    lock = plan.one("aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration").inputs
    # unset: COMPLIANCE in prod (nobody deletes a trail log early), GOVERNANCE in dev
    mode = audit["object_lock_mode"] or (
        "COMPLIANCE" if plan.config["environment"] == "prod" else "GOVERNANCE"
    )
    assert lock["rule"]["defaultRetention"] == {"days": audit["retention_days"], "mode": mode}
    selectors = {s["name"]: s["fieldSelectors"] for s in t["advancedEventSelectors"]}
    assert {"field": "eventCategory", "equals": ["Management"]} in selectors["management events"]
    if audit["s3_data_events"] and _s3(plan):
        data = {f["field"]: f for f in selectors["S3 object reads and writes of the data buckets"]}
        logged = set(data["resources.ARN"]["startsWiths"])
        ours = {f"arn:aws:s3:::{b}/" for b in plan.outputs["buckets"].values()}
        replicas = {f"{r['bucketArn']}/" for r in plan.outputs.get("artifactReplicas", {}).values()}
        assert logged == ours | replicas
    # the trail bucket keeps old versions for the retention, as its current objects
    (rule,) = plan.one(
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "audit-bucket-lifecycle"
    ).inputs["rules"]
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": audit["retention_days"]}
    assert rule["expiration"] == {"days": audit["retention_days"]}


# -- model promotion -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_only_release_replicates_without_delete_markers(plans, stack: str) -> None:
    plan = plans[stack]
    for config in plan.by_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig"):
        for rule in config.inputs["rules"]:
            assert rule["filter"] == {"prefix": "release/"}
            assert rule["deleteMarkerReplication"] == {"status": "Disabled"}
        policy = _statements(plan.one("aws:iam/rolePolicy:RolePolicy", "replication-role-policy"))
        assert not [a for s in policy.values() for a in s["Action"] if a == "s3:ReplicateDelete"]


@pytest.mark.parametrize("stack", ALL)
def test_who_writes_and_reads_releases(plans, stack: str) -> None:
    plan = plans[stack]
    policies = {
        r.name: _statements(r)
        for r in plan.by_type("aws:iam/rolePolicy:RolePolicy")
        if r.name.startswith("pod-roles-")
    }
    if "pod-roles-trainer-policy" in policies:
        never = policies["pod-roles-trainer-policy"]["NeverWriteReleases"]
        assert never["Effect"] == "Deny" and "s3:PutObject" in never["Action"]
        assert all(r.endswith("-artifacts/release/*") for r in never["Resource"])
        write = policies["pod-roles-publisher-policy"]["WriteReleases"]
        assert "s3:PutObject" in write["Action"] and "s3:DeleteObject" not in write["Action"]
        assert all(r.endswith("/release/*") for r in write["Resource"])
    if "pod-roles-inference-policy" in policies:
        read = policies["pod-roles-inference-policy"]["ReadArtifacts"]
        assert all(r.endswith("/release/*") for r in read["Resource"])
    for statements in policies.values():
        for st in statements.values():
            if st["Effect"] == "Allow" and all(a.startswith("s3:") for a in st["Action"]):
                assert st["Condition"]["StringEquals"]["s3:ResourceAccount"] == "123456789012"
            elif st.get("Sid") == "SignManifests":  # the publisher signs with the release signing key only
                assert st["Resource"] == [plan.outputs["releaseSigningKeyArn"]]
                assert set(st["Action"]) <= {"kms:Sign", "kms:GetPublicKey", "kms:DescribeKey"}
            elif st["Effect"] == "Allow":  # KMS: only through S3 in this region, for our buckets
                assert st["Condition"]["StringEquals"]["kms:ViaService"] == f"s3.{plan.region}.amazonaws.com"
                assert st["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"]


@pytest.mark.parametrize("stack", ALL)
def test_bucket_policies_tls_sse_c_and_key(plans, stack: str) -> None:
    plan = plans[stack]
    tls = plan.config["security"]["min_tls_version"]
    policies = plan.by_type("aws:s3/bucketPolicy:BucketPolicy")
    assert len(policies) == len(plan.by_type("aws:s3/bucket:Bucket"))  # every bucket has one
    for p in policies:
        st = _statements(p)
        assert st["DenyInsecureTransport"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert st["DenyOldTls"]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": tls}}
        assert "DenySseC" in st
        if "-datasets" in p.name or "-checkpoints" in p.name or "-artifacts-policy" in p.name:
            assert "DenyOtherKmsKeys" in st and "DenyOtherEncryption" in st


# -- smaller items ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_s3_endpoint_lets_us_east_1_nodes_pull_from_quay(plans, stack: str) -> None:
    """Review finding F3: in us-east-1 quay.io redirects blob GETs straight to its S3 bucket, which the
    gateway endpoint carries; only there does the endpoint policy name the registries' buckets."""
    plan = plans[stack]
    s3 = next(
        e for e in plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e.inputs["vpcEndpointType"] == "Gateway"
    )
    aws_owned = _statements(s3)["AwsBucketsNodesRead"]["Resource"]
    registries = {"arn:aws:s3:::quayio-production-s3/*", "arn:aws:s3:::docker-images-prod/*"}
    if plan.region == "us-east-1":
        assert registries <= set(aws_owned)
    else:
        assert not registries & set(aws_owned)


@pytest.mark.parametrize("stack", ALL)
def test_network_guards(plans, stack: str) -> None:
    plan = plans[stack]
    sg = plan.one("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup").inputs
    assert not sg.get("ingress") and not sg.get("egress")
    s3 = next(
        e for e in plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e.inputs["vpcEndpointType"] == "Gateway"
    )
    statements = _statements(s3)
    aws_owned = statements["AwsBucketsNodesRead"]["Resource"]
    assert f"arn:aws:s3:::prod-{plan.region}-starport-layer-bucket/*" in aws_owned
    ours = statements.get("OurBuckets", {}).get("Resource", [])
    for name in plan.outputs.get("buckets", {}).values():
        assert f"arn:aws:s3:::{name}/*" in ours
    flow = plan.one("aws:iam/role:Role", "network-flow-logs-role")
    (trust,) = _doc(flow, "assumeRolePolicy")["Statement"]
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    assert trust["Condition"]["ArnLike"] == {
        "aws:SourceArn": f"arn:aws:ec2:{plan.region}:123456789012:vpc-flow-log/*"
    }
    ebs = plan.by_type("aws:ebs/encryptionByDefault:EncryptionByDefault")
    assert len(ebs) == int(plan.config["security"]["ebs_encryption_by_default"])
    for r in ebs:
        assert r.inputs["enabled"] is True and r.options["retainOnDelete"] is True


@pytest.mark.parametrize("stack", ALL)
def test_cluster_access_is_configured_not_bootstrapped(plans, stack: str) -> None:
    plan = plans[stack]
    cluster = plan.one("aws:eks/cluster:Cluster").inputs
    assert cluster["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False
    entries = {
        e.name: e.inputs["principalArn"]
        for e in plan.by_type("aws:eks/accessEntry:AccessEntry")
        if e.name.startswith("cluster-access-")  # (node roles of other components have their own)
    }
    assert entries["cluster-access-break-glass"] == plan.outputs["keyRoles"]["breakGlass"]
    assert len(entries) == len(plan.config["cluster"]["access_entries"]) + 1


@pytest.mark.parametrize("stack", ALL)
def test_ebs_csi_pod_identity_is_scoped(plans, stack: str) -> None:
    plan = plans[stack]
    (trust,) = _doc(plan.one("aws:iam/role:Role", "addons-ebs-csi-role"), "assumeRolePolicy")["Statement"]
    assert trust["Condition"]["StringEquals"] == {
        "aws:SourceAccount": "123456789012",
        "aws:RequestTag/eks-cluster-name": plan.outputs["clusterName"],
        "aws:RequestTag/kubernetes-namespace": "kube-system",
        "aws:RequestTag/kubernetes-service-account": "ebs-csi-controller-sa",
    }


def test_dev_switch_protects_on_request(stack_config) -> None:
    from infra.plan.runner import run_plan
    from infra.schema.parse import parse_platform_config

    raw = stack_config("dev-us-train")
    raw["security"] = {
        "protect": True,
        "account": {"deployer_role": "aiplat-deploy"},
        "key_admin_principals": ["arn:aws:iam::123456789012:role/admins"],
        "break_glass_principals": ["arn:aws:iam::123456789012:role/oncall"],
    }
    plan = run_plan(variant_name(raw), parse_platform_config(raw))
    assert all(r.options["protect"] and r.options["retainOnDelete"] for r in _precious(plan))
    assert all("OnlyBreakGlassDeletesKey" in _statements(k) for k in plan.by_type("aws:kms/key:Key"))


@pytest.mark.parametrize("stack", ALL)
def test_ebs_csi_uses_the_key_only_through_ec2(plans, stack: str) -> None:
    plan = plans[stack]
    policy = _doc(plan.one("aws:iam/rolePolicy:RolePolicy", "addons-ebs-csi-kms"), "policy")
    for st in policy["Statement"]:
        assert st["Resource"] == [plan.outputs["kmsKeyArns"]["ebs"]]
        assert st["Condition"]["StringEquals"] == {"kms:ViaService": f"ec2.{plan.region}.amazonaws.com"}


@pytest.mark.parametrize("stack", ALL)
def test_publisher_has_its_own_service_account(plans, stack: str) -> None:
    plan = plans[stack]
    if "publisher" not in plan.outputs.get("podRoles", {}):
        return
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        # the AWS side only (examples/nat-none): the role exists, its service account comes with the cluster
        # services on a later pulumi up
        assert not plan.by_type("kubernetes:core/v1:ServiceAccount")
        return
    sa = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["metadata"]
        for r in plan.by_type("kubernetes:core/v1:ServiceAccount")
    }
    pub = plan.config["storage"]["publisher"]
    meta = sa[(pub["namespace"], pub["service_account"])]
    assert meta["annotations"]["eks.amazonaws.com/role-arn"] == plan.outputs["podRoles"]["publisher"]


@pytest.mark.parametrize("stack", ALL)
def test_kubernetes_waits_for_the_access_entries(plans, stack: str) -> None:
    # With no bootstrap admin, the deploying identity can apply Kubernetes objects only once its access
    # policy is associated: the cluster's Kubernetes provider (and so every object) waits for them.
    plan = plans[stack]
    provider = plan.one("pulumi:providers:kubernetes", "cluster-k8s")
    policies = [
        r.urn
        for r in plan.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
        if r.name.startswith("cluster-access-")
    ]
    assert policies and set(policies) <= set(provider.dependencies)
