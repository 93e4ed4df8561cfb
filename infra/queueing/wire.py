"""Wiring of queueing (creates components only): Kueue with a ResourceFlavor per GPU pool, the Topology of
the EFA pools, the Cohort and the WorkloadPriorityClasses; per team of ``teams`` its namespace, IAM role,
service account, ClusterQueue and LocalQueue, and its container repositories and CI role (TeamRegistry).
Stack output: ``queueing`` (the teams' names, roles and repositories)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from infra.cluster.component.namespaces import NamespaceSpec
from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core import namespaces, naming
from infra.core.labels import priority_allowed_label
from infra.core.teams import team_repository, team_repository_prefix
from infra.core.trainer_settings import SCRAPED_METRICS_PORTS
from infra.core.trainjobs import quantity_mib
from infra.karpenter.gpu_offers import gpu_offer
from infra.mirror.wire import cached_chart
from infra.network.documents import cidr
from infra.network.zones import vpc_zones
from infra.pools.documents.nodes import GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL
from infra.queueing import documents as q
from infra.queueing.component import Kueue, KueueArgs, Team, TeamArgs, TeamRegistry, TeamRegistryArgs
from infra.queueing.names import TEAM_LABEL, team_names
from infra.queueing.rbac import member_objects
from infra.storage import documents as storage_documents
from infra.storage.config.storage import BucketPurpose
from infra.storage.wire import StorageWiring, release_roles

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

# Kueue's namespace runs the controller and, when on, KueueViz: the chart sets the restricted profile for
# all of them (non-root, no privilege escalation, capabilities dropped, RuntimeDefault seccomp:
# kubernetes-sigs/kueue v0.19.2 charts/kueue/values.yaml podSecurityContext/containerSecurityContext).
PSS = namespaces.PodSecurity.restricted


def _gpu_toleration() -> dict[str, str]:
    return {"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}


def flavor_specs(ctx: StackContext) -> dict[str, q.FlavorSpec]:
    """A ResourceFlavor per GPU pool: the pool's node label and taints (the one source: the pools'
    ``aiplat.io/pool`` label and the GPU taint of ``infra/pools/documents/nodes.py``), its capacity type, and
    what one node offers a worker (AWS facts); EFA pools get the network Topology when TAS is on."""
    cfg = ctx.cfg
    out: dict[str, q.FlavorSpec] = {}
    hugepages = cfg.training.runtime.hugepages_2mi if cfg.training is not None else "0Mi"
    for name, pool in cfg.node_pools.items():
        if not pool.gpu:
            continue
        facts = ctx.facts.instances[pool.instance_type]
        efa = (pool.efa_interfaces or facts.efa_interface_limit) if pool.efa else 0
        out[name] = q.FlavorSpec(
            name=name,
            node_labels={POOL_LABEL: name},
            tolerations=[
                _gpu_toleration(),
                *(
                    {"key": k, "operator": "Equal", "value": t.value, "effect": t.effect.value}
                    for k, t in sorted(pool.taints.items())
                    if k != GPU_TAINT_KEY
                ),
            ],
            capacity_type=pool.capacity_type.value,
            gpus_per_node=pool.gpus_per_node or facts.gpu_count,
            vcpus_per_node=facts.vcpus,
            memory_mib_per_node=facts.memory_mib,
            efa_per_node=efa,
            hugepages_mib_per_node=quantity_mib(hugepages) if efa else 0,
            topology=q.TOPOLOGY_NAME if pool.efa and cfg.queueing.topology_aware else None,
        )
    for name, kp in cfg.cluster_services.karpenter.node_pools.items():
        offer = gpu_offer(cfg, ctx.facts, kp)
        types = [ctx.facts.instances[t] for t in offer.instance_types if t in ctx.facts.instances]
        # Types differ in size: quota per GPU at the most generous type's CPU and memory per GPU.
        out.setdefault(
            name,
            q.FlavorSpec(
                name=name,
                node_labels={POOL_LABEL: name},
                tolerations=[_gpu_toleration()],
                capacity_type="-".join(sorted(c.value for c in kp.capacity_types)),
                gpus_per_node=1,
                vcpus_per_node=max((math.ceil(f.vcpus / f.gpu_count) for f in types), default=1),
                memory_mib_per_node=max((math.ceil(f.memory_mib / f.gpu_count) for f in types), default=1),
            ),
        )
    return out


def kueue_objects(cfg: PlatformConfig, flavors: dict[str, q.FlavorSpec]) -> dict[str, dict]:
    """The cluster-wide Kueue objects by key: flavors, the Topology (if a flavor names it), the Cohort and
    the WorkloadPriorityClasses. A flavor only for a pool some team has quota on: a ResourceFlavor no
    ClusterQueue names admits nothing (a pool without quota, such as dev's Karpenter ``spot-gpu``, takes
    work from outside Kueue)."""
    qc = cfg.queueing
    quoted = {pool for t in cfg.teams.values() for pool in t.quotas}
    used = {n: f for n, f in flavors.items() if n in quoted}
    objects: dict[str, dict] = {f"flavor-{n}": q.resource_flavor(f) for n, f in sorted(used.items())}
    if any(f.topology for f in used.values()):
        objects["topology"] = q.topology()
    objects["cohort"] = q.cohort(qc.cohort.name)
    for name, pc in sorted(qc.priority_classes.items()):
        objects[f"priority-{name}"] = q.priority_class(name, pc.value, pc.description)
    return objects


def team_quotas(cfg: PlatformConfig, team: str, flavors: dict[str, q.FlavorSpec]) -> list[q.TeamQuota]:
    """The team's quotas in config order (the order Kueue tries the flavors in)."""
    return [
        q.TeamQuota(
            flavor=flavors[pool],
            gpus=quota.gpus,
            borrowing_limit=quota.borrowing_limit,
            lending_limit=quota.lending_limit,
        )
        for pool, quota in cfg.teams[team].quotas.items()
    ]


