"""Wiring of the data stores for one stack, from the ``storage`` section (creates components only).

Train stacks (``backend: s3``): ``Buckets`` (datasets, checkpoints, artifacts, access logs), ``Registry``
(ECR) and, with ``storage.replicate_to``, ``ArtifactReplication`` to the inference regions. Infer stacks read
their region's replica (bucket, key, registry) from the train stack named in ``storage.source_stack`` through
a ``pulumi.StackReference``: all stacks must share one state backend. ``backend: minio`` creates no buckets
here: MinIO runs in the cluster.

``wire_cluster_storage`` adds what needs the cluster (its OIDC provider and Kubernetes provider): IRSA
``PodRoles`` for S3, or ``Minio``. ``program.py`` calls it once the EKS component exists. Stack outputs go
to ``StackContext.exports``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.components.aws.buckets import Buckets, BucketsArgs, NoncurrentRule
from infra.components.aws.pod_iam import (
    InferenceAccess,
    PodRoles,
    PodRolesArgs,
    PublisherAccess,
    ServiceAccountRef,
    TrainerAccess,
)
from infra.components.aws.registry import Registry, RegistryArgs
from infra.components.aws.replication import ArtifactReplication, ArtifactReplicationArgs, ReplicaTarget
from infra.components.k8s.minio import Minio, MinioArgs, MinioWorkload
from infra.lib import iam
from infra.lib.namespaces import PodSecurity, pss_labels
from infra.model import naming
from infra.model.config.schema import (
    BucketPurpose,
    MinioMode,
    PlatformConfig,
    PodAccessConfig,
    Role,
    StorageBackend,
    TrailMode,
)
from infra.model.config.storage import RELEASE_PREFIX, MinioResources
from infra.model.project import stack_reference_name
from infra.wiring.context import StackContext
from infra.wiring.keys import key_access

DATA_PURPOSES = (BucketPurpose.datasets, BucketPurpose.checkpoints, BucketPurpose.artifacts)


@dataclass
class StorageWiring:
    """What the storage wiring created, for the components wired after the cluster (pod roles, MinIO)."""

    buckets: Buckets | None = None
    registry: Registry | None = None
    replication: ArtifactReplication | None = None
    # infer stacks: this region's replica, read from the train stack (and the reference, for other outputs)
    replica: pulumi.Output[Any] | None = None
    source: pulumi.StackReference | None = None


def trail_bucket_name(ctx: StackContext) -> str | None:
    """The stack's CloudTrail bucket, when it has a trail of its own (S3 names are partition-wide)."""
    cfg = ctx.cfg
    if cfg.security.audit.trail is not TrailMode.create:
        return None
    return cfg.names.bucket("cloudtrail")


