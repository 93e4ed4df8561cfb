"""Wiring of the audit trail (CloudTrail into an Object Lock bucket, S3 data events, GuardDuty) and of the
account settings of the stack's region (EBS encryption by default).

With ``security.audit.trail: existing`` nothing is created: the named trail (an organization trail, or the
environment's train stack trail for its infer stacks) is exported as the stack's audit trail.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.audit import documents as audit_documents
from infra.audit.component import AuditTrail, AuditTrailArgs
from infra.context import StackContext
from infra.core import naming
from infra.core.config import Role
from infra.keys.component.keyguard import EventAlert
from infra.keys.component.kms import KmsKeys
from infra.storage.config.security import TrailMode
from infra.storage.config.storage import BucketPurpose, StorageBackend
from infra.storage.rules import trail_object_lock_mode
from infra.storage.wire import StorageWiring, trail_bucket_name


def watched_buckets(ctx: StackContext) -> dict[str, list[str]]:
    """Region -> the names of the buckets this stack creates there (its data and access-log buckets, its
    trail bucket, the artifacts replicas and their log buckets): the bucket-policy alert watches them. Names
    follow from the config (``storage.bucket_names`` or the derived ones), as the buckets are created."""
    cfg, names = ctx.cfg, ctx.names
    out: dict[str, list[str]] = {}
    st = cfg.storage
    if cfg.role is Role.train and st.backend is StorageBackend.s3:
        out[cfg.region] = [
            cfg.bucket_name(p)
            for p in (BucketPurpose.datasets, BucketPurpose.checkpoints, BucketPurpose.artifacts)
        ] + [cfg.bucket_name(BucketPurpose.access_logs)]
        for region in sorted(st.replicate_to):
            out[region] = [names.bucket("artifacts", region), names.bucket("access-logs", region)]
    if (trail := trail_bucket_name(ctx)) is not None:
        out.setdefault(cfg.region, []).append(trail)
    return out


def audit_alerts(ctx: StackContext) -> list[EventAlert]:
    """The audit alerts, on the key guard's topic (``infra/keys``): CloudTrail trails stopped, deleted or
    narrowed, in the stack's region (a multi-region trail is changed in its home region); and the policy of
    one of the stack's buckets replaced or deleted, in each region it has buckets in (forwarded home). Kept
    whatever ``security.audit.trail`` says: an organization trail is watched as well."""
    names = ctx.names
    buckets = watched_buckets(ctx)
    alerts = [
        EventAlert(
            role="trail-changes",
            rule_name=naming.event_rule_name(names.stack_prefix, "trail-changes"),
            description=audit_documents.AUDIT_ALERTS[audit_documents.TRAIL_ALERT],
            pattern=audit_documents.trail_event_pattern(),
        )
    ]
    if buckets:
        alerts.append(
            EventAlert(
                role="bucket-policy-changes",
                rule_name=naming.event_rule_name(names.stack_prefix, "bucket-policy-changes"),
                description=audit_documents.AUDIT_ALERTS[audit_documents.BUCKET_POLICY_ALERT],
                pattern=audit_documents.bucket_policy_event_pattern(
                    [b for bs in buckets.values() for b in bs]
                ),
                forward_regions=tuple(sorted(set(buckets) - {ctx.cfg.region})),
            )
        )
    return alerts


def wire_audit(ctx: StackContext, keys: KmsKeys, storage: StorageWiring) -> AuditTrail | None:
    cfg, names, account = ctx.cfg, ctx.names, ctx.account
    audit = cfg.security.audit
    if audit.trail is TrailMode.existing:
        ctx.export("auditTrail", audit.existing_trail)
        return None
    data_buckets: list[pulumi.Input[str]] = []
    if audit.s3_data_events and storage.buckets is not None:
        data_buckets += [storage.buckets.bucket_arns[p] for p in sorted(storage.buckets.bucket_arns)]
    if audit.s3_data_events and storage.replication is not None:
        rep = storage.replication.replica_bucket_arns
        data_buckets += [rep[r] for r in sorted(rep)]
    trail_name = naming.trail_name(names.global_prefix)
    bucket_name = trail_bucket_name(ctx)
    assert bucket_name is not None  # trail: create
    trail = AuditTrail(
        "audit",
        AuditTrailArgs(
            trail_name=trail_name,
            trail_arn=naming.trail_arn(account.partition, cfg.region, account.account_id, trail_name),
            bucket_name=bucket_name,
            account_id=account.account_id,
            logs_key_arn=keys.logs_key_arn,
            retention_days=audit.retention_days,
            object_lock_mode=trail_object_lock_mode(cfg).value,
            data_event_bucket_arns=data_buckets,
            access_log_bucket=storage.buckets.log_bucket_name if storage.buckets is not None else None,
            min_tls=cfg.security.min_tls_version.value,
            protect=cfg.protected,
            guardduty=audit.guardduty,
        ),
        opts=ctx.in_region,
    )
    ctx.export("auditTrail", trail.trail_arn)
    ctx.export("auditBucket", trail.bucket_name)
    return trail


def wire_region_settings(ctx: StackContext) -> None:
    """Account settings of the stack's region that one stack per account and region owns."""
    if ctx.cfg.security.ebs_encryption_by_default:
        # Every new EBS volume in the region is encrypted (AWS managed key unless a request names one; our
        # launch templates name the EBS key). Kept when the stack goes: removing a stack must not turn the
        # setting off for everything else in the region.
        # https://docs.aws.amazon.com/ebs/latest/userguide/encryption-by-default.html
        aws.ebs.EncryptionByDefault(
            "ebs-encryption-by-default",
            enabled=True,
            opts=pulumi.ResourceOptions(provider=ctx.provider, retain_on_delete=True),
        )
