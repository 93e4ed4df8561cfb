"""The Pulumi program: read the stack config, check it against AWS facts, wire the components.

``__main__.py`` calls ``program()`` under ``pulumi up``; ``aiplat plan`` calls it under mocks. Nothing here
runs at import time.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.components.addons import EksAddons, EksAddonsArgs
from infra.components.cluster import EksCluster, EksClusterArgs
from infra.components.kms import KmsKeys, KmsKeysArgs
from infra.components.network import GpuVpc, GpuVpcArgs
from infra.components.nodepool import GpuNodePool, GpuNodePoolArgs
from infra.config.crossstack import check_cross_stack
from infra.config.loader import NAMESPACE, parse_platform_config
from infra.config.schema import PlatformConfig
from infra.errors import ConfigErrors
from infra.facts import account_facts, gather_facts
from infra.lib import naming
from infra.storage import StorageWiring, wire_cluster_storage, wire_storage
from infra.validation import check_against_facts, pool_zones, vpc_zones


class ConfigRunError(ConfigErrors, pulumi.RunError):
    """ConfigErrors that ``pulumi up`` prints as plain lines (RunError), without a Python traceback."""


def read_config() -> PlatformConfig:
    raw = pulumi.Config(NAMESPACE).require_object("platform")
    try:
        cfg = parse_platform_config(raw)
    except ConfigErrors as exc:
        raise ConfigRunError(exc.errors) from None
    # Replication targets must be inference regions; an infer stack's source must replicate to it.
    cross = check_cross_stack(cfg)
    if cross:
        raise ConfigRunError(cross)
    return cfg


def program() -> None:
    cfg = read_config()
    # One explicit provider per stack: region from the config, cost tags on every taggable resource.
    # Stack files disable the default providers so that nothing slips into another region.
    provider = aws.Provider(
        "aws",
        region=cfg.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=cfg.tags.as_dict()),
    )
    facts = gather_facts(cfg, provider)
    errors = check_against_facts(cfg, facts)
    if errors:
        raise ConfigRunError(errors)

    account = account_facts(provider)
    name_prefix = cfg.stack_prefix()
    in_region = pulumi.ResourceOptions(provider=provider)

    keys = KmsKeys(
        "kms",
        KmsKeysArgs(
            name_prefix=name_prefix,
            partition=account.partition,
            account_id=account.account_id,
            region=cfg.region,
        ),
        opts=in_region,
    )

    # Buckets, registry and cross-region replication (train stacks); the replica via StackReference (infer).
    storage: StorageWiring = wire_storage(cfg, account, data_key_arn=keys.data_key_arn, opts=in_region)

    azs = vpc_zones(cfg, facts)
    cluster_name = naming.cluster_name(name_prefix)
    network = GpuVpc(
        "network",
        GpuVpcArgs(
            name_prefix=name_prefix,
            cidr=cfg.network.vpc_cidr,
            availability_zones=azs,
            region=cfg.region,
            cluster_name=cluster_name,
            nat=cfg.network.nat,
            interface_endpoints=tuple(cfg.network.interface_endpoints),
            flow_logs=cfg.network.flow_logs,
            logs_key_arn=keys.logs_key_arn,
        ),
        opts=in_region,
    )

    addon_versions = cfg.cluster.addons.by_addon_name()
    cluster = EksCluster(
        "cluster",
        EksClusterArgs(
            name_prefix=name_prefix,
            region=cfg.region,
            partition=account.partition,
            kubernetes_version=cfg.cluster.kubernetes_version,
            subnet_ids=[network.private_subnet_ids[az] for az in azs],
            endpoint_public_access_cidrs=tuple(cfg.cluster.endpoint_public_access_cidrs),
            secrets_key_arn=keys.eks_key_arn,
            logs_key_arn=keys.logs_key_arn,
            log_retention_days=cfg.cluster.log_retention_days,
            access_entries=dict(cfg.cluster.access_entries),
            addon_versions=addon_versions,
        ),
        opts=in_region,
    )

    pools: dict[str, GpuNodePool] = {}
    for pool_name, pool in cfg.node_pools.items():
        pools[pool_name] = GpuNodePool(
            f"pool-{pool_name}",
            GpuNodePoolArgs(
                pool_name=pool_name,
                name_prefix=name_prefix,
                config=pool,
                facts=facts.instances[pool.instance_type],
                cluster_name=cluster.cluster_name,
                kubernetes_version=cfg.cluster.kubernetes_version,
                node_role_arn=cluster.node_role_arn,
                cluster_security_group_id=cluster.cluster_security_group_id,
                vpc_id=network.vpc_id,
                subnet_ids=[network.private_subnet_ids[az] for az in pool_zones(cfg, facts, pool_name)],
                ebs_key_arn=keys.ebs_key_arn,
                tags=cfg.tags.as_dict(),
            ),
            # Nodes join only once networking add-ons and the node role's policies are in place.
            opts=pulumi.ResourceOptions(
                provider=provider,
                depends_on=[*cluster.addons.values(), *cluster.node_policy_attachments],
            ),
        )

    EksAddons(
        "addons",
        EksAddonsArgs(
            name_prefix=name_prefix,
            partition=account.partition,
            cluster_name=cluster.cluster_name,
            ebs_key_arn=keys.ebs_key_arn,
            addon_versions=addon_versions,
        ),
        opts=pulumi.ResourceOptions(provider=provider, depends_on=list(pools.values())),
    )

    # Pod roles (IRSA, S3 backend) or MinIO in the cluster (minio backend), once the cluster exists.
    wire_cluster_storage(
        cfg,
        storage,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        k8s_provider=cluster.k8s_provider,
        data_key_arn=keys.data_key_arn,
        opts=in_region,
        k8s_depends_on=list(pools.values()),
    )

    pulumi.export("region", cfg.region)
    pulumi.export("environment", cfg.environment.value)
    pulumi.export("role", cfg.role.value)
    pulumi.export("availabilityZones", list(azs))
    pulumi.export("vpcId", network.vpc_id)
    pulumi.export("privateSubnetIds", network.private_subnet_ids)
    pulumi.export("clusterName", cluster.cluster_name)
    pulumi.export("clusterEndpoint", cluster.endpoint)
    pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
    pulumi.export("oidcIssuer", cluster.oidc_issuer)
    pulumi.export("nodeGroups", {name: p.node_group_name for name, p in pools.items()})
    pulumi.export(
        "kmsKeyArns",
        {
            "data": keys.data_key_arn,
            "eks": keys.eks_key_arn,
            "ebs": keys.ebs_key_arn,
            "logs": keys.logs_key_arn,
        },
    )
    for key, value in storage.exports.items():
        pulumi.export(key, value)
