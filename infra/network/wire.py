"""Wiring of the stack's VPC: zones from the config and the region's facts, NAT layout, flow logs."""

from __future__ import annotations

import json

import pulumi

from infra.context import StackContext
from infra.core import naming
from infra.keys.component.kms import KmsKeys
from infra.network.component import DnsFirewall, FlowLogs, GpuVpc, GpuVpcArgs
from infra.network.config import DnsFirewallMode, NatStrategy
from infra.network.dns import stack_firewall_domains
from infra.network.documents import iam
from infra.network.zones import vpc_zones
from infra.storage.config.storage import BucketPurpose
from infra.storage.wire import StorageWiring, data_bucket_names, trail_bucket_name


def nat_zones(strategy: NatStrategy, zones: tuple[str, ...]) -> tuple[str, ...]:
    """The zones that get a NAT gateway under ``strategy``."""
    return {NatStrategy.none: (), NatStrategy.single: zones[:1], NatStrategy.one_per_az: zones}[strategy]


def endpoint_buckets(ctx: StackContext, storage: StorageWiring | None) -> pulumi.Input[list[str]]:
    """The buckets pods and nodes may reach through the S3 gateway endpoint: the stack's own (data, access
    logs, trail), an infer stack's replica, and ``security.s3_endpoint_extra_buckets``."""
    names: list[pulumi.Input[str]] = list(ctx.cfg.security.s3_endpoint_extra_buckets)
    trail = trail_bucket_name(ctx)
    if trail:
        names.append(trail)
    own = data_bucket_names(
        ctx
    )  # by name: the buckets are made after the VPC (their policies name its endpoint)
    if own:
        names += [own[p] for p in sorted(own)]
        names.append(ctx.cfg.bucket_name(BucketPurpose.access_logs))
    if storage is not None and storage.replica is not None:
        names.append(storage.replica.apply(lambda r: r["bucket"]))
    return pulumi.Output.all(*names)


def wire_network(ctx: StackContext, keys: KmsKeys, storage: StorageWiring | None = None) -> GpuVpc:
    cfg, names = ctx.cfg, ctx.names
    partition = ctx.account.partition
    endpoint_policy = pulumi.Output.from_input(endpoint_buckets(ctx, storage)).apply(
        lambda buckets: json.dumps(
            iam.s3_endpoint_policy(bucket_names=buckets, region=cfg.region, partition=partition)
        )
    )
    zones = vpc_zones(cfg, ctx.facts)
    flow = cfg.network.flow_logs
    fw = cfg.network.dns_firewall
    network = GpuVpc(
        "network",
        GpuVpcArgs(
            name_tag_prefix=names.stack_prefix,
            cidr=cfg.network.vpc_cidr,
            availability_zones=zones,
            region=cfg.region,
            cluster_name=names.cluster,
            nat_zones=nat_zones(cfg.network.nat, zones),
            interface_endpoints=tuple(cfg.network.interface_endpoints),
            flow_logs=FlowLogs(
                log_group_name=naming.flow_log_group(names.stack_prefix),
                retention_days=flow.retention_days,
                traffic_type=flow.traffic_type.value,
                aggregation_interval_s=flow.aggregation_interval_s,
            )
            if flow.enabled
            else None,
            dns_firewall=DnsFirewall(
                domains=tuple(stack_firewall_domains(cfg)),
                action="BLOCK" if fw.mode is DnsFirewallMode.block else "ALERT",
            )
            if fw.mode is not DnsFirewallMode.off
            else None,
            logs_key_arn=keys.logs_key_arn,
            s3_endpoint_policy=endpoint_policy,
            account_id=ctx.account.account_id,
            partition=partition,
        ),
        opts=ctx.in_region,
    )
    ctx.export("availabilityZones", list(zones))
    ctx.export("vpcId", network.vpc_id)
    ctx.export("privateSubnetIds", network.private_subnet_ids)
    return network
