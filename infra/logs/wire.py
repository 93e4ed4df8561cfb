"""Wiring of container log collection: config + the cluster -> LogStore (before the monitoring stack, whose
Grafana takes the reader role) and LogCollector (after it: the PodMonitor needs its CRDs).

Which namespaces are collected is a parameter (``covered_namespaces``): kube-system, the stack's
workload namespaces (training, inference, monitoring), the teams' and the controllers' own
(``controller_namespaces``: cert-manager, Kueue, Kubeflow Trainer, KEDA, MinIO). A namespace added to the
stack is one more name in that list; its group, the collector's paths and both roles' policies follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core import naming
from infra.core.config import KubernetesAccess, Role, StorageBackend
from infra.core.lognames import container_log_groups_pattern
from infra.core.namespaces import EXPORTERS_NAMESPACE
from infra.keys.component.kms import KmsKeys
from infra.logs import documents as logs_docs
from infra.logs.component import LogCollector, LogCollectorArgs, LogStore, LogStoreArgs
from infra.mirror.wire import cached_chart
from infra.monitoring import documents as mon
from infra.monitoring.wire import MonitoringWiring
from infra.queueing.names import team_namespace
from infra.services.wire import (
    CERT_MANAGER_NAMESPACE,
    SYSTEM_NAMESPACE,
    ClusterServicesWiring,
    workload_namespace_specs,
)

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


@dataclass
class LogsWiring:
    """What the log wiring created: the groups (namespace -> name) and the store's roles."""

    groups: dict[str, str]
    store: LogStore
    collector: LogCollector | None = None


def covered_namespaces(ctx: StackContext, extra: Sequence[str] = ()) -> list[str]:
    """kube-system, the stack's workload namespaces, the teams' and ``extra``, once each;
    none when logs are off or the stack declares no Kubernetes objects (``kubernetes_access: skip``)."""
    cfg = ctx.cfg
    if not cfg.logs.enabled or cfg.cluster_services.kubernetes_access is KubernetesAccess.skip:
        return []
    names = [
        SYSTEM_NAMESPACE,
        *(spec.name for spec in workload_namespace_specs(ctx)),
        *team_namespaces(ctx),
        *controller_namespaces(cfg),
        *extra,
    ]
    return sorted(set(names))


def container_log_groups(ctx: StackContext, namespaces: Sequence[str]) -> list[str]:
    """What the logs key's policy must let CloudWatch Logs encrypt for ``namespaces``: their groups as one
    name pattern (``infra/core/lognames.py``), so the key policy does not grow with the teams."""
    return [container_log_groups_pattern(ctx.names.cluster)] if namespaces else []


def collector_namespace(ctx: StackContext) -> str:
    """The collector runs beside the node exporters: the one ``privileged`` namespace allows its host
    paths, and Prometheus scrapes it there (``EXPORTER_PORTS``)."""
    return EXPORTERS_NAMESPACE


def wire_log_store(
    ctx: StackContext,
    cluster: ClusterWiring,
    keys: KmsKeys,
    services: ClusterServicesWiring | None,
    namespaces: Sequence[str],
) -> LogsWiring | None:
    """The log groups of ``namespaces`` (``covered_namespaces``) and the collector's and Grafana's roles
    (None when there is nothing to collect: logs off, or no Kubernetes objects)."""
    if not namespaces or services is None:
        return None
    cfg, names, account = ctx.cfg, ctx.names, ctx.account
    groups = logs_docs.log_groups(names.cluster, namespaces)
    store = LogStore(
        "logs",
        LogStoreArgs(
            groups=groups,
            groups_arn=logs_docs.groups_arn(account.partition, cfg.region, account.account_id, names.cluster),
            retention_days=cfg.logs.retention_days,
            logs_key_arn=keys.logs_key_arn,
            protect=cfg.protected,
            oidc_provider_arn=cluster.cluster.oidc_provider_arn,
            oidc_issuer=cluster.cluster.oidc_issuer,
            collector_service_account=(collector_namespace(ctx), logs_docs.SERVICE_ACCOUNT),
            grafana_service_account=(cfg.cluster_services.monitoring_namespace, mon.GRAFANA_SERVICE_ACCOUNT),
            description_prefix=names.stack_prefix,
        ),
        opts=ctx.in_region,
    )
    return LogsWiring(groups=groups, store=store)


def pool_taint_keys(ctx: StackContext) -> list[str]:
    """Every taint key the stack's pools carry besides the GPU taint (the collector tolerates them)."""
    return sorted({key for pool in ctx.cfg.node_pools.values() for key in pool.taints})


