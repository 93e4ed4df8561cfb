"""Wiring of the EKS cluster, its node pools and the add-ons that need nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.cluster.component.addons import EksAddons, EksAddonsArgs
from infra.cluster.component.eks import AccessEntry, EksCluster, EksClusterArgs
from infra.cluster.config import AccessPolicy
from infra.cluster.rules import control_plane_log_retention
from infra.context import StackContext
from infra.core import naming
from infra.core.facts import InstanceFacts
from infra.core.namespaces import VPC_CNI_NETWORK_POLICY
from infra.keys.component.kms import KmsKeys
from infra.network.component import GpuVpc
from infra.network.zones import control_plane_zones, pool_zones
from infra.pools.component.nodepool import CapacityReservation, GpuNodePool, GpuNodePoolArgs, PlacementGroup
from infra.pools.component.sessions import NodeSessions, NodeSessionsArgs
from infra.pools.config import CapacityType, NodePoolConfig
from infra.pools.documents import efa, nodes

BREAK_GLASS_ENTRY = "break-glass"


@dataclass
class ClusterWiring:
    """What the cluster wiring created, for the wiring that needs the cluster (pod roles, Kubernetes)."""

    cluster: EksCluster
    pools: dict[str, GpuNodePool]
    addons: EksAddons


def pool_args(
    ctx: StackContext,
    pool_name: str,
    pool: NodePoolConfig,
    facts: InstanceFacts,
    cluster: EksCluster,
    network: GpuVpc,
    ebs_key_arn: pulumi.Input[str],
) -> GpuNodePoolArgs:
    """The node pool's arguments: names, AMI, capacity, EFA layout, placement, from config and facts."""
    prefix = ctx.names.stack_prefix
    placement = None
    if pool.placement_group_wanted:
        reservation = pool.capacity_reservation
        placement = (
            PlacementGroup(name=reservation.placement_group, create=False)
            if reservation is not None and reservation.placement_group
            else PlacementGroup(name=naming.placement_group_name(prefix, pool_name), create=True)
        )
    reservation = (
        CapacityReservation(
            reservation_id=pool.capacity_reservation.id,
            capacity_block=pool.capacity_type is CapacityType.capacity_block,
        )
        if pool.capacity_reservation is not None
        else None
    )
    return GpuNodePoolArgs(
        pool_name=pool_name,
        node_group_name=naming.nodegroup_name(prefix, pool_name),
        launch_template_name=naming.launch_template_name(prefix, pool_name),
        instance_type=pool.instance_type,
        ami_type=nodes.ami_type(facts, pool.gpu),
        capacity_type=nodes.CAPACITY_TYPES[pool.capacity_type],
        min_size=pool.min_size,
        desired_size=pool.desired_size,
        max_size=pool.max_size,
        labels=nodes.pool_labels(pool_name, pool.labels, pool.efa),
        taints=nodes.pool_taints(pool.gpu, {k: (v.value, v.effect.value) for k, v in pool.taints.items()}),
        efa_interfaces=efa.efa_layout(facts, pool.efa_interfaces) if pool.efa else (),
        placement_group=placement,
        capacity_reservation=reservation,
        root_volume_gib=pool.root_volume_gib,
        user_data=nodes.node_user_data(facts, pool.gpu),
        cluster_name=cluster.cluster_name,
        kubernetes_version=ctx.cfg.cluster.kubernetes_version,
        node_role_arn=cluster.node_role_arn,
        cluster_security_group_id=cluster.cluster_security_group_id,
        vpc_id=network.vpc_id,
        subnet_ids=[network.private_subnet_ids[az] for az in pool_zones(ctx.cfg, ctx.facts, pool_name)],
        ebs_key_arn=ebs_key_arn,
        tags=ctx.cfg.tags.as_dict(),
    )


