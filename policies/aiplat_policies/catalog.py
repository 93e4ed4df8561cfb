"""GPU and EFA counts of the GPU instance types the pack reasons about (GPU budget, training pools).

A policy pack sees resources, not AWS's instance-type data, so the numbers it needs are kept here. They are
AWS's numbers: ``gpus`` is the GPU count of DescribeInstanceTypes (``GpuInfo.Gpus[].Count``) and
``efa_interfaces`` the EFA interfaces a launch template can attach
(``infra.model.facts.InstanceFacts.efa_interface_limit``: one per network card, at most
``EfaInfo.MaximumEfaInterfaces``), as the AWS data bundled in moto 5.2.5 reports them.
tests/policies/test_pack.py (test_catalog_is_aws_data) checks every row against that data through the same
InstanceFacts the plan uses. Add a row for a new GPU type (the test tells you if a number is wrong).
https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.lib.efa import family

# Instance families with GPUs (first letters of the family): g (graphics/inference), p (training), gr.
GPU_FAMILY_PREFIXES = ("g", "p")


@dataclass(frozen=True)
class InstanceType:
    gpus: int
    efa_interfaces: int


CATALOG: dict[str, InstanceType] = {
    "g4dn.xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g4dn.2xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g4dn.4xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g4dn.8xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g4dn.12xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g4dn.16xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g4dn.metal": InstanceType(gpus=8, efa_interfaces=1),
    "g5.xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g5.2xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g5.4xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g5.8xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g5.12xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g5.16xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g5.24xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g5.48xlarge": InstanceType(gpus=8, efa_interfaces=1),
    "g6.xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6.2xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6.4xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6.8xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g6.12xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g6.16xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g6.24xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g6.48xlarge": InstanceType(gpus=8, efa_interfaces=1),
    "g6e.xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6e.2xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6e.4xlarge": InstanceType(gpus=1, efa_interfaces=0),
    "g6e.8xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g6e.12xlarge": InstanceType(gpus=4, efa_interfaces=1),
    "g6e.16xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "g6e.24xlarge": InstanceType(gpus=4, efa_interfaces=2),
    "g6e.48xlarge": InstanceType(gpus=8, efa_interfaces=4),
    "p4d.24xlarge": InstanceType(gpus=8, efa_interfaces=4),
    "p4de.24xlarge": InstanceType(gpus=8, efa_interfaces=4),
    "p5.4xlarge": InstanceType(gpus=1, efa_interfaces=1),
    "p5.48xlarge": InstanceType(gpus=8, efa_interfaces=32),
    "p5e.48xlarge": InstanceType(gpus=8, efa_interfaces=32),
    "p5en.48xlarge": InstanceType(gpus=8, efa_interfaces=16),
    "p6-b200.48xlarge": InstanceType(gpus=8, efa_interfaces=8),
}


def is_gpu_family(instance_type: str) -> bool:
    """Whether the type's family has GPUs (g*, p*): such a type must be in CATALOG to be counted."""
    return family(instance_type).startswith(GPU_FAMILY_PREFIXES)


def gpus(instance_type: str) -> int | None:
    """GPUs per instance: from CATALOG; 0 for families without GPUs; None for a GPU type not listed."""
    if instance_type in CATALOG:
        return CATALOG[instance_type].gpus
    return None if is_gpu_family(instance_type) else 0