def wire_log_collector(
    ctx: StackContext,
    cluster: ClusterWiring,
    services: ClusterServicesWiring | None,
    logs: LogsWiring | None,
    monitoring: MonitoringWiring | None,
    run_namespaces: Sequence[str],
) -> LogCollector | None:
    """Fluent Bit on every node, its PodMonitor, Grafana's data source and the run dashboard (after the
    monitoring stack's CRDs); None when logs are off or the monitoring stack is (rule ``logs-need-
    monitoring`` refuses that combination)."""
    if logs is None or services is None or monitoring is None:
        return None
    cfg, names, account = ctx.cfg, ctx.names, ctx.account
    lc = cfg.logs
    namespace = collector_namespace(ctx)
    pipeline = logs_docs.PipelineSettings(
        cluster_name=names.cluster,
        region=cfg.region,
        namespaces=sorted(logs.groups),
        fallback_namespace=namespace,
        flush_s=lc.flush_s,
    )
    values = logs_docs.fluent_bit_values(
        pipeline,
        logs_docs.CollectorValues(
            role_arn=logs.store.collector_role_arn,
            memory_limit_mib=lc.memory_limit_mib,
            taint_keys=pool_taint_keys(ctx),
        ),
    )
    training_groups = {
        group: naming.log_group_arn(account.partition, cfg.region, account.account_id, group)
        for ns, group in logs.groups.items()
        if ns in run_namespaces
    }
    opts = pulumi.ResourceOptions(
        provider=cluster.cluster.k8s_provider,
        depends_on=[*services.after_ready, monitoring.stack.crds, *logs.store.groups.values()],
    )
    collector = LogCollector(
        "logs",
        LogCollectorArgs(
            namespace=namespace,
            chart=cached_chart(ctx, lc.fluent_bit),
            values=values,
            pod_monitor=logs_docs.collector_pod_monitor_spec(namespace),
            datasource=logs_docs.datasource_provisioning(cfg.region),
            dashboard=logs_docs.run_dashboard(cluster_name=names.cluster, group_arns_by_name=training_groups)
            if training_groups
            else None,
        ),
        opts=opts,
    )
    ctx.export(
        "logs",
        {
            "logGroups": dict(sorted(logs.groups.items())),
            "retentionDays": lc.retention_days,
            "collector": {lc.fluent_bit.chart: lc.fluent_bit.version},
            "collectorRoleArn": logs.store.collector_role_arn,
            "grafanaRoleArn": logs.store.grafana_role_arn,
        },
    )
    return collector


def run_namespaces(ctx: StackContext, extra: Sequence[str] = ()) -> list[str]:
    """The namespaces a run's pods can be in: the trainer's on a train stack, and ``extra`` (the teams')."""
    own = [ctx.cfg.storage.trainer.namespace] if ctx.cfg.role is Role.train else []
    return sorted({*own, *team_namespaces(ctx), *extra})


def team_namespaces(ctx: StackContext) -> list[str]:
    """The namespaces of the teams the stack declares (infra/queueing/names.py)."""
    return [team_namespace(team, c.namespace) for team, c in ctx.cfg.teams.items()]


def controller_namespaces(cfg: PlatformConfig) -> list[str]:
    """The namespaces of the controllers the stack installs, each under the condition its wiring installs
    it on: cert-manager (``infra/services/wire.py``), Kueue (``infra/queueing/wire.py``: teams on S3),
    Kubeflow Trainer (``infra/training/wire.py``: a train stack's ``training`` with images), KEDA
    (``infra/inference/wire.py``: infer stacks) and MinIO (``infra/pod_storage/wire.py``). A test plans every
    stack and example and finds no namespace without its group (tests/infra/logs/test_plan.py)."""
    out = []
    if cfg.cluster_services.cert_manager.enabled:
        out.append(CERT_MANAGER_NAMESPACE)
    if cfg.teams and cfg.storage.backend is StorageBackend.s3:
        out.append(cfg.queueing.kueue.namespace)
    if cfg.role is Role.train and cfg.training is not None and cfg.images.builds:
        out.append(cfg.training.operator.namespace)
    if cfg.role is Role.infer and cfg.inference is not None:
        out.append(cfg.inference.keda.namespace)
    if cfg.storage.backend is StorageBackend.minio and cfg.storage.minio is not None:
        out.append(cfg.storage.minio.namespace)
    return out
