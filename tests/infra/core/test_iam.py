"""IAM documents as data: least privilege, scoped trust, TLS-only buckets, replication permissions."""

from __future__ import annotations

from typing import Any

import pytest

from infra.audit import documents as audit_documents
from infra.core import iam
from infra.keys.documents import iam as keys_iam
from infra.network.documents import iam as network_iam
from infra.pools.documents import iam as pools_iam
from infra.storage import documents as storage_documents

DATASETS = "arn:aws:s3:::d"
CHECKPOINTS = "arn:aws:s3:::c"
ARTIFACTS = "arn:aws:s3:::a"
KEY = "arn:aws:kms:us-east-1:111122223333:key/k"
OIDC = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/ABC"


def _allows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(action, resource) pairs the document allows."""
    out = []
    for st in doc["Statement"]:
        if st["Effect"] != "Allow":
            continue
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st.get("Resource", [])
        resources = resources if isinstance(resources, list) else [resources]
        out += [(a, r) for a in actions for r in resources]
    return out


def _all_docs() -> list[dict[str, Any]]:
    return [
        iam.irsa_trust_policy(OIDC, ISSUER, "training", "trainer"),
        storage_documents.trainer_policy(
            datasets_arn=DATASETS,
            checkpoints_arn=CHECKPOINTS,
            artifacts_arn=ARTIFACTS,
            prefix="t",
            kms_key_arns=[KEY],
        ),
        storage_documents.inference_policy(artifacts_arn=ARTIFACTS, prefix="t", kms_key_arns=[KEY]),
        storage_documents.bucket_policy(ARTIFACTS),
        storage_documents.access_log_bucket_policy("arn:aws:s3:::logs", [ARTIFACTS], "111122223333"),
        iam.service_trust_policy("s3.amazonaws.com", "111122223333"),
        iam.account_trust_policy(partition="aws", account_id="111122223333"),
        storage_documents.replication_policy(
            source_bucket_arn=ARTIFACTS,
            source_key_arn=KEY,
            source_region="us-east-1",
            destinations=[("arn:aws:s3:::r", "arn:aws:kms:ap-east-1:111122223333:key/r", "ap-east-1")],
        ),
        iam.ecr_template_role_policy(
            repository_arns=["arn:aws:ecr:ap-east-1:1:repository/x/*"], kms_key_arns=[KEY], replicate=True
        ),
        iam.ecr_template_role_policy(
            repository_arns=["arn:aws:ecr:ap-east-1:1:repository/x/*"], kms_key_arns=[KEY]
        ),
    ]


@pytest.mark.parametrize(
    "doc", _all_docs(), ids=lambda d: ",".join(s.get("Sid", "-") for s in d["Statement"])
)
def test_no_wildcard_grants(doc: dict[str, Any]) -> None:
    assert doc["Version"] == "2012-10-17"
    for st in doc["Statement"]:
        if st["Effect"] == "Allow":
            assert st.get("Principal") != "*" and st.get("Principal") != {"AWS": "*"}, st
    for action, resource in _allows(doc):
        assert resource != "*" and action not in ("*", "s3:*", "kms:*"), (action, resource)


@pytest.mark.parametrize(
    ("issuer", "namespace", "sa"),
    [(ISSUER, "training", "trainer"), ("https://" + ISSUER, "inference", "inference")],
)
def test_irsa_trust_is_scoped_to_one_service_account(issuer: str, namespace: str, sa: str) -> None:
    (st,) = iam.irsa_trust_policy(OIDC, issuer, namespace, sa)["Statement"]
    assert st["Principal"] == {"Federated": OIDC}
    assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert st["Condition"] == {
        "StringEquals": {
            f"{ISSUER}:sub": f"system:serviceaccount:{namespace}:{sa}",
            f"{ISSUER}:aud": "sts.amazonaws.com",
        }
    }


@pytest.mark.parametrize(("namespace", "sa"), [("", "trainer"), ("training", "")])
def test_irsa_trust_refuses_empty_subject(namespace: str, sa: str) -> None:
    with pytest.raises(ValueError, match="must be non-empty"):
        iam.irsa_trust_policy(OIDC, ISSUER, namespace, sa)


@pytest.mark.parametrize(
    ("action", "resource", "allowed"),
    [
        ("s3:GetObject", f"{DATASETS}/trainer/*", True),
        ("s3:GetObject", f"{DATASETS}/*", False),  # the teams' datasets are theirs
        ("s3:PutObject", f"{DATASETS}/trainer/*", False),  # datasets are read-only
        ("s3:PutObject", f"{CHECKPOINTS}/trainer/*", True),
        ("s3:PutObject", f"{CHECKPOINTS}/*", False),  # only under its prefix
        ("s3:AbortMultipartUpload", f"{ARTIFACTS}/trainer/*", True),
        ("s3:DeleteObject", f"{ARTIFACTS}/trainer/*", True),
        ("s3:ListBucket", DATASETS, True),
        ("kms:GenerateDataKey", KEY, True),
        ("kms:Decrypt", KEY, True),
    ],
)
def test_trainer_policy(action: str, resource: str, allowed: bool) -> None:
    doc = storage_documents.trainer_policy(
        datasets_arn=DATASETS,
        checkpoints_arn=CHECKPOINTS,
        artifacts_arn=ARTIFACTS,
        prefix="trainer/",
        kms_key_arns=[KEY],
    )
    assert ((action, resource) in _allows(doc)) is allowed
    listing = next(s for s in doc["Statement"] if s["Sid"] == "ListOwnPrefix")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["trainer/*", "trainer"]}}


@pytest.mark.parametrize(
    ("action", "resource", "allowed"),
    [
        ("s3:GetObject", f"{ARTIFACTS}/models/*", True),
        ("s3:PutObject", f"{ARTIFACTS}/models/*", False),
        ("s3:GetObject", f"{CHECKPOINTS}/models/*", False),
        ("kms:Decrypt", KEY, True),
        ("kms:GenerateDataKey", KEY, False),
    ],
)
def test_inference_policy_reads_artifacts_only(action: str, resource: str, allowed: bool) -> None:
    doc = storage_documents.inference_policy(artifacts_arn=ARTIFACTS, prefix="models", kms_key_arns=[KEY])
    assert ((action, resource) in _allows(doc)) is allowed


def test_empty_prefix_means_whole_bucket_and_no_key_means_no_kms() -> None:
    doc = storage_documents.inference_policy(artifacts_arn=ARTIFACTS, prefix="", kms_key_arns=[])
    assert ("s3:GetObject", f"{ARTIFACTS}/*") in _allows(doc)
    assert not [a for a, _ in _allows(doc) if a.startswith("kms:")]


def test_bucket_policy_denies_plain_http() -> None:
    st = storage_documents.bucket_policy(ARTIFACTS)["Statement"][0]
    assert st["Effect"] == "Deny" and st["Action"] == "s3:*"
    assert st["Resource"] == [ARTIFACTS, f"{ARTIFACTS}/*"]
    assert st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
def test_bucket_policy_tls_floor_sse_c_and_the_bucket_key_only(tls: str) -> None:
    doc = storage_documents.bucket_policy(ARTIFACTS, kms_key_arn=KEY, min_tls=tls)
    sids = {s["Sid"]: s for s in doc["Statement"]}
    assert set(sids) == {
        "DenyInsecureTransport",
        "DenyOldTls",
        "DenySseC",
        "DenyOtherKmsKeys",
        "DenyOtherEncryption",
        "DenyAwsManagedKey",
    }
    assert all(s["Effect"] == "Deny" and s["Principal"] == "*" for s in doc["Statement"])
    assert sids["DenyOldTls"]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": tls}}
    assert sids["DenyOldTls"]["Resource"] == [ARTIFACTS, f"{ARTIFACTS}/*"]
    assert sids["DenySseC"]["Condition"] == {
        "Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "false"}
    }
    assert "DenyOtherKmsKeys" not in {
        s["Sid"] for s in storage_documents.bucket_policy(ARTIFACTS)["Statement"]
    }


def _condition_holds(condition: dict, request: dict[str, str]) -> bool:
    """IAM's condition operators for the ones the encryption denials use
    (reference_policies_elements_condition_operators: an absent key makes StringEquals false,
    StringNotEquals true, any ...IfExists true; Null: "true" holds when the key is absent)."""
    for op, keys in condition.items():
        for key, value in keys.items():
            present = key in request
            if op == "Null":
                ok = (not present) == (value == "true")
            elif op.endswith("IfExists") and not present:
                ok = True
            elif op.removesuffix("IfExists") == "StringEquals":
                ok = present and request[key] == value
            elif op.removesuffix("IfExists") == "StringNotEquals":
                ok = not present or request[key] != value
            else:
                raise AssertionError(f"operator {op} not modelled here")
            if not ok:
                return False
    return True


ALGO = "s3:x-amz-server-side-encryption"
KEY_ID = "s3:x-amz-server-side-encryption-aws-kms-key-id"


@pytest.mark.parametrize(
    ("request_headers", "refused"),
    [
        ({}, False),  # the bucket default: our key (the trainer and the publisher send no SSE header)
        ({ALGO: "aws:kms", KEY_ID: KEY}, False),
        ({ALGO: "aws:kms", KEY_ID: "arn:aws:kms:us-east-1:123456789012:key/other"}, True),
        ({ALGO: "aws:kms"}, True),  # S3 would use the AWS managed key aws/s3
        ({ALGO: "AES256"}, True),
        ({KEY_ID: "arn:aws:kms:us-east-1:123456789012:key/other"}, True),
    ],
)
def test_encryption_denials_refuse_other_keys_and_let_the_bucket_default_through(
    request_headers: dict[str, str], refused: bool
) -> None:
    encryption = [
        st
        for st in storage_documents.bucket_policy(ARTIFACTS, kms_key_arn=KEY)["Statement"]
        if st["Sid"] in {"DenyOtherKmsKeys", "DenyOtherEncryption", "DenyAwsManagedKey"}
    ]
    assert len(encryption) == 3
    assert any(_condition_holds(st["Condition"], request_headers) for st in encryption) is refused


def test_access_log_policy_grants_logging_service_for_our_buckets_only() -> None:
    doc = storage_documents.access_log_bucket_policy(
        "arn:aws:s3:::logs", [ARTIFACTS, DATASETS], "111122223333"
    )
    *denies, grant = doc["Statement"]
    assert [d["Sid"] for d in denies] == ["DenyInsecureTransport", "DenyOldTls", "DenySseC"]
    assert grant["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    assert grant["Action"] == "s3:PutObject" and grant["Resource"] == ["arn:aws:s3:::logs/*"]
    assert grant["Condition"]["ArnLike"] == {"aws:SourceArn": [ARTIFACTS, DATASETS]}
    assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": "111122223333"}


@pytest.mark.parametrize("regions", [["ap-east-1"], ["ap-east-1", "ap-southeast-1"]])
def test_replication_policy(regions: list[str]) -> None:
    dest = [(f"arn:aws:s3:::r-{r}", f"arn:aws:kms:{r}:1:key/{r}", r) for r in regions]
    doc = storage_documents.replication_policy(
        source_bucket_arn=ARTIFACTS, source_key_arn=KEY, source_region="us-east-1", destinations=dest
    )
    allows = _allows(doc)
    assert ("s3:GetReplicationConfiguration", ARTIFACTS) in allows
    # only published models (release/) are read and replicated; delete markers are not replicated
    assert ("s3:GetObjectVersionForReplication", f"{ARTIFACTS}/release/*") in allows
    assert not [r for a, r in allows if r == f"{ARTIFACTS}/*"]
    assert not [a for a, _ in allows if a == "s3:ReplicateDelete"]
    for bucket, key, region in dest:
        assert ("s3:ReplicateObject", f"{bucket}/release/*") in allows
        enc = next(s for s in doc["Statement"] if s["Resource"] == [key])
        assert enc["Action"] == ["kms:Encrypt", "kms:GenerateDataKey"]
        assert enc["Condition"]["StringLike"]["kms:ViaService"] == f"s3.{region}.amazonaws.com"
        assert enc["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"] == [bucket, f"{bucket}/*"]
    decrypt = next(s for s in doc["Statement"] if s["Sid"] == "DecryptSource")
    assert decrypt["Resource"] == [KEY]
    assert decrypt["Condition"]["StringLike"]["kms:ViaService"] == "s3.us-east-1.amazonaws.com"
    # nothing may be written back into the source
    assert not [r for a, r in allows if a.startswith("s3:Replicate") and r.startswith(ARTIFACTS)]


def test_replication_policy_needs_a_destination() -> None:
    with pytest.raises(ValueError, match="at least one destination"):
        storage_documents.replication_policy(
            source_bucket_arn=ARTIFACTS, source_key_arn=KEY, source_region="us-east-1", destinations=[]
        )


@pytest.mark.parametrize(("days", "keep"), [(1, 1), (14, 100)])
def test_ecr_lifecycle(days: int, keep: int) -> None:
    rules = storage_documents.ecr_lifecycle_policy(untagged_days=days, keep_tagged=keep)["rules"]
    assert [r["rulePriority"] for r in rules] == [1, 2]
    assert rules[0]["selection"] == {
        "tagStatus": "untagged",
        "countType": "sinceImagePushed",
        "countUnit": "days",
        "countNumber": days,
    }
    assert rules[1]["selection"] == {
        "tagStatus": "any",
        "countType": "imageCountMoreThan",
        "countNumber": keep,
    }
    assert all(r["action"] == {"type": "expire"} for r in rules)


@pytest.mark.parametrize(("days", "keep"), [(0, 10), (10, 0)])
def test_ecr_lifecycle_rejects_zero(days: int, keep: int) -> None:
    with pytest.raises(ValueError):
        storage_documents.ecr_lifecycle_policy(untagged_days=days, keep_tagged=keep)


def test_minio_statements_keep_s3_grants_and_drop_kms() -> None:
    doc = storage_documents.trainer_policy(
        datasets_arn=DATASETS,
        checkpoints_arn=CHECKPOINTS,
        artifacts_arn=ARTIFACTS,
        prefix="t",
        kms_key_arns=[KEY],
    )
    statements = storage_documents.minio_policy_statements(doc)
    assert all(set(s) == {"resources", "actions"} for s in statements)
    assert all(a.startswith("s3:") for s in statements for a in s["actions"])
    assert {
        "resources": [f"{CHECKPOINTS}/t/*", f"{ARTIFACTS}/t/*"],
        "actions": iam.OBJECT_READ + iam.OBJECT_WRITE,
    } in (statements)


def _denies(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for st in doc["Statement"]:
        if st["Effect"] == "Deny":
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            out += [(a, r) for a in actions for r in st["Resource"]]
    return out


def test_trainer_never_writes_releases_even_with_a_whole_bucket_prefix() -> None:
    for prefix in ("trainer", ""):
        doc = storage_documents.trainer_policy(
            datasets_arn=DATASETS,
            checkpoints_arn=CHECKPOINTS,
            artifacts_arn=ARTIFACTS,
            prefix=prefix,
            kms_key_arns=[KEY],
        )
        assert ("s3:PutObject", f"{ARTIFACTS}/release/*") in _denies(doc)
        assert ("s3:DeleteObject", f"{ARTIFACTS}/release/*") in _denies(doc)


@pytest.mark.parametrize(
    ("action", "resource", "allowed"),
    [
        ("s3:GetObject", f"{CHECKPOINTS}/trainer/outputs/*", True),
        ("s3:GetObject", f"{CHECKPOINTS}/research/outputs/*", True),
        ("s3:GetObject", f"{CHECKPOINTS}/trainer/*", False),  # never a checkpoint (DCP .metadata is a pickle)
        ("s3:GetObject", f"{CHECKPOINTS}/production/outputs/*", False),  # a team without releases
        ("s3:PutObject", f"{CHECKPOINTS}/trainer/outputs/*", False),  # outputs are read-only to it
        ("s3:PutObject", f"{ARTIFACTS}/release/*", True),
        ("s3:DeleteObject", f"{ARTIFACTS}/release/*", False),  # a release stays
        ("s3:PutObject", f"{ARTIFACTS}/trainer/*", False),
        ("kms:GenerateDataKey", KEY, True),
    ],
)
def test_publisher_reads_outputs_and_writes_releases(action: str, resource: str, allowed: bool) -> None:
    doc = storage_documents.publisher_policy(
        checkpoints_arn=CHECKPOINTS,
        source_prefixes=["trainer/outputs", "research/outputs"],
        artifacts_arn=ARTIFACTS,
        release_prefix="release",
        kms_key_arns=[KEY],
        account_id="111122223333",
        region="us-east-1",
    )
    assert ((action, resource) in _allows(doc)) is allowed


def test_pod_policies_are_bound_to_our_account_and_s3() -> None:
    docs = [
        storage_documents.trainer_policy(
            datasets_arn=DATASETS,
            checkpoints_arn=CHECKPOINTS,
            artifacts_arn=ARTIFACTS,
            prefix="trainer",
            kms_key_arns=[KEY],
            account_id="111122223333",
            region="us-east-1",
        ),
        storage_documents.inference_policy(
            artifacts_arn=ARTIFACTS,
            prefix="release",
            kms_key_arns=[KEY],
            account_id="111122223333",
            region="ap-east-1",
        ),
    ]
    for doc in docs:
        for st in doc["Statement"]:
            if st["Effect"] != "Allow":
                continue
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            if all(a.startswith("s3:") for a in actions):
                assert st["Condition"]["StringEquals"]["s3:ResourceAccount"] == "111122223333"
            else:
                via = st["Condition"]["StringEquals"]["kms:ViaService"]
                assert via.startswith("s3.") and via.endswith(".amazonaws.com")
                contexts = st["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"]
                assert ARTIFACTS in contexts and f"{ARTIFACTS}/*" in contexts


@pytest.mark.parametrize("partition", ["aws", "aws-cn"])
def test_account_trust_is_the_account_root_only(partition: str) -> None:
    (st,) = iam.account_trust_policy(partition=partition, account_id="111122223333")["Statement"]
    assert st == {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::111122223333:root"},
        "Action": "sts:AssumeRole",
    }


def test_pod_identity_trust_is_scoped_by_session_tags() -> None:
    (st,) = iam.pod_identity_trust_policy(
        account_id="1", cluster_name="c", namespace="kube-system", service_account="ebs-csi-controller-sa"
    )["Statement"]
    assert st["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert st["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert st["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "1",
            "aws:RequestTag/eks-cluster-name": "c",
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "ebs-csi-controller-sa",
        }
    }


def test_s3_endpoint_policy_names_our_buckets_and_what_nodes_need() -> None:
    doc = network_iam.s3_endpoint_policy(bucket_names=["b", "a", "b"], region="ap-east-1")
    ours, aws_owned = doc["Statement"]
    assert ours["Resource"] == ["arn:aws:s3:::a", "arn:aws:s3:::a/*", "arn:aws:s3:::b", "arn:aws:s3:::b/*"]
    assert aws_owned["Action"] == ["s3:GetObject"]
    assert aws_owned["Resource"] == [
        "arn:aws:s3:::prod-ap-east-1-starport-layer-bucket/*",
        "arn:aws:s3:::al2023-repos-ap-east-1-de612dc2/*",
        "arn:aws:s3:::prod-registry-k8s-io-ap-east-1/*",
    ]


def test_s3_endpoint_policy_in_us_east_1_reads_the_public_registries_s3_backends() -> None:
    """Review finding F3: quay.io redirects us-east-1 clients straight to its S3 bucket (and Docker Hub's
    backend is an S3 bucket there); the gateway endpoint's policy must let nodes read them in us-east-1."""
    (aws_owned,) = network_iam.s3_endpoint_policy(bucket_names=[], region="us-east-1")["Statement"]
    assert aws_owned["Action"] == ["s3:GetObject"]
    assert "arn:aws:s3:::quayio-production-s3/*" in aws_owned["Resource"]
    assert "arn:aws:s3:::docker-images-prod/*" in aws_owned["Resource"]
    assert "arn:aws:s3:::prod-us-east-1-starport-layer-bucket/*" in aws_owned["Resource"]


