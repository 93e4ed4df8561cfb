"""GpuVpc: the stack's VPC."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True, kw_only=True)
class GpuVpcArgs:
    """Inputs of GpuVpc."""

    name_prefix: str
    cidr: str
    availability_zones: tuple[str, ...]


class GpuVpc(pulumi.ComponentResource):
    """A VPC for GPU clusters."""

    vpc_id: pulumi.Output[str]

    def __init__(self, name: str, args: GpuVpcArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:network:GpuVpc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr,
            enable_dns_support=True,
            enable_dns_hostnames=True,  # EKS private endpoints and interface endpoints need DNS hostnames
            tags={"Name": f"{args.name_prefix}-vpc"},
            opts=child,
        )
        self.vpc_id = self.vpc.id
        self.register_outputs({"vpc_id": self.vpc_id})