def team_documents(cfg: PlatformConfig, team: str, flavors: dict[str, q.FlavorSpec]) -> tuple[dict, dict]:
    """(ClusterQueue, LocalQueue) of ``team``."""
    names = team_names(team, cfg.teams[team].namespace)
    cohort = cfg.queueing.cohort
    return (
        q.cluster_queue(
            names,
            team_quotas(cfg, team, flavors),
            cohort_name=cohort.name,
            reclaim_within_cohort=cohort.reclaim_within_cohort.value,
            within_cluster_queue=cohort.within_cluster_queue.value,
        ),
        q.local_queue(names),
    )


def team_priority_labels(cfg: PlatformConfig, team: str) -> dict[str, str]:
    """The team namespace's labels naming the priority classes its jobs may use (infra/admission)."""
    allowed = cfg.teams[team].allowed_priorities(cfg.queueing.default_priority)
    return {priority_allowed_label(pc): "true" for pc in sorted(allowed)}


def kueue_chart_values(cfg: PlatformConfig) -> dict:
    """The Kueue chart's values from ``queueing``."""
    wait = cfg.queueing.wait_for_pods_ready
    config = q.manager_config(
        managed_namespace_label=TEAM_LABEL,
        wait_timeout=wait.timeout if wait.enabled else None,
        block_admission=wait.block_admission,
        backoff_base_s=wait.backoff.base_delay_s,
        backoff_max_s=wait.backoff.max_delay_s,
        backoff_limit=wait.backoff.limit_count,
    )
    return q.kueue_values(config=config, kueueviz=cfg.queueing.kueueviz.enabled)


def team_role_arn(ctx: StackContext, team: str) -> str:
    """The ARN of the team's pod role (its IRSA role), from its name: policies name it before it exists."""
    return naming.iam_role_arn(
        ctx.account.partition, ctx.account.account_id, ctx.names.role_name(f"team-{team}")
    )


def team_ci_role_name(ctx: StackContext, team: str) -> str:
    """The team's CI role (pushes to the team's repositories): account-global, so it carries the region."""
    return ctx.names.role_name(f"team-{team}-ci")


def team_registry_args(
    ctx: StackContext,
    team: str,
    storage: StorageWiring,
    data_key_arn: pulumi.Input[str],
) -> TeamRegistryArgs:
    """The team's repositories, their policies and its CI role from ``teams.<team>.registry``."""
    cfg, acct = ctx.cfg, ctx.account
    reg = cfg.teams[team].registry
    namespace = ctx.names.env_prefix
    full = [team_repository(namespace, team, r) for r in reg.repositories]
    arns = [f"arn:{acct.partition}:ecr:{cfg.region}:{acct.account_id}:repository/{r}" for r in full]
    ci_name = team_ci_role_name(ctx, team) if reg.ci_assumed_by else None
    pushers = list(reg.pushers)
    if ci_name is not None:
        pushers.append(naming.iam_role_arn(acct.partition, acct.account_id, ci_name))
    _publisher, glass, deployer = release_roles(ctx)
    admins = [glass, deployer] if deployer else []
    lifecycle = storage_documents.ecr_lifecycle_policy(
        untagged_days=cfg.registry.untagged_expire_days, keep_tagged=cfg.registry.keep_images
    )
    registry = storage.registry
    replicas = storage.replication.replica_key_arns if storage.replication else {}
    prefix = team_repository_prefix(namespace, team)
    return TeamRegistryArgs(
        team=team,
        prefix=prefix,
        repositories=full,
        repository_policy=json.dumps(
            q.team_repository_policy(pushers=pushers, team_role_arn=team_role_arn(ctx, team), admins=admins)
        ),
        lifecycle_policy=json.dumps(lifecycle),
        kms_key_arn=data_key_arn,
        ci_role_name=ci_name,
        ci_role_description=f"{ctx.names.stack_prefix}: CI of team {team}, pushes to its repositories",
        ci_trust_policy=json.dumps(q.team_ci_trust_policy(reg.ci_assumed_by)) if ci_name else None,
        ci_policy=json.dumps(q.team_ci_policy(repository_arns=arns)) if ci_name else None,
        replica_keys=replicas,
        replica_policy=json.dumps(q.team_replica_repository_policy(admins=admins)) if replicas else None,
        template_role_arn=registry.template_role_arn if registry is not None else None,
        protect=cfg.protected,
    )


