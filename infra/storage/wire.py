"""Wiring of the data stores for one stack, from the ``storage`` section (creates components only). Train
stacks (``backend: s3``): ``Buckets`` (datasets, checkpoints, artifacts, access logs), ``Registry`` (ECR)
and, with ``storage.replicate_to``, ``ArtifactReplication`` to the inference regions. Infer stacks read
their region's replica from the train stack named in ``storage.source_stack`` through a
``pulumi.StackReference``. ``backend: minio`` creates no buckets: MinIO runs in the cluster
(``infra/pod_storage/wire.py``). Stack outputs go to ``StackContext.exports``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.context import StackContext
from infra.core import naming
from infra.core.config import Role
from infra.core.project import stack_reference_name
from infra.core.teams import TEAM_REPOSITORIES
from infra.keys.wire import key_access
from infra.storage import documents as storage_documents
from infra.storage.component.break_glass import BreakGlassGrants, BreakGlassGrantsArgs
from infra.storage.component.buckets import Buckets, BucketsArgs, NoncurrentRule
from infra.storage.component.registry import Registry, RegistryArgs
from infra.storage.component.replication import ArtifactReplication, ArtifactReplicationArgs, ReplicaTarget
from infra.storage.component.signing import ReleaseSigningKey, ReleaseSigningKeyArgs
from infra.storage.config.security import TrailMode
from infra.storage.config.storage import PUBLISHER_ROLE, RELEASE_PREFIX, BucketPurpose, StorageBackend
from infra.storage.documents import GuardedBucket, ReleaseGuard, break_glass_storage_policy

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
    # train stacks on S3: the key the publisher signs release manifests with
    signing: ReleaseSigningKey | None = None


def release_roles(ctx: StackContext) -> tuple[str, str, str | None]:
    """ARNs of the publisher, break-glass and deployer (None when not configured) roles, from their names
    (``infra/core/naming.py``): a bucket or key policy names them before they exist."""
    part, acct, names = ctx.account.partition, ctx.account.account_id, ctx.names
    deployer = ctx.cfg.security.account.deployer_role
    return (
        naming.iam_role_arn(part, acct, names.role_name(PUBLISHER_ROLE)),
        naming.iam_role_arn(part, acct, names.role_name("break-glass")),
        naming.iam_role_arn(part, acct, deployer) if deployer else None,
    )


def wire_break_glass_grants(
    ctx: StackContext, out: StorageWiring, data_key_arn: pulumi.Output[str], role_name: pulumi.Input[str]
) -> BreakGlassGrants:
    """The allows behind break-glass's exemptions in the data buckets' and the replicas' policies."""
    assert out.buckets is not None
    _, glass, _ = release_roles(ctx)
    region = ctx.cfg.region
    here = release_guard(ctx, replica=False)
    pieces: list[tuple[str, pulumi.Output[str], pulumi.Output[str], ReleaseGuard | tuple[str, ...]]] = [
        (region, out.buckets.bucket_arns[BucketPurpose.artifacts.value], data_key_arn, here)
    ]
    # the datasets and checkpoints buckets: administration guard only
    pieces += [
        (region, out.buckets.bucket_arns[p.value], data_key_arn, here.admins)
        for p in DATA_PURPOSES
        if p is not BucketPurpose.artifacts and here.admins
    ]
    if out.replication is not None:
        rep = out.replication
        pieces += [
            (r, rep.replica_bucket_arns[r], rep.replica_key_arns[r], release_guard(ctx, replica=True))
            for r in sorted(rep.replica_bucket_arns)
        ]

    def document(resolved: list[str]) -> str:
        arns, keys = resolved[::2], resolved[1::2]
        guarded = [
            GuardedBucket(arn=arn, region=r, key_arn=key, guard=guard)
            if isinstance(guard, ReleaseGuard)
            else GuardedBucket(arn=arn, region=r, key_arn=key, admins=guard)
            for (r, _, _, guard), arn, key in zip(pieces, arns, keys, strict=True)
        ]
        return json.dumps(break_glass_storage_policy(glass, guarded))

    flat = [x for _, arn, key, _ in pieces for x in (arn, key)]
    return BreakGlassGrants(
        "storage-break-glass",
        BreakGlassGrantsArgs(role_name=role_name, policy=pulumi.Output.all(*flat).apply(document)),
        opts=ctx.in_region,
    )


def release_guard(ctx: StackContext, *, replica: bool) -> ReleaseGuard:
    """Who may write ``release/`` of the artifacts bucket (the publisher and break-glass; in a replica
    break-glass only, S3 replication writes there with s3:ReplicateObject) and administer the bucket
    (break-glass and the deployer; nobody is named without a deployer role, see ``ReleaseGuard``)."""
    publisher, glass, deployer = release_roles(ctx)
    return ReleaseGuard(
        prefix=RELEASE_PREFIX,
        writers=(glass,) if replica else (publisher, glass),
        admins=(glass, deployer) if deployer else (),
    )


def trail_bucket_name(ctx: StackContext) -> str | None:
    """The stack's CloudTrail bucket, when it has a trail of its own (S3 names are partition-wide)."""
    cfg = ctx.cfg
    if cfg.security.audit.trail is not TrailMode.create:
        return None
    return cfg.names.bucket("cloudtrail")


REPLICATION_ROLE = "s3-replication"


def data_bucket_names(ctx: StackContext) -> dict[str, str]:
    """purpose -> name of the stack's own data buckets (a train stack on S3; empty otherwise)."""
    cfg = ctx.cfg
    if cfg.role != Role.train or cfg.storage.backend != StorageBackend.s3:
        return {}
    return {p.value: cfg.bucket_name(p) for p in DATA_PURPOSES}


