"""Wiring of the stack's VPC: zones from the config and the region's facts, NAT layout, flow logs."""

from __future__ import annotations

from infra.components.aws.kms import KmsKeys
from infra.components.aws.network import FlowLogs, GpuVpc, GpuVpcArgs
from infra.model import naming
from infra.model.config.network import NatStrategy
from infra.model.zones import vpc_zones
from infra.wiring.context import StackContext


def nat_zones(strategy: NatStrategy, zones: tuple[str, ...]) -> tuple[str, ...]:
    """The zones that get a NAT gateway under ``strategy``."""
    return {NatStrategy.none: (), NatStrategy.single: zones[:1], NatStrategy.one_per_az: zones}[strategy]


def wire_network(ctx: StackContext, keys: KmsKeys) -> GpuVpc:
    cfg, names = ctx.cfg, ctx.names
    zones = vpc_zones(cfg, ctx.facts)
    flow = cfg.network.flow_logs
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
            logs_key_arn=keys.logs_key_arn,
        ),
        opts=ctx.in_region,
    )
    ctx.export("availabilityZones", list(zones))
    ctx.export("vpcId", network.vpc_id)
    ctx.export("privateSubnetIds", network.private_subnet_ids)
    return network
