"""Wiring of the monitoring stack: config + the cluster services -> MonitoringStack and the exporters.

Runs after the cluster services (the monitoring namespace, its Pod Security labels and NetworkPolicies, the
default StorageClass come from there) and waits for the same system pools. Which rules, dashboards and
PodMonitors a stack gets follows its role and pools:

| | rules | dashboards | PodMonitors |
|---|---|---|---|
| every stack | gpu, node | gpu | |
| a pool with EFA | efa | efa | efa-exporter |
| train | training, waste, cost, teams (generated) | training | aiplat-trainer; kueue (ServiceMonitor) |
| infer | inference | inference | aiplat-inference (inference namespace) |
| `logs.enabled` | logs | (run: infra/logs) | (fluent-bit: infra/logs) |
| train, `opencost.enabled` | | (cost: infra/opencost) | (OpenCost's ServiceMonitor: infra/opencost) |

A train stack whose teams set ``budget.on_exhausted: hold`` also gets the budget hold (a CronJob that holds
the ClusterQueue of a team over its monthly budget, ``infra/monitoring/budget/budget_hold.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core.config import Role
from infra.core.namespaces import EXPORTERS_NAMESPACE
from infra.mirror.wire import cached_chart, cached_image
from infra.monitoring import documents as mon
from infra.monitoring.assets import MonitoringAssets
from infra.monitoring.component.budget import BudgetHold, BudgetHoldArgs
from infra.monitoring.component.exporters import DcgmExporter, EfaExporter, EfaExporterArgs
from infra.monitoring.component.stack import MonitoringStack, MonitoringStackArgs
from infra.queueing.config import BudgetAction
from infra.queueing.names import cluster_queue, team_namespace
from infra.resources.helm import ChartArgs
from infra.resources.options import inherited_depends_on
from infra.services.wire import ClusterServicesWiring, gpu_pools, has_efa, system_pools

# The inference server's metrics port name (cluster-services' inference namespace lets the monitoring
# namespace scrape the container port named "metrics", infra/core/namespaces.py).
INFERENCE_METRICS_PORT = "metrics"


@dataclass
class MonitoringWiring:
    """What the monitoring wiring created (tests and later wiring read it)."""

    stack: MonitoringStack
    dcgm: DcgmExporter | None
    efa: EfaExporter | None
    budget_hold: BudgetHold | None = None


def monitoring_parts(ctx: StackContext) -> tuple[list[str], list[str]]:
    """(rule files, dashboards) this stack deploys (see the module's table)."""
    efa = has_efa(ctx)
    workload = ["training", "waste", "cost"] if ctx.cfg.role is Role.train else ["inference"]
    logs = ["logs"] if ctx.cfg.logs.enabled else []
    rules = ["gpu", "node", *(["efa"] if efa else []), *workload, *logs]
    dashboards = ["gpu", *(["efa"] if efa else []), workload[0]]
    return rules, dashboards


def wire_monitoring(
    ctx: StackContext,
    cluster: ClusterWiring,
    services: ClusterServicesWiring | None,
    assets: MonitoringAssets,
    grafana_role_arn: pulumi.Input[str] | None = None,
) -> MonitoringWiring | None:
    """Create the monitoring stack (None when disabled or when the cluster services are skipped); file
    contents and receiver URLs come in ``assets`` (``infra/io/monitoring.py``); ``grafana_role_arn``: the
    role of Grafana's service account (its CloudWatch Logs data source, ``infra/logs``)."""
    cfg, names = ctx.cfg, ctx.names
    mc = cfg.monitoring
    if not mc.enabled or services is None:
        return None
    namespace = cfg.cluster_services.monitoring_namespace
    eks = cluster.cluster
    system = system_pools(ctx)
    opts = pulumi.ResourceOptions(provider=eks.k8s_provider, depends_on=services.after_ready)
    am = mc.alertmanager
    receivers = [
        mon.Receiver(
            name=name,
            kind=r.kind.value,
            severities=[s.value for s in r.severities],
            channel=r.channel,
            send_resolved=r.send_resolved,
        )
        for name, r in sorted(am.receivers.items())
    ]
    values = mon.kube_prometheus_stack_values(
        mon.StackValues(
            cluster_name=names.cluster,
            system_pools=system,
            namespace=namespace,
            retention=mc.prometheus.retention,
            retention_size=mc.prometheus.retention_size,
            storage_class=mc.prometheus.storage_class or cfg.cluster_services.storage_class.name,
            prometheus_storage=mc.prometheus.storage_size,
            prometheus_replicas=mc.prometheus.replicas,
            scrape_interval=mc.prometheus.scrape_interval,
            alertmanager_storage=am.storage_size,
            alertmanager_config=mon.alertmanager_config(
                receivers,
                group_wait=am.group_wait,
                group_interval=am.group_interval,
                repeat_interval=am.repeat_interval,
                team_receivers={t: c.receiver for t, c in cfg.teams.items() if c.receiver},
            ),
            grafana_role_arn=grafana_role_arn,
        )
    )
    rule_names, dashboard_names = monitoring_parts(ctx)
    rule_files = {name: assets.rules[name] for name in rule_names}
    if cfg.role is Role.train:
        rule_files[mon.TEAMS_RULES] = teams_rule_file(ctx)
        rule_names = [*rule_names, mon.TEAMS_RULES]
    alert_for = {"waste": {"JobGpusIdle": mc.idle_gpus_for}}
    pod_monitors = (
        {
            mon.TRAINER_JOB: mon.trainer_pod_monitor_spec(
                cfg.storage.trainer.namespace, *(team_namespace(t, c.namespace) for t, c in cfg.teams.items())
            )
        }
        if cfg.role is Role.train
        else {
            mon.INFERENCE_JOB: mon.inference_pod_monitor_spec(
                cfg.storage.inference.namespace, INFERENCE_METRICS_PORT
            )
        }
    )
    stack = MonitoringStack(
        "monitoring",
        MonitoringStackArgs(
            namespace=namespace,
            crds_chart=cached_chart(ctx, mc.operator_crds),
            stack_chart=cached_chart(ctx, mc.kube_prometheus_stack),
            values=values,
            rules={
                name: mon.prometheus_rule_spec(rule, mc.docs_url, alert_for.get(name))
                for name, rule in rule_files.items()
            },
            dashboards={name: assets.dashboards[name] for name in dashboard_names},
            pod_monitors=pod_monitors,
            # Kueue runs on train stacks with teams (infra/queueing); its metrics feed the waste rules
            service_monitors={
                mon.KUEUE_JOB: mon.kueue_service_monitor_spec(
                    cfg.queueing.kueue.namespace, cfg.queueing.kueue.chart
                )
            }
            if cfg.role is Role.train and cfg.teams
            else {},
            receiver_urls={name: assets.receiver_urls[name] for name in sorted(am.receivers)},
        ),
        opts=opts,
    )
    # The exporters' ServiceMonitor / PodMonitor need the CRDs.
    after_crds = pulumi.ResourceOptions(
        provider=eks.k8s_provider, depends_on=[*inherited_depends_on(opts), stack.crds]
    )
    gpus = gpu_pools(ctx)
    dcgm = None
    if gpus:
        dcgm = DcgmExporter(
            "dcgm-exporter",
            ChartArgs(
                chart=cached_chart(ctx, mc.dcgm_exporter),
                release_name=mon.DCGM_RELEASE,
                namespace=EXPORTERS_NAMESPACE,
                values=mon.dcgm_exporter_values(gpu_pools=gpus, counters_csv=assets.dcgm_counters),
            ),
            opts=after_crds,
        )
    efa = None
    if has_efa(ctx):
        efa = EfaExporter(
            "efa-exporter",
            EfaExporterArgs(
                namespace=EXPORTERS_NAMESPACE,
                image=cached_image(ctx, mc.efa_exporter_image),
                script_name=assets.efa_exporter_script[0],
                script=assets.efa_exporter_script[1],
            ),
            opts=after_crds,
        )
    budget_hold = None
    held = {
        t: cluster_queue(t)
        for t, c in sorted(cfg.teams.items())
        if c.budget and c.budget.on_exhausted is BudgetAction.hold
    }
    if held:
        budget_hold = BudgetHold(
            "budget-hold",
            BudgetHoldArgs(
                namespace=namespace,
                image=cached_image(ctx, mc.budget_hold_image),
                script_name=assets.budget_hold_script[0],
                script=assets.budget_hold_script[1],
                prometheus_url=f"http://{mon.PROMETHEUS_SERVICE}.{namespace}:{mon.PROMETHEUS_PORT}",
                queues=held,
                system_pools=system,
            ),
            opts=opts,
        )
    ctx.export(
        "monitoring",
        {
            "namespace": namespace,
            "grafana": f"kubectl -n {namespace} port-forward svc/{mon.KPS_RELEASE}-grafana 3000:80",
            "grafanaAdminSecret": mon.GRAFANA_ADMIN_SECRET,
            "charts": {
                mc.kube_prometheus_stack.chart: mc.kube_prometheus_stack.version,
                mc.operator_crds.chart: mc.operator_crds.version,
                **({mc.dcgm_exporter.chart: mc.dcgm_exporter.version} if dcgm else {}),
            },
            "rules": rule_names,
            "dashboards": dashboard_names,
            "receivers": sorted(am.receivers),
            **({"budgetHold": sorted(held.values())} if held else {}),
        },
    )
    return MonitoringWiring(stack=stack, dcgm=dcgm, efa=efa, budget_hold=budget_hold)


def teams_rule_file(ctx: StackContext) -> dict:
    """The generated rule file ``teams`` (``mon.team_rules``) from the stack's teams and GPU pools."""
    cfg = ctx.cfg
    teams = [
        mon.TeamFacts(
            team=t,
            namespace=team_namespace(t, c.namespace),
            budget_usd=c.budget.monthly_usd if c.budget else None,
            alert_at=c.budget.alert_at if c.budget else (),
            on_exhausted=c.budget.on_exhausted.value if c.budget else None,
        )
        for t, c in cfg.teams.items()
    ]
    pools: dict[str, tuple[str, bool]] = {
        name: (p.capacity_type.value, p.capacity_type.reserved) for name, p in cfg.node_pools.items() if p.gpu
    }
    for name, k in cfg.cluster_services.karpenter.node_pools.items():
        pools[name] = ("+".join(sorted(c.value for c in k.capacity_types)), False)
    return mon.team_rules(teams, pools)
