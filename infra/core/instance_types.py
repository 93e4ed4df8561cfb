"""The GPU instance types the platform knows by name, how instance-type names parse, and the EFA device
plugin's instance lists (a data file). Pure data.

The plan uses AWS's live facts; the policy pack sees only resources, so the numbers it needs are kept here,
once. Every number is DescribeInstanceTypes' in moto 5.2.5's snapshot (``gpus``, ``gpu_model``,
``gpu_memory_mib`` per GPU, ``vcpus``, ``memory_mib``, ``efa_interfaces`` = one per network card up to
``EfaInfo.MaximumEfaInterfaces``), checked by tests/infra/core/test_instance_types.py; prices are keyed by
name in ``infra/cost/data/prices.yaml``. https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
A new family with EFA-only interfaces past the first (as P5): add it to ``EFA_ONLY_FAMILY_PREFIXES``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# The instance categories with GPUs: G and P of AWS's accelerated computing types (Inferentia, Trainium,
# FPGA and VT list no GPUs). https://aws.amazon.com/ec2/instance-types/#Accelerated_Computing
GPU_CATEGORIES = ("g", "p")
# EC2 filter values that narrow a question to the GPU categories; the facts (GpuInfo) then decide.
GPU_FAMILY_PATTERNS = tuple(f"{c}*" for c in GPU_CATEGORIES)

# Families whose EFA interfaces past the primary one are EFA-only: P5-class (p5, p5e, p5en, p6-*), AWS's
# "use case 1" for P5; older families (p4d, g6e, ...) are documented with ``efa`` on every card.
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
EFA_ONLY_FAMILY_PREFIXES = ("p5", "p6")

GIB = 1 << 30
_AWSOME = (
    "https://github.com/aws-samples/awsome-distributed-training/blob/7217859f/micro-benchmarks/nccl-tests"
)


def family(instance_type: str) -> str:
    """The instance family: ``p5en`` for ``p5en.48xlarge`` (Karpenter's ``instance-family`` label)."""
    return instance_type.split(".", 1)[0]


def instance_category(instance_type: str) -> str:
    """The letters before the generation: ``p`` for ``p5.48xlarge``, ``inf`` for ``inf2.xlarge`` (Karpenter's
    ``karpenter.k8s.aws/instance-category``); EC2's vCPU quotas are per group of categories.
    https://karpenter.sh/docs/concepts/scheduling/#well-known-labels"""
    match = re.match(r"[a-z]+", instance_type)
    return match.group(0) if match else ""


def is_gpu_family(name: str) -> bool:
    """Whether a type, family or category (``g5.xlarge``, ``g5``, ``g``) is in a GPU category."""
    return family(name).startswith(GPU_CATEGORIES)


def efa_only_past_primary(instance_type: str) -> bool:
    """Whether the type's further EFA interfaces are ``efa-only`` (``EFA_ONLY_FAMILY_PREFIXES``)."""
    return family(instance_type).startswith(EFA_ONLY_FAMILY_PREFIXES)


@dataclass(frozen=True)
class PublishedBusbw:
    """One published all_reduce_perf result: bus bandwidth (GB/s) at a message size on ``nodes`` nodes."""

    nodes: int | None
    message_bytes: int
    busbw_gbps: float
    source: str


@dataclass(frozen=True)
class GpuInstanceType:
    """One GPU instance type: AWS's numbers (see the module docstring) and its published all-reduce figure."""

    name: str
    gpus: int
    gpu_model: str
    gpu_memory_mib: int
    vcpus: int
    memory_mib: int
    efa_interfaces: int
    # Out-of-place busbw of all_reduce_perf (infra/pools/busbw.py sets the bandwidth check's threshold from
    # it); None: no published figure, the check falls back to the type's network bandwidth.
    busbw: PublishedBusbw | None = None


# Published all_reduce_perf figures, aws-samples/awsome-distributed-training at 7217859f (2026-02-21).
_BUSBW = {
    # 32 x 100 Gbps EFA; newest run in the README (512 MiB ... 16 GiB: 393 ... 487 GB/s).
    "p5.48xlarge": PublishedBusbw(2, 8 * GIB, 479.0, f"{_AWSOME}/README.md"),
    # 4 x 100 Gbps EFA (Slurm results: 512 MiB / 1 GiB / 2 GiB = 74.3 / 76.8 / 78.3 GB/s).
    "p4de.24xlarge": PublishedBusbw(2, 2 * GIB, 78.3, f"{_AWSOME}/README.md"),
    # 16 x 200 Gbps EFA; the topology-aware test does not state the node count.
    "p5en.48xlarge": PublishedBusbw(
        None, 16 * GIB, 369.9, f"{_AWSOME}/slurm/topology-aware-nccl-tests/README.md"
    ),
}


def _row(name: str, gpus: int, model: str, gpu_mib: int, vcpus: int, mib: int, efa: int) -> GpuInstanceType:
    return GpuInstanceType(name, gpus, model, gpu_mib, vcpus, mib, efa, _BUSBW.get(name))


# name, GPUs, GPU model, MiB per GPU, vCPUs, MiB, EFA interfaces
_ROWS = (
    _row("g4dn.xlarge", 1, "T4", 16384, 4, 16384, 0),
    _row("g4dn.2xlarge", 1, "T4", 16384, 8, 32768, 0),
    _row("g4dn.4xlarge", 1, "T4", 16384, 16, 65536, 0),
    _row("g4dn.8xlarge", 1, "T4", 16384, 32, 131072, 1),
    _row("g4dn.12xlarge", 4, "T4", 16384, 48, 196608, 1),
    _row("g4dn.16xlarge", 1, "T4", 16384, 64, 262144, 1),
    _row("g4dn.metal", 8, "T4", 16384, 96, 393216, 1),
    _row("g5.xlarge", 1, "A10G", 22888, 4, 16384, 0),
    _row("g5.2xlarge", 1, "A10G", 22888, 8, 32768, 0),
    _row("g5.4xlarge", 1, "A10G", 22888, 16, 65536, 0),
    _row("g5.8xlarge", 1, "A10G", 22888, 32, 131072, 1),
    _row("g5.12xlarge", 4, "A10G", 22888, 48, 196608, 1),
    _row("g5.16xlarge", 1, "A10G", 22888, 64, 262144, 1),
    _row("g5.24xlarge", 4, "A10G", 22888, 96, 393216, 1),
    _row("g5.48xlarge", 8, "A10G", 22888, 192, 786432, 1),
    _row("g6.xlarge", 1, "L4", 22888, 4, 16384, 0),
    _row("g6.2xlarge", 1, "L4", 22888, 8, 32768, 0),
    _row("g6.4xlarge", 1, "L4", 22888, 16, 65536, 0),
    _row("g6.8xlarge", 1, "L4", 22888, 32, 131072, 1),
    _row("g6.12xlarge", 4, "L4", 22888, 48, 196608, 1),
    _row("g6.16xlarge", 1, "L4", 22888, 64, 262144, 1),
    _row("g6.24xlarge", 4, "L4", 22888, 96, 393216, 1),
    _row("g6.48xlarge", 8, "L4", 22888, 192, 786432, 1),
    _row("g6e.xlarge", 1, "L40S", 45776, 4, 32768, 0),
    _row("g6e.2xlarge", 1, "L40S", 45776, 8, 65536, 0),
    _row("g6e.4xlarge", 1, "L40S", 45776, 16, 131072, 0),
    _row("g6e.8xlarge", 1, "L40S", 45776, 32, 262144, 1),
    _row("g6e.12xlarge", 4, "L40S", 45776, 48, 393216, 1),
    _row("g6e.16xlarge", 1, "L40S", 45776, 64, 524288, 1),
    _row("g6e.24xlarge", 4, "L40S", 45776, 96, 786432, 2),
    _row("g6e.48xlarge", 8, "L40S", 45776, 192, 1572864, 4),
    _row("p4d.24xlarge", 8, "A100", 40960, 96, 1179648, 4),
    _row("p4de.24xlarge", 8, "A100", 81920, 96, 1179648, 4),
    _row("p5.4xlarge", 1, "H100", 81920, 16, 262144, 1),
    _row("p5.48xlarge", 8, "H100", 81920, 192, 2097152, 32),
    _row("p5e.48xlarge", 8, "H200", 144384, 192, 2097152, 32),
    _row("p5en.48xlarge", 8, "H200", 144384, 192, 2097152, 16),
    _row("p6-b200.48xlarge", 8, "B200", 183359, 192, 2097152, 8),
)
TABLE: dict[str, GpuInstanceType] = {r.name: r for r in _ROWS}

# Whether each GPU model of the table computes in bfloat16: compute capability 8.0 or newer (Ampere on).
# T4 is Turing (7.5): float16 only. https://developer.nvidia.com/cuda-gpus,
# https://docs.nvidia.com/cuda/cuda-c-programming-guide/#bfloat16-precision
BF16 = {
    "A100": True,
    "A10G": True,
    "B200": True,
    "H100": True,
    "H200": True,
    "L4": True,
    "L40S": True,
    "T4": False,
}


def gpus(instance_type: str) -> int | None:
    """GPUs per instance: from ``TABLE``; 0 outside the GPU categories; None for a GPU type not listed."""
    if instance_type in TABLE:
        return TABLE[instance_type].gpus
    return None if is_gpu_family(instance_type) else 0


# The instance types each recorded EFA device plugin chart version schedules on: its required node affinity
# lists ``supportedInstanceLabels.values`` of its values.yaml, so on a type not listed the plugin never runs
# and pods asking for vpc.amazonaws.com/efa stay Pending (rule ``efa-plugin-knows-types``). Data:
# data/efa_device_plugin.json, each version with its source (aws/eks-charts at a commit) and date, written by
# ``EFA_PLUGIN_REFRESH``; its ``default`` is the chart version the config uses when none is set.
EFA_PLUGIN_FILE = Path(__file__).with_name("data") / "efa_device_plugin.json"
EFA_PLUGIN_REFRESH = "aiplat facts upstream --efa-device-plugin <ref>"
_EFA_PLUGIN = json.loads(EFA_PLUGIN_FILE.read_text())
EFA_PLUGIN_CHART_VERSION: str = _EFA_PLUGIN["default"]
EFA_PLUGIN_TYPES: dict[str, frozenset[str]] = {
    v: frozenset(e["instance_types"]) for v, e in _EFA_PLUGIN["versions"].items()
}
EFA_PLUGIN_SOURCES: dict[str, str] = {v: e["source"] for v, e in _EFA_PLUGIN["versions"].items()}
EFA_PLUGIN_APP_VERSIONS: dict[str, str] = {v: e["app_version"] for v, e in _EFA_PLUGIN["versions"].items()}
EFA_PLUGIN_IMAGE_TAGS: dict[str, str] = {v: e["image_tag"] for v, e in _EFA_PLUGIN["versions"].items()}
EFA_PLUGIN_SOURCE = EFA_PLUGIN_SOURCES[EFA_PLUGIN_CHART_VERSION]