def outside_endpoint_principals(ctx: StackContext) -> tuple[str, ...]:
    """Who reaches the data buckets' objects from outside the VPC (``EndpointGuard.exempt``): S3 replication
    (the service, with our role), break-glass and the deployer (people, from wherever they are) and FSx for
    Lustre's service-linked role (a linked bucket)."""
    part, acct = ctx.account.partition, ctx.account.account_id
    _, glass, deployer = release_roles(ctx)
    replication = naming.iam_role_arn(part, acct, ctx.names.role_name(REPLICATION_ROLE))
    fsx = storage_documents.FSX_S3_ROLE_PATTERN.format(partition=part, account=acct)
    return tuple(a for a in (replication, glass, deployer, fsx) if a)


def wire_storage_source(ctx: StackContext) -> StorageWiring:
    """An infer stack's replica, read from its train stack (StackReference); empty wiring otherwise. What
    the network needs of storage (the replica bucket its S3 endpoint serves), before the buckets exist."""
    cfg, out = ctx.cfg, StorageWiring()
    st = cfg.storage
    if cfg.role == Role.infer and st.source_stack:
        ref = pulumi.StackReference(
            stack_reference_name(pulumi.get_organization(), st.source_stack), opts=ctx.in_region
        )
        out.source = ref
        out.replica = ref.require_output("artifactReplicas").apply(lambda r: r[cfg.region])
        ctx.export("artifactsBucket", out.replica.apply(lambda r: r["bucket"]))
        ctx.export("artifactsKeyArn", out.replica.apply(lambda r: r["keyArn"]))
        ctx.export("imageRegistry", out.replica.apply(lambda r: r["registry"]))
    return out


def wire_storage(
    ctx: StackContext,
    *,
    data_key_arn: pulumi.Output[str],
    break_glass_role_name: pulumi.Input[str] | None = None,
    s3_endpoint_id: pulumi.Input[str] | None = None,
    source: StorageWiring | None = None,
) -> StorageWiring:
    """Create the storage components the config asks for; their outputs go to ``ctx.exports``.
    ``break_glass_role_name``: the break-glass role (an output of it), given the allows its exemptions in
    the guarded buckets' policies need. ``s3_endpoint_id``: the stack's S3 gateway endpoint, the only way to
    the data buckets' objects (:func:`outside_endpoint_principals` excepted). ``source``: what
    :func:`wire_storage_source` returned (made here when None)."""
    cfg, account, opts = ctx.cfg, ctx.account, ctx.in_region
    out = source if source is not None else wire_storage_source(ctx)
    st = cfg.storage
    life = st.lifecycle
    if cfg.role == Role.infer:
        return out

    if st.backend == StorageBackend.s3:
        names = data_bucket_names(ctx)
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
                release_guards={BucketPurpose.artifacts.value: release_guard(ctx, replica=False)},
                # the datasets and checkpoints buckets: the same administration guard as the artifacts'
                admins=release_guard(ctx, replica=False).admins,
                s3_endpoint_id=s3_endpoint_id,
                outside_endpoint=outside_endpoint_principals(ctx),
            ),
            opts=opts,
        )
        publisher, glass, deployer = release_roles(ctx)
        out.signing = ReleaseSigningKey(
            "release-signing",
            ReleaseSigningKeyArgs(
                alias=naming.kms_alias(ctx.names.global_prefix, "release-signing"),
                keyset=ctx.names.global_prefix,
                account_root_arn=f"arn:{account.partition}:iam::{account.account_id}:root",
                publisher_role_arn=publisher,
                key_admin_role_arn=naming.iam_role_arn(
                    account.partition, account.account_id, ctx.names.role_name("key-admin")
                ),
                break_glass_role_arn=glass,
                deployer_role_arn=deployer,
                protect=cfg.protected,
            ),
            opts=opts,
        )
        ctx.export("releaseSigningKeyArn", out.signing.key_arn)
        ctx.export("releaseSigningPublicKey", out.signing.public_key_pem)
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
                release_guard=release_guard(ctx, replica=True),
                role_name=ctx.names.role_name(REPLICATION_ROLE),
            ),
            opts=opts,
        )

    if out.buckets is not None and break_glass_role_name is not None:
        wire_break_glass_grants(ctx, out, data_key_arn, break_glass_role_name)

    reg = cfg.registry
    replica_keys = out.replication.replica_key_arns if out.replication else {}
    _, glass, deployer = release_roles(ctx)
    # the deployer builds and pushes the platform's images (infra/training/component/images.py); without a
    # deployer role named, no repository policy (it would lock pulumi up out of its own pushes)
    admins = (glass, deployer) if deployer else ()
    # the teams' repositories (and their replicas) under one name prefix, whatever the number of teams
    teams = [f"{TEAM_REPOSITORIES}/*"] if any(t.registry.repositories for t in cfg.teams.values()) else []
    administered = [
        f"arn:{account.partition}:ecr:{r}:{account.account_id}:repository/{ctx.names.env_prefix}/{repo}"
        for r in (cfg.region, *sorted(replica_keys))
        for repo in [*reg.repositories, *teams]
    ]
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
            repository_policy=(
                json.dumps(storage_documents.platform_repository_policy(pushers=[deployer], admins=admins))
                if deployer
                else None
            ),
            replica_policy=(
                json.dumps(storage_documents.platform_replica_repository_policy(admins=admins))
                if deployer and replica_keys
                else None
            ),
            break_glass_role_name=break_glass_role_name if deployer else None,
            break_glass_policy=(
                json.dumps(storage_documents.registry_break_glass_policy(repository_arns=administered))
                if deployer
                else None
            ),
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
                    # where the Region's inference ALB writes its access logs (same Region, SSE-S3)
                    "accessLogBucket": rep.replica_log_bucket_names[region],
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