def wire_cluster(
    ctx: StackContext,
    keys: KmsKeys,
    network: GpuVpc,
    *,
    break_glass_role_arn: pulumi.Input[str] | None = None,
) -> ClusterWiring:
    """The EKS cluster, its pools and access. ``break_glass_role_arn``: the break-glass role's ARN as an
    output of the role (KeyGuard), so its access entry waits for the role (EKS refuses an access entry
    for a principal that does not exist yet); without it, the ARN from the role's name."""
    cfg, names = ctx.cfg, ctx.names
    glass = break_glass_role_arn or naming.iam_role_arn(
        ctx.account.partition, ctx.account.account_id, names.role_name("break-glass")
    )
    # Every add-on has a build: the rule 'addon-versions-known' refused the config otherwise.
    addon_versions = {name: str(v) for name, v in cfg.cluster.addon_versions().items()}
    cluster = EksCluster(
        "cluster",
        EksClusterArgs(
            cluster_name=names.cluster,
            cluster_role_name=names.role_name("eks-cluster"),
            node_role_name=names.role_name("eks-node"),
            log_group_name=naming.control_plane_log_group(names.cluster),
            region=cfg.region,
            partition=ctx.account.partition,
            kubernetes_version=cfg.cluster.kubernetes_version,
            # Only zones where EKS accepts control-plane subnets (rule 'control-plane-zones').
            subnet_ids=[network.private_subnet_ids[az] for az in control_plane_zones(cfg, ctx.facts)],
            endpoint_public_access_cidrs=tuple(cfg.cluster.endpoint_public_access_cidrs),
            secrets_key_arn=keys.eks_key_arn,
            logs_key_arn=keys.logs_key_arn,
            log_retention_days=control_plane_log_retention(cfg),
            access_entries={
                **{
                    name: AccessEntry(
                        principal_arn=e.arn(ctx.account.partition, ctx.account.account_id),
                        policy=e.policy.value,
                        namespaces=tuple(e.namespaces),
                    )
                    for name, e in cfg.cluster.access_entries.items()
                },
                # The break-glass role (KeyGuard) can always reach the cluster.
                BREAK_GLASS_ENTRY: AccessEntry(principal_arn=glass, policy=AccessPolicy.cluster_admin.value),
            },
            addon_versions=addon_versions,
            # NetworkPolicy enforcement for the workload namespaces' policies (cluster services).
            addon_configuration={"vpc-cni": VPC_CNI_NETWORK_POLICY},
            support_type=cfg.cluster.support_type.value,
            deletion_protection=cfg.cluster_deletion_protection,
        ),
        opts=ctx.in_region,
    )

    if cfg.security.session_manager:
        NodeSessions(
            "sessions",
            NodeSessionsArgs(
                node_role_name=cluster.node_role_name,
                log_group_name=naming.session_log_group(names.stack_prefix),
                document_name=naming.session_document_name(names.stack_prefix),
                logs_key_arn=keys.logs_key_arn,
                retention_days=cfg.security.session_log_retention_days,
            ),
            opts=ctx.in_region,
        )

    pools: dict[str, GpuNodePool] = {}
    for pool_name, pool in cfg.node_pools.items():
        pools[pool_name] = GpuNodePool(
            f"pool-{pool_name}",
            pool_args(
                ctx,
                pool_name,
                pool,
                ctx.facts.instances[pool.instance_type],
                cluster,
                network,
                keys.ebs_key_arn,
            ),
            # Nodes join only once networking add-ons and the node role's policies are in place.
            opts=pulumi.ResourceOptions(
                provider=ctx.provider,
                depends_on=[*cluster.addons.values(), *cluster.node_policy_attachments],
            ),
        )

    addons = EksAddons(
        "addons",
        EksAddonsArgs(
            ebs_csi_role_name=names.role_name("ebs-csi"),
            partition=ctx.account.partition,
            account_id=ctx.account.account_id,
            region=cfg.region,
            cluster_name=cluster.cluster_name,
            ebs_key_arn=keys.ebs_key_arn,
            addon_versions=addon_versions,
        ),
        # Only the pools that run system pods: a GPU pool stuck on InsufficientInstanceCapacity (common for
        # p5) must not keep CoreDNS and the EBS CSI driver from the system pool (rule 'system-pool').
        opts=pulumi.ResourceOptions(
            provider=ctx.provider,
            depends_on=[p for n, p in pools.items() if cfg.node_pools[n].runs_system_pods],
        ),
    )

    ctx.export("clusterName", cluster.cluster_name)
    ctx.export("clusterEndpoint", cluster.endpoint)
    ctx.export("oidcProviderArn", cluster.oidc_provider_arn)
    ctx.export("oidcIssuer", cluster.oidc_issuer)
    ctx.export("nodeGroups", {name: p.node_group_name for name, p in pools.items()})
    return ClusterWiring(cluster=cluster, pools=pools, addons=addons)
