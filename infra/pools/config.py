"""Config of the node pools (``node_pools``): instance types, capacity (On-Demand, Spot, reservations,
Capacity Blocks), placement, taints and labels."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.core.config import NAME_RE, Strict


class CapacityType(StrEnum):
    """How a node pool buys its instances.

    ``capacity_reservation`` launches into an On-Demand Capacity Reservation (ODCR) and
    ``capacity_block`` into an EC2 Capacity Block for ML; both need ``capacity_reservation`` on the pool.
    """

    on_demand = "on_demand"
    spot = "spot"
    capacity_reservation = "capacity_reservation"
    capacity_block = "capacity_block"

    @property
    def reserved(self) -> bool:
        return self in (CapacityType.capacity_reservation, CapacityType.capacity_block)


class Placement(StrEnum):
    """Placement of a pool's nodes.

    ``auto``: a cluster placement group for EFA pools without a capacity reservation, none otherwise;
    ``cluster``: a cluster placement group (created, or the reservation's ``placement_group`` when a
    capacity reservation is set); ``none``: no placement group.
    """

    auto = "auto"
    cluster = "cluster"
    none = "none"


class TaintEffect(StrEnum):
    NoSchedule = "NoSchedule"
    NoExecute = "NoExecute"
    PreferNoSchedule = "PreferNoSchedule"


class TaintConfig(Strict):
    """One taint; the key is the dict key."""

    value: str = Field("true", description="Taint value.")
    effect: TaintEffect = Field(
        TaintEffect.NoSchedule, description="NoSchedule, NoExecute or PreferNoSchedule."
    )


class CapacityReservationConfig(Strict):
    """A reservation the pool launches into. Copy the values from `aws ec2 describe-capacity-reservations`."""

    id: Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")] = Field(
        description="e.g. 'cr-0123456789abcdef0'."
    )
    availability_zone: str = Field(description="The reservation's zone; the pool must run there.")
    placement_group: str | None = Field(
        None,
        description="Name of the cluster placement group the reservation was made in, if any; the pool "
        "launches into it (it is not created here).",
    )


class NodePoolConfig(Strict):
    """One managed node group. Pools are keyed by name in the stack file, so URNs stay stable."""

    instance_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")] = Field(
        description="EC2 instance type, e.g. 'p5.48xlarge'; checked against the region's offerings."
    )
    min_size: Annotated[int, Field(ge=0)] = Field(0, description="Fewest nodes (at most max_size).")
    desired_size: Annotated[int, Field(ge=0)] = Field(
        1,
        description="Nodes the pool runs, within min_size..max_size; every pulumi up applies it (no cluster "
        "autoscaler: raise it to grow the pool; a Capacity Block pool stays at 0 until its block starts).",
    )
    max_size: Annotated[int, Field(ge=1)] = Field(
        1, description="Most nodes; size vCPU quotas and capacity reservations for this number."
    )
    capacity_type: CapacityType = Field(
        CapacityType.on_demand,
        description="on_demand, spot, capacity_reservation (ODCR) or capacity_block; the last two need "
        "capacity_reservation.",
    )
    gpu: bool = Field(True, description="GPU pool (NVIDIA AMI, GPU taint) or CPU system pool.")
    gpus_per_node: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="GPUs you expect per node; checked against the type's AWS facts (unset: not checked).",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes node labels.")
    taints: dict[str, TaintConfig] = Field(
        default_factory=dict,
        description="Extra taints keyed by taint key; GPU pools always get nvidia.com/gpu=true:NoSchedule.",
    )
    efa: bool = Field(
        False,
        description="Attach EFA interfaces (all the type supports unless efa_interfaces says fewer). "
        "Needs an EFA type and exactly one zone in availability_zones.",
    )
    efa_interfaces: Annotated[int, Field(ge=1)] | None = Field(
        None, description="How many EFA interfaces (default: the type's maximum). Only with efa: true."
    )
    availability_zones: list[str] = Field(
        default_factory=list,
        description="Zones the pool's nodes run in; empty = every VPC zone that offers the type. "
        "EFA pools and pools in a cluster placement group need exactly one.",
    )
    placement: Placement = Field(Placement.auto, description="auto, cluster or none; see Placement.")
    capacity_reservation: CapacityReservationConfig | None = Field(
        None,
        description="The ODCR or Capacity Block to launch into; needs capacity_type capacity_reservation "
        "or capacity_block.",
    )
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = Field(
        100, description="Root EBS volume (gp3, encrypted with the stack's EBS key) in GiB."
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            check_label_key(key, "label")
            check_label_value(value, f"label {key!r}", empty_ok=False)
        return v

    @field_validator("taints")
    @classmethod
    def _taints(cls, v: dict[str, TaintConfig]) -> dict[str, TaintConfig]:
        # GPU pools get one more taint (nvidia.com/gpu) from the platform.
        if len(v) >= EKS_MAX_TAINTS:
            raise ValueError(
                f"{len(v)} taints but EKS allows at most {EKS_MAX_TAINTS} per node group, ours included; "
                "remove some"
            )
        for key, taint in v.items():
            check_label_key(key, "taint")
            check_label_value(taint.value, f"taint {key!r}", empty_ok=True)
        return v

    @model_validator(mode="after")
    def _efa_and_capacity(self) -> NodePoolConfig:
        if self.efa_interfaces is not None and not self.efa:
            raise ValueError(
                f"efa_interfaces is {self.efa_interfaces} but efa is false; set efa: true or drop it"
            )
        if self.capacity_type.reserved and self.capacity_reservation is None:
            raise ValueError(
                f"capacity_type {self.capacity_type.value} needs capacity_reservation "
                "(id and availability_zone)"
            )
        if self.capacity_reservation is not None and not self.capacity_type.reserved:
            raise ValueError(
                f"capacity_reservation is set but capacity_type is {self.capacity_type.value}; "
                "set capacity_type to capacity_reservation or capacity_block"
            )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError("availability_zones names a zone twice; name each once")
        return self

    @property
    def runs_system_pods(self) -> bool:
        """Whether CoreDNS, the EBS CSI controller and other system pods can run here: a CPU pool without
        NoSchedule/NoExecute taints (GPU pools carry the nvidia.com/gpu taint those pods do not tolerate)."""
        return not self.gpu and all(t.effect is TaintEffect.PreferNoSchedule for t in self.taints.values())

    @property
    def placement_group_wanted(self) -> bool:
        """Whether the pool's nodes go into a cluster placement group."""
        if self.placement is Placement.auto:
            return self.efa and self.capacity_reservation is None
        return self.placement is Placement.cluster

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