def wire_storage(ctx: StackContext, *, data_key_arn: pulumi.Output[str]) -> StorageWiring:
    """Create the storage components the config asks for; their outputs go to ``ctx.exports``."""
    cfg, account, opts = ctx.cfg, ctx.account, ctx.in_region
    out = StorageWiring()
    st = cfg.storage
    life = st.lifecycle
    if cfg.role == Role.infer:
        if st.source_stack:
            ref = pulumi.StackReference(
                stack_reference_name(pulumi.get_organization(), st.source_stack), opts=opts
            )
            out.source = ref
            out.replica = ref.require_output("artifactReplicas").apply(lambda r: r[cfg.region])
            ctx.export("artifactsBucket", out.replica.apply(lambda r: r["bucket"]))
            ctx.export("artifactsKeyArn", out.replica.apply(lambda r: r["keyArn"]))
            ctx.export("imageRegistry", out.replica.apply(lambda r: r["registry"]))
        return out

    if st.backend == StorageBackend.s3:
        names = {p.value: cfg.bucket_name(p) for p in DATA_PURPOSES}
        out.buckets = Buckets(
            "storage",
            BucketsArgs(
                names=names,
                log_bucket_name=cfg.bucket_name(BucketPurpose.access_logs),
                kms_key_arn=data_key_arn,
                account_id=account.account_id,
                partition=account.partition,
                abort_multipart_days=life.abort_incomplete_multipart_days,
                log_expire_days=life.access_log_expire_days,
                noncurrent={
                    BucketPurpose.datasets.value: NoncurrentRule(expire_days=life.noncurrent_expire_days),
                    BucketPurpose.checkpoints.value: NoncurrentRule(
                        ia_days=life.checkpoint_noncurrent_ia_days,
                        expire_days=life.checkpoint_noncurrent_expire_days,
                    ),
                    BucketPurpose.artifacts.value: NoncurrentRule(expire_days=life.noncurrent_expire_days),
                },
                protect=cfg.protected,
                min_tls=cfg.security.min_tls_version.value,
                extra_log_sources=[n for n in [trail_bucket_name(ctx)] if n],
            ),
            opts=opts,
        )
        ctx.export("buckets", out.buckets.bucket_names)
        ctx.export("accessLogBucket", out.buckets.log_bucket_name)

    if st.replicate_to and out.buckets is not None:
        artifacts = out.buckets.buckets[BucketPurpose.artifacts.value]
        out.replication = ArtifactReplication(
            "replication",
            ArtifactReplicationArgs(
                env_prefix=ctx.names.env_prefix,
                # One train stack's replica key per target region: two train stacks replicating to the
                # same region must not share an alias, so the source stack's region code is in it.
                replica_key_alias=naming.kms_alias(ctx.names.global_prefix, "data-replica"),
                keyset=ctx.names.global_prefix,
                key_access=key_access(ctx),
                prefix=RELEASE_PREFIX,
                min_tls=cfg.security.min_tls_version.value,
                source_bucket_name=artifacts.bucket,
                source_bucket_arn=artifacts.arn,
                source_key_arn=data_key_arn,
                source_region=cfg.region,
                targets={
                    region: ReplicaTarget(
                        bucket_name=ctx.names.bucket("artifacts", region),
                        log_bucket_name=ctx.names.bucket("access-logs", region),
                    )
                    for region in st.replicate_to
                },
                account_id=account.account_id,
                partition=account.partition,
                abort_multipart_days=life.abort_incomplete_multipart_days,
                log_expire_days=life.access_log_expire_days,
                noncurrent_expire_days=life.noncurrent_expire_days,
                source_ready=[out.buckets],
            ),
            opts=opts,
        )

    reg = cfg.registry
    replica_keys = out.replication.replica_key_arns if out.replication else {}
    out.registry = Registry(
        "registry",
        RegistryArgs(
            namespace=ctx.names.env_prefix,
            repositories=reg.repositories,
            kms_key_arn=data_key_arn,
            untagged_expire_days=reg.untagged_expire_days,
            keep_images=reg.keep_images,
            account_id=account.account_id,
            partition=account.partition,
            replica_keys=replica_keys,
            protect=cfg.protected,
        ),
        opts=opts,
    )
    ctx.export("repositories", out.registry.repository_urls)
    if out.replication is not None:
        rep = out.replication
        # Read by the infer stacks through a StackReference: one entry per inference region.
        ctx.export(
            "artifactReplicas",
            {
                region: {
                    "bucket": rep.replica_bucket_names[region],
                    "bucketArn": rep.replica_bucket_arns[region],
                    "keyArn": rep.replica_key_arns[region],
                    "registry": out.registry.replica_registries[region],
                    # ECR replication creates the same repositories there, with the same digests: what the
                    # infer stacks run their images from (inference.image.digest)
                    "repositories": {
                        repo: f"{out.registry.replica_registries[region]}/{ctx.names.env_prefix}/{repo}"
                        for repo in reg.repositories
                    },
                }
                for region in sorted(st.replicate_to)
            },
        )
    return out


def minio_resources(r: MinioResources) -> dict[str, dict[str, str]]:
    """The chart's ``resources`` from ``storage.minio.resources`` (the limit defaults to the request)."""
    limits = {"memory": r.memory_limit, **({"cpu": r.limits.cpu} if r.limits.cpu else {})}
    return {"requests": {"cpu": r.requests.cpu, "memory": r.requests.memory}, "limits": limits}


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
                policy=iam.inference_policy(
                    artifacts_arn=arn["artifacts"], prefix=st.inference.prefix, kms_key_arns=[]
                ),
            )
        }
        if cfg.role == Role.train:
            workloads["trainer"] = MinioWorkload(
                namespace=st.trainer.namespace,
                policy=iam.trainer_policy(
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
                chart_repo=st.minio.chart_repo,
                chart_version=st.minio.chart_version,
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
                # Publishing a model is its own step with its own role (python -m trainer.publish).
                publisher=PublisherAccess(
                    who=who(st.publisher),
                    checkpoints_arn=arns[BucketPurpose.checkpoints.value],
                    checkpoints_prefix=st.trainer.prefix,
                    artifacts_arn=arns[BucketPurpose.artifacts.value],
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