@pytest.mark.parametrize("region", ["us-west-2", "ap-east-1", "ap-southeast-1", "eu-west-1"])
def test_s3_endpoint_policy_elsewhere_is_not_widened_for_us_east_1_buckets(region: str) -> None:
    """A gateway endpoint carries only same-region S3 traffic: the us-east-1 buckets are never read
    through another region's endpoint, so its policy does not name them."""
    (aws_owned,) = network_iam.s3_endpoint_policy(bucket_names=[], region=region)["Statement"]
    assert len(aws_owned["Resource"]) == 3
    assert not any("quayio" in r or "docker-images" in r for r in aws_owned["Resource"])


def test_cloudtrail_bucket_policy_only_our_trail() -> None:
    trail = "arn:aws:cloudtrail:us-east-1:1:trail/t"
    doc = audit_documents.cloudtrail_bucket_policy(
        bucket_arn="arn:aws:s3:::tb", trail_arn=trail, account_id="1", min_tls="1.3"
    )
    sids = {s["Sid"]: s for s in doc["Statement"]}
    assert sids["CloudTrailAclCheck"]["Condition"] == {"StringEquals": {"aws:SourceArn": trail}}
    write = sids["CloudTrailWrite"]
    assert write["Resource"] == "arn:aws:s3:::tb/AWSLogs/1/*"
    assert write["Condition"]["StringEquals"] == {
        "s3:x-amz-acl": "bucket-owner-full-control",
        "aws:SourceArn": trail,
    }
    assert "DenyInsecureTransport" in sids
    # the same TLS floor and SSE-C refusal as the data and access-log buckets
    assert sids["DenyOldTls"]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": "1.3"}}
    assert sids["DenySseC"]["Resource"] == ["arn:aws:s3:::tb/*"]