# Kubernetes label keys and values
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
# an optional DNS-subdomain prefix and '/', then a name of alphanumerics, '-', '_', '.' that starts and ends
# alphanumeric. The EKS API is stricter on length: keys 1-63 characters in all, label values 1-63, taint
# values 0-63 (CreateNodegroup labelKey/labelValue/taintKey/taintValue,
# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html).
_K8S_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)"


_K8S_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_K8S_NAME}$")


_K8S_VALUE = re.compile(rf"^{_K8S_NAME}?$")


EKS_LABEL_MAX = 63


# "Maximum of 50 taints per node group" (aws.eks.NodeGroup taints, from the EKS node taints page).
EKS_MAX_TAINTS = 50


def check_label_key(key: str, what: str) -> str:
    if not (1 <= len(key) <= EKS_LABEL_MAX and _K8S_KEY.match(key)):
        raise ValueError(
            f"{what} key {key!r} is not a Kubernetes label key of at most {EKS_LABEL_MAX} characters "
            "(EKS limit); use e.g. 'example.com/team'"
        )
    return key


def check_label_value(value: str, what: str, *, empty_ok: bool) -> str:
    if (not value and not empty_ok) or len(value) > EKS_LABEL_MAX or not _K8S_VALUE.match(value):
        low = 0 if empty_ok else 1
        raise ValueError(
            f"{what} value {value!r} must be {low}-{EKS_LABEL_MAX} characters of letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit (EKS and Kubernetes limits)"
        )
    return value


def check_pool_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(
            f"pool name {name!r} must be 2-32 characters of lower-case letters, digits and '-', "
            "starting with a letter"
        )
    return name
