"""The budget hold: the script's ConfigMap, its own ServiceAccount, a ClusterRole that may get and patch the
budgeted teams' ClusterQueues only, and the CronJob (``infra/monitoring/budget/budget_hold.py``; specs in
``infra/monitoring/documents.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.core.namespaces import PART_OF
from infra.monitoring import documents as mon
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class BudgetHoldArgs:
    """Where it runs, the image and script, Prometheus' URL, the queues it may hold (team -> ClusterQueue)
    and the system pools."""

    namespace: str
    image: str
    script_name: str
    script: str
    prometheus_url: str
    queues: Mapping[str, str]
    system_pools: Sequence[str]


class BudgetHold(pulumi.ComponentResource):
    """Holds a team's ClusterQueue once it has spent its monthly budget, lifts its own holds after."""

    def __init__(self, name: str, args: BudgetHoldArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:monitoring:BudgetHold", name, None, opts)
        labels = {**PART_OF, **mon.BUDGET_HOLD_SELECTOR}

        def meta(namespaced: bool = True) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=mon.BUDGET_HOLD if namespaced else f"aiplat-{mon.BUDGET_HOLD}",
                namespace=args.namespace if namespaced else None,
                labels=labels,
            )

        script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata=meta(),
            data={args.script_name: args.script},
            opts=child_options(self, opts),
        )
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=meta(),
            automount_service_account_token=False,
            opts=child_options(self, opts),
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=meta(namespaced=False),
            rules=mon.budget_hold_rules(list(args.queues.values())),
            opts=child_options(self, opts),
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=meta(namespaced=False),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=f"aiplat-{mon.BUDGET_HOLD}"
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=mon.BUDGET_HOLD, namespace=args.namespace)
            ],
            opts=child_options(self, opts, depends_on=[role, account]),
        )
        self.cronjob = k8s.batch.v1.CronJob(
            f"{name}-cronjob",
            metadata=meta(),
            spec=mon.budget_hold_cronjob_spec(
                image=args.image,
                config_map=mon.BUDGET_HOLD,
                script_key=args.script_name,
                service_account=mon.BUDGET_HOLD,
                prometheus_url=args.prometheus_url,
                queues=args.queues,
                system_pools=args.system_pools,
            ),
            opts=child_options(self, opts, depends_on=[script, binding]),
        )
        self.register_outputs({})
