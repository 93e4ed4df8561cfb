"""Wiring of the stack's KMS keys (data, EKS secrets, EBS, logs) and what guards them (KeyGuard).

The key policies name the key administrator and break-glass roles, the log groups and the trail by ARN;
all of them follow from names decided here (``infra/core/naming.py``), so the keys do not wait for the
resources they refer to (a key policy condition does not need its principal to exist).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infra.context import StackContext
from infra.core import naming
from infra.core.config import Role, StorageBackend, TrailMode
from infra.fsx import constraints as fsx_facts
from infra.keys.component.keyguard import EventAlert, KeyGuard, KeyGuardArgs
from infra.keys.component.kms import KmsKeys, KmsKeysArgs
from infra.keys.documents.kms_policy import KeyAccess, KeyPurpose


def key_access(ctx: StackContext, region: str | None = None, log_groups: Sequence[str] = ()) -> KeyAccess:
    """Who may administer, delete and use the stack's keys (``region``: another region's replica keys;
    ``log_groups``: more log groups the logs key encrypts, besides the ones named here)."""
    cfg, names, account = ctx.cfg, ctx.names, ctx.account
    part, acct = account.partition, account.account_id
    home = region is None or region == cfg.region
    groups = [naming.control_plane_log_group(names.cluster), naming.flow_log_group(names.stack_prefix)]
    if cfg.security.session_manager:
        groups.append(naming.session_log_group(names.stack_prefix))
    if cfg.cluster_services.fsx.enabled:
        groups.append(naming.fsx_log_group(names.stack_prefix))
    # the container log groups (infra/logs), named by the caller: the namespaces collected are its fact
    groups.extend(log_groups)
    return KeyAccess(
        partition=part,
        account_id=acct,
        region=region or cfg.region,
        key_admin_role_arn=naming.iam_role_arn(part, acct, names.role_name("key-admin")),
        break_glass_role_arn=naming.iam_role_arn(part, acct, names.role_name("break-glass")),
        deployer_role_arn=naming.iam_role_arn(part, acct, cfg.security.account.deployer_role)
        if cfg.security.account.deployer_role
        else None,
        protect=cfg.protected,
        log_group_arns=tuple(naming.log_group_arn(part, cfg.region, acct, g) for g in groups) if home else (),
        trail_arn=naming.trail_arn(part, cfg.region, acct, naming.trail_name(names.global_prefix))
        if home and cfg.security.audit.trail is TrailMode.create
        else None,
        events_publish=home,
        fsx_linked_bucket_arns=fsx_linked_buckets(ctx) if home else (),
    )


def fsx_linked_buckets(ctx: StackContext) -> tuple[str, ...]:
    """The datasets bucket, when an FSx for Lustre file system links it (its objects are under the data key,
    which the file system's service-linked role must then use through S3)."""
    cfg = ctx.cfg
    fsx_on = cfg.cluster_services.fsx.enabled and cfg.role is Role.train
    if not fsx_on or cfg.storage.backend is not StorageBackend.s3:
        return ()
    return (f"arn:{ctx.account.partition}:s3:::{fsx_facts.linked_bucket(cfg)}",)


def replica_regions(ctx: StackContext) -> list[str]:
    """Regions where this stack owns keys besides its own (the artifact replicas of a train stack)."""
    st = ctx.cfg.storage
    if ctx.cfg.role is Role.train and st.backend is StorageBackend.s3:
        return sorted(st.replicate_to)
    return []


@dataclass(frozen=True)
class KeyWiring:
    """The stack's keys and the roles that guard them."""

    keys: KmsKeys
    guard: KeyGuard


def wire_keys(
    ctx: StackContext, log_groups: Sequence[str] = (), alerts: Sequence[EventAlert] = ()
) -> KeyWiring:
    """The stack's keys and their guard; ``log_groups``: the container log groups the logs key encrypts
    (``infra/logs/wire.py`` ``container_log_groups``); ``alerts``: other capabilities' alerts on the guard's
    topic (``infra/audit/wire.py`` ``audit_alerts``)."""
    cfg, names, account = ctx.cfg, ctx.names, ctx.account
    keys = KmsKeys(
        "kms",
        KmsKeysArgs(
            stack_prefix=names.stack_prefix,
            aliases={p.value: naming.kms_alias(names.stack_prefix, p.value) for p in KeyPurpose},
            keyset=names.global_prefix,
            access=key_access(ctx, log_groups=log_groups),
        ),
        opts=ctx.in_region,
    )
    guard = KeyGuard(
        "keyguard",
        KeyGuardArgs(
            key_admin_role_name=names.role_name("key-admin"),
            break_glass_role_name=names.role_name("break-glass"),
            keyset=names.global_prefix,
            account_id=account.account_id,
            partition=account.partition,
            region=cfg.region,
            cluster_arn=naming.cluster_arn(account.partition, cfg.region, account.account_id, names.cluster),
            rule_name=naming.event_rule_name(names.stack_prefix, "key-events"),
            break_glass_rule_name=naming.event_rule_name(
                names.global_prefix, "break-glass"
            ),  # also in us-east-1
            topic_name=naming.topic_name(names.stack_prefix, "key-alerts"),
            topic_key_arn=keys.logs_key_arn,
            forward_regions=replica_regions(ctx),
            alert_emails=tuple(cfg.security.alert_emails),
            key_admin_principals=tuple(cfg.security.key_admin_principals),
            break_glass_principals=tuple(cfg.security.break_glass_principals),
            alerts=tuple(alerts),
        ),
        opts=ctx.in_region,
    )
    ctx.export(
        "kmsKeyArns",
        {
            "data": keys.data_key_arn,
            "eks": keys.eks_key_arn,
            "ebs": keys.ebs_key_arn,
            "logs": keys.logs_key_arn,
        },
    )
    ctx.export("keyRoles", {"keyAdmin": guard.key_admin_role_arn, "breakGlass": guard.break_glass_role_arn})
    ctx.export("keyAlertsTopic", guard.topic_arn)
    return KeyWiring(keys=keys, guard=guard)
