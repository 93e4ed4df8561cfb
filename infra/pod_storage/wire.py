"""Wiring of what the pods store to: IRSA roles onto the stack's buckets, or MinIO in the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pulumi

from infra.context import StackContext
from infra.core.charts import ChartPin
from infra.core.config import Role
from infra.core.namespaces import PodSecurity, pss_labels
from infra.mirror.wire import cached_chart
from infra.pod_storage.component.minio import Minio, MinioArgs, MinioWorkload
from infra.pod_storage.component.pod_iam import (
    InferenceAccess,
    PodRoles,
    PodRolesArgs,
    PublisherAccess,
    ServiceAccountRef,
    TrainerAccess,
)
from infra.storage import documents as storage_documents
from infra.storage.config.storage import (
    PUBLISHER_ROLE,
    BucketPurpose,
    MinioMode,
    MinioResources,
    PodAccessConfig,
    StorageBackend,
    outputs_prefix,
)
from infra.storage.wire import DATA_PURPOSES, StorageWiring

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


def minio_resources(r: MinioResources) -> dict[str, dict[str, str]]:
    """The chart's ``resources`` from ``storage.minio.resources`` (the limit defaults to the request)."""
    limits = {"memory": r.memory_limit, **({"cpu": r.limits.cpu} if r.limits.cpu else {})}
    return {"requests": {"cpu": r.requests.cpu, "memory": r.requests.memory}, "limits": limits}


def publisher_sources(cfg: PlatformConfig) -> list[str]:
    """The checkpoints-bucket prefixes the publisher may read: the trainer's output prefix, and the output
    prefix of every team with ``teams.<team>.releases`` (a team's prefix is its name, infra/queueing)."""
    teams = [name for name, team in sorted(cfg.teams.items()) if team.releases]
    return [outputs_prefix(cfg.storage.trainer.prefix), *(outputs_prefix(t) for t in teams)]


def minio_pools(cfg: PlatformConfig) -> list[str]:
    """The pools MinIO runs on: those that run system pods (gpu: false, no NoSchedule/NoExecute taint)."""
    return sorted(name for name, pool in cfg.node_pools.items() if pool.runs_system_pods)


def wire_cluster_storage(
    ctx: StackContext,
    storage: StorageWiring,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    k8s_provider: pulumi.ProviderResource,
    data_key_arn: pulumi.Input[str],
    k8s_depends_on: Sequence[pulumi.Resource] = (),
) -> PodRoles | Minio | None:
    """The storage pieces that need the cluster: IRSA pod roles (S3) or MinIO in the cluster (``minio``).

    ``k8s_provider`` is the cluster's Kubernetes provider and ``k8s_depends_on`` what must exist before
    MinIO can schedule (the node pools).
    """
    cfg, opts = ctx.cfg, ctx.in_region
    st = cfg.storage
    stack_prefix = ctx.names.stack_prefix

    def who(access: PodAccessConfig) -> ServiceAccountRef:
        return ServiceAccountRef(
            namespace=access.namespace, service_account=access.service_account, prefix=access.prefix
        )

    if st.backend == StorageBackend.minio:
        assert st.minio is not None  # the schema requires it with backend: minio
        purposes = DATA_PURPOSES if cfg.role == Role.train else (BucketPurpose.artifacts,)
        names = {p.value: cfg.bucket_name(p) for p in purposes}
        arn = {p: f"arn:aws:s3:::{n}" for p, n in names.items()}
        workloads = {
            "inference": MinioWorkload(
                namespace=st.inference.namespace,
                policy=storage_documents.inference_policy(
                    artifacts_arn=arn["artifacts"], prefix=st.inference.prefix, kms_key_arns=[]
                ),
            )
        }
        if cfg.role == Role.train:
            workloads["trainer"] = MinioWorkload(
                namespace=st.trainer.namespace,
                policy=storage_documents.trainer_policy(
                    datasets_arn=arn["datasets"],
                    checkpoints_arn=arn["checkpoints"],
                    artifacts_arn=arn["artifacts"],
                    prefix=st.trainer.prefix,
                    kms_key_arns=[],
                ),
            )
        return Minio(
            "minio",
            MinioArgs(
                # its images from the stack's ECR, by digest where recorded (infra/mirror/pins.py)
                chart=cached_chart(
                    ctx, ChartPin(repo=st.minio.chart_repo, chart="minio", version=st.minio.chart_version)
                ),
                namespace=st.minio.namespace,
                mode=st.minio.mode.value,
                replicas=st.minio.replicas if st.minio.mode is MinioMode.distributed else 1,
                storage_size=st.minio.storage_size,
                storage_class=st.minio.storage_class,
                tls_issuer=st.minio.tls_issuer,
                region=cfg.region,
                # baseline, not restricted: chart 5.4.0's pods set runAsUser/fsGroup but neither
                # allowPrivilegeEscalation: false nor a seccomp profile (charts.min.io values.yaml
                # securityContext/containerSecurityContext); restricted is still warned about and audited.
                namespace_labels=pss_labels(PodSecurity.baseline, cfg.cluster.kubernetes_version),
                buckets=names,
                workloads=workloads,
                resources=minio_resources(st.minio.resources),
                # the pools the plan checked MinIO fits on (rule minio-fits-system-pools)
                pools=minio_pools(cfg),
            ),
            opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=list(k8s_depends_on)),
        )

    if cfg.role == Role.train and storage.buckets is not None:
        arns = storage.buckets.bucket_arns
        pod_roles = PodRoles(
            "pod-roles",
            PodRolesArgs(
                stack_prefix=stack_prefix,
                oidc_provider_arn=oidc_provider_arn,
                oidc_issuer=oidc_issuer,
                kms_key_arns=[data_key_arn],
                trainer=TrainerAccess(
                    who=who(st.trainer),
                    datasets_arn=arns[BucketPurpose.datasets.value],
                    checkpoints_arn=arns[BucketPurpose.checkpoints.value],
                    artifacts_arn=arns[BucketPurpose.artifacts.value],
                ),
                # Publishing a model is its own step with its own role (python -m trainer.release.publish):
                # it reads
                # the trainer's outputs and those of the teams whose releases the stack allows.
                publisher=PublisherAccess(
                    who=who(st.publisher),
                    checkpoints_arn=arns[BucketPurpose.checkpoints.value],
                    source_prefixes=publisher_sources(cfg),
                    artifacts_arn=arns[BucketPurpose.artifacts.value],
                    role_name=ctx.names.role_name(PUBLISHER_ROLE),
                    signing_key_arn=storage.signing.key_arn if storage.signing else None,
                ),
                account_id=ctx.account.account_id,
                region=cfg.region,
            ),
            opts=opts,
        )
        ctx.export(
            "podRoles", {"trainer": pod_roles.trainer_role_arn, "publisher": pod_roles.publisher_role_arn}
        )
        return pod_roles
    if cfg.role == Role.infer and storage.replica is not None:
        replica = storage.replica
        pod_roles = PodRoles(
            "pod-roles",
            PodRolesArgs(
                stack_prefix=stack_prefix,
                oidc_provider_arn=oidc_provider_arn,
                oidc_issuer=oidc_issuer,
                kms_key_arns=[replica.apply(lambda r: r["keyArn"])],
                inference=InferenceAccess(
                    who=who(st.inference), artifacts_arn=replica.apply(lambda r: r["bucketArn"])
                ),
                account_id=ctx.account.account_id,
                region=cfg.region,
            ),
            opts=opts,
        )
        ctx.export("podRoles", {"inference": pod_roles.inference_role_arn})
        return pod_roles
    return None