@dataclass
class QueueingWiring:
    kueue: Kueue
    teams: dict[str, Team]
    registries: dict[str, TeamRegistry]

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a queued TrainJob waits for: Kueue and every team's namespace and queues."""
        return [self.kueue, *self.teams.values()]


def wire_queueing(
    ctx: StackContext,
    cluster: ClusterWiring,
    storage: StorageWiring,
    *,
    data_key_arn: pulumi.Input[str],
    k8s_depends_on: Sequence[pulumi.Resource] = (),
) -> QueueingWiring | None:
    """Kueue and the teams (train stacks with ``teams``, S3 backend, Kubernetes access). ``k8s_depends_on``:
    the system pools and the cluster services."""
    cfg = ctx.cfg
    if not cfg.teams or storage.buckets is None:
        return None
    k8s_provider = cluster.cluster.k8s_provider
    flavors = flavor_specs(ctx)
    qc = cfg.queueing
    kueue = Kueue(
        "kueue",
        KueueArgs(
            chart=cached_chart(ctx, qc.kueue),
            namespace=qc.kueue.namespace,
            namespace_labels=namespaces.pss_labels(PSS, cfg.cluster.kubernetes_version),
            values=kueue_chart_values(cfg),
            objects=kueue_objects(cfg, flavors),
        ),
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=list(k8s_depends_on)),
    )
    arns = storage.buckets.bucket_arns
    teams: dict[str, Team] = {}
    registries: dict[str, TeamRegistry] = {}
    exported: dict[str, dict] = {}
    for team in cfg.teams:
        names = team_names(team, cfg.teams[team].namespace)
        ns = q.team_namespace(
            names,
            metrics_ports=SCRAPED_METRICS_PORTS,
            https_egress=namespaces.https_egress_cidrs(
                endpoint_cidrs=cidr.endpoint_cidrs(cfg.network.vpc_cidr, vpc_zones(cfg, ctx.facts)),
                s3_cidrs=ctx.facts.s3_prefix_list_cidrs,
                allowed=cfg.network.workload_egress_cidrs,
            ),
        )
        cluster_queue, local_queue = team_documents(cfg, team, flavors)
        policy = pulumi.Output.all(
            arns[BucketPurpose.datasets.value], arns[BucketPurpose.checkpoints.value], data_key_arn
        ).apply(
            lambda v, team=team: json.dumps(
                q.team_policy(
                    team=team,
                    datasets_arn=v[0],
                    checkpoints_arn=v[1],
                    kms_key_arns=[v[2]],
                    account_id=ctx.account.account_id,
                    region=cfg.region,
                )
            )
        )
        teams[team] = Team(
            f"team-{team}",
            TeamArgs(
                team=team,
                namespace=NamespaceSpec(
                    name=ns.name,
                    labels={
                        **ns.labels,
                        **namespaces.pss_labels(ns.pod_security, cfg.cluster.kubernetes_version),
                        **team_priority_labels(cfg, team),
                    },
                    network_policies=namespaces.network_policies(
                        ns, monitoring_namespace=cfg.cluster_services.monitoring_namespace
                    ),
                ),
                service_account=names.service_account,
                role_name=ctx.names.role_name(f"team-{team}"),
                role_description=f"{ctx.names.stack_prefix}: team {team}",
                policy=policy,
                oidc_provider_arn=cluster.cluster.oidc_provider_arn,
                oidc_issuer=cluster.cluster.oidc_issuer,
                cluster_queue=cluster_queue,
                local_queue=local_queue,
                depends_on_kueue=[kueue],
                cluster_name=cluster.cluster.cluster_name,
                members=dict(cfg.teams[team].members),
                member_group=names.member_group,
                member_rbac=member_objects(names),
                quotas=[q.critical_priority_quota(names)],
            ),
            opts=pulumi.ResourceOptions(
                providers=[ctx.provider, k8s_provider], depends_on=list(k8s_depends_on)
            ),
        )
        exported[team] = {
            "namespace": names.namespace,
            "localQueue": names.local_queue,
            "clusterQueue": names.cluster_queue,
            "serviceAccount": names.service_account,
            "memberGroup": names.member_group,
            "roleArn": teams[team].role_arn,
        }
        if cfg.teams[team].registry.repositories and storage.registry is not None:
            registries[team] = TeamRegistry(
                f"team-{team}-registry",
                team_registry_args(ctx, team, storage, data_key_arn),
                opts=pulumi.ResourceOptions(provider=ctx.provider, depends_on=[storage.registry]),
            )
            exported[team]["repositories"] = registries[team].repository_urls
            if registries[team].ci_role_arn is not None:
                exported[team]["ciRoleArn"] = registries[team].ci_role_arn
    ctx.export("queueing", {"kueue": qc.kueue.version, "teams": exported})
    return QueueingWiring(kueue=kueue, teams=teams, registries=registries)
