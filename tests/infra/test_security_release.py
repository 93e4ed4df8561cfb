"""Issue 24 item 1 on every plan (stacks/ and examples/): only the publisher writes release/, create-only;
only break-glass and the deployer administer the buckets holding releases; only the publisher signs
manifests; the publisher runs in its own namespace. Checked on what the real program registered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from infra.storage.documents import BUCKET_ADMIN_ACTIONS, RELEASE_WRITE_ACTIONS
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _doc(r: RecordedResource, key: str = "policy") -> dict[str, dict[str, Any]]:
    stmts = json.loads(r.inputs[key])["Statement"]
    return {s.get("Sid", str(i)): s for i, s in enumerate(stmts)}


def _release_buckets(plan: Plan) -> dict[str, RecordedResource]:
    """The policies of the artifacts bucket and its replicas (the buckets S3 replicates release/ into)."""
    return {p.name: p for p in plan.by_type(BUCKET_POLICY) if p.name.endswith("-artifacts-policy")}


def _s3_train(plan: Plan) -> bool:
    return plan.config["role"] == "train" and plan.config["storage"]["backend"] == "s3"


@pytest.mark.parametrize("stack", ALL)
def test_only_the_publisher_writes_releases_create_only(plans, stack: str) -> None:
    plan = plans[stack]
    buckets = _release_buckets(plan)
    if not _s3_train(plan):
        assert buckets == {}  # infer stacks read the train stack's replica; MinIO has no bucket policy
        return
    publisher = plan.outputs["podRoles"]["publisher"]
    glass = plan.outputs["keyRoles"]["breakGlass"]
    deployer = plan.config["security"]["account"]["deployer_role"]
    # the role the bucket policy names is the publisher's role as registered (fixed name)
    role = plan.one("aws:iam/role:Role", "pod-roles-publisher")
    assert publisher.endswith(f":role/{role.inputs['name']}")
    replicas = sorted(plan.config["storage"]["replicate_to"])
    assert sorted(buckets) == sorted(
        ["storage-artifacts-policy", *(f"replication-{r}-artifacts-policy" for r in replicas)]
    )
    for name, policy in buckets.items():
        st = _doc(policy)
        bucket_arn = st["DenyInsecureTransport"]["Resource"][0]
        writers = [publisher, glass] if name == "storage-artifacts-policy" else [glass]
        deny = st["OnlyPublisherWritesReleases"]
        assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", "*", RELEASE_WRITE_ACTIONS)
        assert deny["Resource"] == [f"{bucket_arn}/release/*"]
        assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": writers}}, name
        create = st["ReleaseWritesCreateOnly"]
        assert (create["Effect"], create["Principal"], create["Action"]) == ("Deny", "*", "s3:PutObject")
        assert create["Resource"] == [f"{bucket_arn}/release/*"]
        assert create["Condition"] == {
            "Null": {"s3:if-none-match": "true"},
            "Bool": {"s3:ObjectCreationOperation": "true"},
        }
        admin = st.get("OnlyBreakGlassAndDeployerAdministerBucket")
        if not deployer:  # without a named deployer the program would lock itself out: no such deny
            assert admin is None
            continue
        assert admin["Action"] == BUCKET_ADMIN_ACTIONS and admin["Principal"] == "*"
        assert admin["Resource"] == [bucket_arn, f"{bucket_arn}/*"]
        assert admin["Condition"] == {
            "ArnNotEquals": {"aws:PrincipalArn": [glass, f"arn:aws:iam::123456789012:role/{deployer}"]}
        }
    # the other buckets keep no release statements
    for p in plan.by_type(BUCKET_POLICY):
        if p.name not in buckets:
            assert "OnlyPublisherWritesReleases" not in _doc(p), p.name


@pytest.mark.parametrize("stack", ALL)
def test_only_the_publisher_signs_manifests(plans, stack: str) -> None:
    plan = plans[stack]
    keys = [k for k in plan.by_type("aws:kms/key:Key") if k.inputs.get("keyUsage") == "SIGN_VERIFY"]
    signers = [
        (p.name, s)
        for p in plan.by_type(ROLE_POLICY)
        for s in _doc(p).values()
        if s["Effect"] == "Allow" and any(a in ("kms:Sign", "kms:*") for a in s["Action"])
    ]
    if not _s3_train(plan):
        assert keys == [] and signers == []
        return
    (key,) = keys
    assert key.inputs["customerMasterKeySpec"] == "ECC_NIST_P256"
    publisher = plan.outputs["podRoles"]["publisher"]
    deny = _doc(key)["OnlyPublisherSigns"]
    assert deny["Effect"] == "Deny" and deny["Action"] == ["kms:Sign"]
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": publisher}}
    arn = plan.outputs["releaseSigningKeyArn"]
    assert [(n, s["Resource"]) for n, s in signers] == [("pod-roles-publisher-policy", [arn])]
    assert plan.outputs["releaseSigningPublicKey"].startswith("-----BEGIN PUBLIC KEY-----")


@pytest.mark.parametrize("stack", ALL)
def test_the_publisher_runs_in_its_own_namespace(plans, stack: str) -> None:
    plan = plans[stack]
    if plan.config["role"] != "train" or not plan.by_type("kubernetes:core/v1:Namespace"):
        return  # an infer stack, or kubernetes_access: skip (no Kubernetes objects at all)
    pub = plan.config["storage"]["publisher"]
    assert pub["namespace"] != plan.config["storage"]["trainer"]["namespace"]
    ns = plan.one("kubernetes:core/v1:Namespace", f"namespaces-{pub['namespace']}")
    labels = ns.inputs["metadata"]["labels"]
    assert labels["aiplat.io/workloads"] == "true"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    sa = plan.one(
        "kubernetes:core/v1:ServiceAccount", f"service-accounts-{pub['namespace']}-{pub['service_account']}"
    )
    assert sa.inputs["metadata"]["namespace"] == pub["namespace"]
    if _s3_train(plan):
        trust = json.loads(plan.one("aws:iam/role:Role", "pod-roles-publisher").inputs["assumeRolePolicy"])
        (stmt,) = trust["Statement"]
        subs = [v for cond in stmt["Condition"].values() for k, v in cond.items() if k.endswith(":sub")]
        assert subs == [f"system:serviceaccount:{pub['namespace']}:{pub['service_account']}"]
    vap = plan.one(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "admission-aiplat-publisher-identity",
    )
    text = json.dumps(vap.inputs["spec"])
    assert f"'{pub['namespace']}'" in text and f"'{pub['service_account']}'" in text


@pytest.mark.parametrize("stack", ALL)
def test_the_fetch_container_verifies_with_the_train_stacks_public_key(plans, plan_stack, stack: str) -> None:
    from trainer.release.signing import PUBLIC_KEY_ENV, load_public_key

    plan = plans[stack]
    deployments = [
        d for d in plan.by_type("kubernetes:apps/v1:Deployment") if d.name == "inference-deployment"
    ]
    if not deployments:
        return  # no inference server in this stack
    source = plan_stack(plan.config["storage"]["source_stack"])
    cm = plan.one("kubernetes:core/v1:ConfigMap", "inference-release-key")
    ((name, pem),) = cm.inputs["data"].items()
    assert pem == source.outputs["releaseSigningPublicKey"]
    load_public_key(pem.encode())  # a P-256 public key trainer/release/signing.py accepts
    spec = deployments[0].inputs["spec"]["template"]["spec"]
    (fetch,) = spec["initContainers"]
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    mounts = {m["name"]: m for m in fetch["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    (vol,) = [
        n for n, v in volumes.items() if v.get("configMap", {}).get("name") == cm.inputs["metadata"]["name"]
    ]
    assert mounts[vol]["readOnly"] is True
    assert env[PUBLIC_KEY_ENV] == f"{mounts[vol]['mountPath']}/{name}"


@pytest.mark.parametrize("stack", ALL)
def test_the_publisher_reads_only_outputs_of_the_trainer_and_of_releasing_teams(plans, stack: str) -> None:
    """The publisher role reads the Hugging Face folders under the trainer's and each ``releases: true``
    team's ``outputs/`` prefix, and nothing else of the checkpoints bucket: no checkpoint (its .metadata is a
    pickle), no other team's output."""
    plan = plans[stack]
    if not _s3_train(plan):
        return
    (policy,) = [p for p in plan.by_type(ROLE_POLICY) if p.name.startswith("pod-roles-publisher")]
    st = _doc(policy)
    trainer = (plan.config["storage"].get("trainer") or {}).get("prefix", "trainer")
    teams = plan.config.get("teams") or {}
    sources = [trainer, *sorted(t for t, c in teams.items() if c.get("releases"))]
    checkpoints = st["ListOutputsAndRunRecords"]["Resource"][0]
    assert checkpoints.endswith("-checkpoints")
    # the outputs and the same owners' run records (JSON, written once: a job's TrainJob and image)
    outputs = [f"{checkpoints}/{s}/outputs/*" for s in sources]
    records = [f"{checkpoints}/{s}/*/run-records/*" for s in sorted(sources)]
    assert st["ReadOutputsAndRunRecords"]["Resource"] == [*outputs, *records]
    assert not [a for a in st["ReadOutputsAndRunRecords"]["Action"] if not a.startswith("s3:GetObject")]
    listed = st["ListOutputsAndRunRecords"]["Condition"]["StringLike"]["s3:prefix"]
    assert sorted(listed) == sorted(
        [*(f"{s}/outputs/*" for s in sources), *(f"{s}/outputs" for s in sources)]
        + [f"{s}/*/run-records/*" for s in sources]
    )
    # nothing else of the checkpoints bucket, whatever the statement
    on_checkpoints = [
        r
        for s in st.values()
        if s["Effect"] == "Allow"
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if r.startswith(checkpoints + "/")
    ]
    assert sorted(on_checkpoints) == sorted([*(f"{checkpoints}/{s}/outputs/*" for s in sources), *records])
    if stack == "stacks/prod-us-train":  # research may release, production may not
        assert sources == ["trainer", "research"]