def test_session_manager_policy_is_the_minimal_agent_set() -> None:
    doc = pools_iam.session_manager_policy("arn:aws:logs:us-east-1:1:log-group:/aiplat/x/ssm-sessions")
    actions = {a for st in doc["Statement"] for a in st["Action"]}
    assert not [a for a in actions if a.startswith("ssm:Get")]  # no Parameter Store reads
    assert "ssm:UpdateInstanceInformation" in actions and "ssmmessages:OpenDataChannel" in actions


def test_key_admin_has_no_crypto_and_break_glass_no_use() -> None:
    admin = keys_iam.key_admin_policy(account_id="1", partition="aws", keyset_tag="k")
    glass = keys_iam.break_glass_policy(account_id="1", partition="aws", keyset_tag="k", cluster_arn="arn:c")
    for doc in (admin, glass):
        actions = [a for st in doc["Statement"] for a in st["Action"]]
        assert not [
            a
            for a in actions
            if a.split(":")[1].startswith(("Encrypt", "Decrypt", "ReEncrypt", "Generate", "CreateGrant", "*"))
        ]
    assert "kms:ScheduleKeyDeletion" not in [a for st in admin["Statement"] for a in st["Action"]]
    scoped = [
        st
        for st in admin["Statement"] + glass["Statement"]
        if "kms:DescribeKey" in st["Action"] or "kms:Describe*" in st["Action"]
    ]
    assert all(st["Condition"] == {"StringEquals": {"aws:ResourceTag/aiplat:keyset": "k"}} for st in scoped)
