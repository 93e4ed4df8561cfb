"""Minio on its own under mocks, with a real pulumi_kubernetes.Provider: pinned chart, TLS, generated
credentials that never appear in plan JSON, stack files or logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from infra.core.charts import ChartRef
from infra.plan import mocks as mocks_module
from infra.plan.mocks import AwsSnapshotMocks
from infra.plan.runner import SECRET, Plan, run_program
from infra.pod_storage.component.minio import Minio, MinioArgs, MinioWorkload
from infra.pod_storage.wire import minio_resources
from infra.storage import documents as storage_documents
from infra.storage.config.storage import MinioConfig
from tests.conftest import STACKS

REPO = Path(__file__).resolve().parents[3]
BUCKETS = {"datasets": "datasets", "checkpoints": "checkpoints", "artifacts": "artifacts"}


@pytest.fixture(scope="module")
def minio_plan() -> tuple[Plan, list[str], str]:
    """The recorded plan, every password the (mock) provider generated, and what was logged."""
    generated: list[str] = []
    original = mocks_module.COMPUTED["random:index/randomPassword:RandomPassword"]

    def spy(args, region):
        out = original(args, region)
        generated.append(out["result"])
        return out

    cfg = MinioConfig(storage_size="500Gi")  # the schema's defaults: pinned chart version, repo, issuer
    trainer = storage_documents.trainer_policy(
        datasets_arn="arn:aws:s3:::datasets",
        checkpoints_arn="arn:aws:s3:::checkpoints",
        artifacts_arn="arn:aws:s3:::artifacts",
        prefix="trainer",
        kms_key_arns=[],
    )

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        m = Minio(
            "minio",
            MinioArgs(
                chart=ChartRef(repo=cfg.chart_repo, chart="minio", version=cfg.chart_version),
                namespace=cfg.namespace,
                mode=cfg.mode.value,
                replicas=cfg.replicas,
                storage_size=cfg.storage_size,
                storage_class=cfg.storage_class,
                tls_issuer=cfg.tls_issuer,
                region="us-east-1",
                buckets=BUCKETS,
                resources=minio_resources(cfg.resources),
                pools=["system"],
                workloads={
                    "trainer": MinioWorkload(namespace="training", policy=trainer),
                    "inference": MinioWorkload(
                        namespace="inference",
                        policy=storage_documents.inference_policy(
                            artifacts_arn="arn:aws:s3:::artifacts", prefix="", kms_key_arns=[]
                        ),
                    ),
                },
            ),
            opts=pulumi.ResourceOptions(provider=provider),
        )
        pulumi.export("endpoint", m.endpoint)

    handler = _Capture()
    logging.getLogger().addHandler(handler)
    mocks_module.COMPUTED["random:index/randomPassword:RandomPassword"] = spy
    try:
        monitor = run_program(program, stack="minio", mocks=AwsSnapshotMocks("us-east-1"))
    finally:
        mocks_module.COMPUTED["random:index/randomPassword:RandomPassword"] = original
        logging.getLogger().removeHandler(handler)
    plan = Plan("minio", "aiplat", "us-east-1", {}, monitor.recorded, monitor.stack_outputs)
    return plan, generated, "\n".join(handler.lines)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_release_is_pinned_and_serves_tls(minio_plan) -> None:
    plan, _, _ = minio_plan
    release = plan.one("kubernetes:helm.sh/v3:Release").inputs
    assert release["chart"] == "minio"
    assert release["version"] == MinioConfig.model_fields["chart_version"].default
    assert release["repositoryOpts"] == {"repo": "https://charts.min.io/"}
    values = release["values"]
    assert values["tls"] == {
        "enabled": True,
        "certSecret": "minio-tls",
        "publicCrt": "tls.crt",
        "privateKey": "tls.key",
    }
    assert values["persistence"]["size"] == "500Gi"
    assert values["existingSecret"] == "minio-root"
    # the schema's default replaces the chart's 16Gi request; the limit defaults to the request
    assert values["resources"] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "aiplat.io/pool", "operator": "In", "values": ["system"]}]}
    ]
    assert sorted(b["name"] for b in values["buckets"]) == sorted(BUCKETS.values())
    assert all(b["versioning"] is True and b["policy"] == "none" for b in values["buckets"])
    # users get their password from a Secret, never from values
    assert [u["accessKey"] for u in values["users"]] == ["aiplat-inference", "aiplat-trainer"]
    assert all(
        set(u) == {"accessKey", "existingSecret", "existingSecretKey", "policy"} for u in values["users"]
    )
    assert "rootPassword" not in values and "rootUser" not in values
    cert = plan.one("kubernetes:cert-manager.io/v1:Certificate", "minio-certificate").inputs
    assert cert["spec"]["secretName"] == "minio-tls"
    assert cert["spec"]["issuerRef"]["name"] == "aiplat-ca"
    assert "minio.minio.svc.cluster.local" in cert["spec"]["dnsNames"]
    assert plan.outputs["endpoint"] == "https://minio.minio.svc.cluster.local:9000"


def test_credentials_are_generated_and_secret(minio_plan) -> None:
    plan, generated, _ = minio_plan
    assert len(generated) == 3 and all(len(p) == 40 for p in generated)
    secrets = {r.name: r.inputs for r in plan.by_type("kubernetes:core/v1:Secret")}
    assert sorted(secrets) == ["minio-inference-s3", "minio-root", "minio-trainer-s3", "minio-users"]
    # the Kubernetes SDK treats a Secret's data as secret as a whole: the plan shows only the marker
    assert all(s["stringData"] == SECRET for s in secrets.values())
    assert secrets["minio-trainer-s3"]["metadata"] == {"name": "aiplat-s3", "namespace": "training"}
    assert secrets["minio-inference-s3"]["metadata"] == {"name": "aiplat-s3", "namespace": "inference"}
    for r in plan.by_type("random:index/randomPassword:RandomPassword"):
        assert r.inputs["length"] == 40


def test_no_generated_secret_in_plan_config_or_log(minio_plan, plan_stack) -> None:
    plan, generated, logged = minio_plan
    texts = [json.dumps(plan.as_json()), logged]
    texts += [p.read_text() for p in (REPO / "stacks").glob("Pulumi.*.yaml")]
    texts += [json.dumps(plan_stack(s).as_json()) for s in STACKS]
    for value in generated:
        for text in texts:
            assert value not in text
    assert SECRET in texts[0]


def test_minio_config_needs_storage_size() -> None:
    with pytest.raises(ValueError, match="storage_size"):
        MinioConfig()  # type: ignore[call-arg]


def test_each_workload_namespace_gets_the_ca(minio_plan) -> None:
    """F7: a Certificate from MinIO's issuer in each workload namespace: its Secret's ca.crt is the CA."""
    from infra.pod_storage.documents import MINIO_CA_SECRET

    plan, _, _ = minio_plan
    serving = plan.one("kubernetes:cert-manager.io/v1:Certificate", "minio-certificate").inputs["spec"]
    trust = [
        r.inputs for r in plan.by_type("kubernetes:cert-manager.io/v1:Certificate") if r.name.endswith("-ca")
    ]
    assert sorted(c["metadata"]["namespace"] for c in trust) == ["inference", "training"]
    assert all(c["spec"]["issuerRef"] == serving["issuerRef"] for c in trust)
    # the name the training runtime mounts
    assert {c["spec"]["secretName"] for c in trust} == {MINIO_CA_SECRET}
