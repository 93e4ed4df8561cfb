"""The stack config schema.

A stack file holds data only; everything it may say is declared here, with units, defaults and what
conflicts with what. Unknown keys are rejected (see ``loader.py`` for the did-you-mean hint). Checks
that need AWS facts (is this type offered in that AZ?) live in ``infra/validation.py`` and run before
any resource is created.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra import awsdata

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors and values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class Environment(StrEnum):
    dev = "dev"
    prod = "prod"


class Role(StrEnum):
    """What the stack's region is for: ``train`` runs the DDP trainer, ``infer`` serves models."""

    train = "train"
    infer = "infer"


class CapacityType(StrEnum):
    """How a node pool buys its instances.

    ``capacity_reservation`` covers On-Demand Capacity Reservations and EC2 Capacity Blocks for ML;
    it needs ``capacity_reservation_id`` on the pool.
    """

    on_demand = "on_demand"
    spot = "spot"
    capacity_reservation = "capacity_reservation"


class Tags(Strict):
    """Cost-allocation tags, applied to every taggable resource through the provider's default tags."""

    CostCenter: Annotated[str, Field(min_length=1, max_length=256)]
    Project: Annotated[str, Field(min_length=1, max_length=256)]
    Owner: Annotated[str, Field(min_length=1, max_length=256)]
    Environment: Environment
    Workload: Annotated[str, Field(min_length=1, max_length=256)]
    extra: dict[str, str] = Field(default_factory=dict, description="More tags, key -> value.")

    @field_validator("extra")
    @classmethod
    def _no_reserved(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key.lower().startswith("aws:"):
                raise ValueError(f"tag key {key!r} uses the reserved 'aws:' prefix; pick another key")
        return v

    def as_dict(self) -> dict[str, str]:
        base = {
            "CostCenter": self.CostCenter,
            "Project": self.Project,
            "Owner": self.Owner,
            "Environment": self.Environment.value,
            "Workload": self.Workload,
        }
        return {**base, **self.extra}


class NetworkConfig(Strict):
    """The stack's VPC."""

    vpc_cidr: str = Field("10.0.0.0/16", description="IPv4 CIDR of the VPC, /16 to /20.")
    az_count: Annotated[int, Field(ge=1, le=6)] = Field(
        3, description="How many availability zones the VPC spans (EKS needs subnets in at least two)."
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"{v!r} is not an IPv4 CIDR block ({exc}); use e.g. '10.0.0.0/16'") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{v!r} has prefix /{net.prefixlen}; a GPU VPC needs /16 to /20")
        if not net.is_private:
            raise ValueError(f"{v!r} is not a private (RFC 1918) range; use e.g. '10.0.0.0/16'")
        return v


class NodePoolConfig(Strict):
    """One managed node group. Pools are keyed by name in the stack file, so URNs stay stable."""

    instance_type: str = Field(description="EC2 instance type, e.g. 'p5.48xlarge'.")
    min_size: Annotated[int, Field(ge=0)] = 0
    desired_size: Annotated[int, Field(ge=0)] = 1
    max_size: Annotated[int, Field(ge=1)] = 1
    capacity_type: CapacityType = CapacityType.on_demand
    gpu: bool = Field(True, description="GPU pool (NVIDIA AMI, GPU taint) or CPU system pool.")
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sizes(self) -> NodePoolConfig:
        if self.min_size > self.max_size:
            raise ValueError(
                f"min_size {self.min_size} is greater than max_size {self.max_size}; "
                "make min_size <= max_size"
            )
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"desired_size {self.desired_size} is outside min_size..max_size "
                f"({self.min_size}..{self.max_size}); set it within that range"
            )
        return self

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if awsdata.instance_facts(v) is None:
            import difflib

            close = difflib.get_close_matches(v, awsdata.instance_type_names(), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"{v!r} is not an EC2 instance type{hint}")
        return v


def _pool_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(
            f"pool name {name!r} must be 2-32 characters of lower-case letters, digits and '-', "
            "starting with a letter"
        )
    return name


class PlatformConfig(Strict):
    """Everything one stack (one region, one environment) declares: the ``aiplat:platform`` key."""

    environment: Environment
    role: Role
    region: str = Field(description="AWS region, e.g. 'us-east-1'.")
    name_prefix: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,18}[a-z0-9]$")] = Field(
        "aiplat", description="Prefix of physical resource names (3-20 characters)."
    )
    tags: Tags
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    node_pools: dict[str, NodePoolConfig] = Field(default_factory=dict)

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if v not in awsdata.regions():
            import difflib

            close = difflib.get_close_matches(v, awsdata.regions(), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"{v!r} is not an AWS region{hint}")
        return v

    @field_validator("node_pools")
    @classmethod
    def _pool_names(cls, v: dict[str, NodePoolConfig]) -> dict[str, NodePoolConfig]:
        for name in v:
            _pool_name(name)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> PlatformConfig:
        if self.tags.Environment != self.environment:
            raise ValueError(
                f"tags.Environment is {self.tags.Environment.value!r} but environment is "
                f"{self.environment.value!r}; make them equal"
            )
        return self
