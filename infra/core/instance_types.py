"""The GPU instance types the platform knows by name, and how instance-type names parse. Pure data.

The plan uses AWS's live facts; the policy pack sees only resources, so the numbers it needs are kept here,
once. Every number is DescribeInstanceTypes' in moto 5.2.5's snapshot (``gpus``, ``gpu_model``,
``gpu_memory_mib`` per GPU, ``vcpus``, ``memory_mib``, ``efa_interfaces`` = one per network card up to
``EfaInfo.MaximumEfaInterfaces``), checked by tests/infra/core/test_instance_types.py; prices are keyed by
name in ``infra/cost/data/prices.yaml``. https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
A new family with EFA-only interfaces past the first (as P5): add it to ``EFA_ONLY_FAMILY_PREFIXES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


# The instance types the pinned EFA device plugin chart schedules on: its required node affinity lists
# ``supportedInstanceLabels.values`` of its values.yaml, so on a type not listed the plugin never runs and
# pods asking for vpc.amazonaws.com/efa stay Pending (rule ``efa-plugin-knows-types``). The list of
# aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml at bfe91c4 (2026-07-21, chart v0.5.30).
EFA_PLUGIN_CHART_VERSION = "v0.5.30"
EFA_PLUGIN_SOURCE = (
    "https://github.com/aws/eks-charts/blob/bfe91c4/stable/aws-efa-k8s-device-plugin/values.yaml"
)
# One name per entry of the list, whitespace-separated as it reads there.
_EFA_PLUGIN_LIST = """
c5n.18xlarge c5n.9xlarge c5n.metal c6a.48xlarge c6a.metal c6gn.16xlarge c6i.32xlarge c6i.metal
c6id.32xlarge c6id.metal c6in.32xlarge c6in.metal c7a.48xlarge c7a.metal-48xl c7g.16xlarge c7g.metal
c7gd.16xlarge c7gd.metal c7gn.16xlarge c7gn.metal c7i.48xlarge c7i.metal-48xl c8a.48xlarge
c8a.metal-48xl c8g.24xlarge c8g.48xlarge c8g.metal-24xl c8g.metal-48xl c8gb.16xlarge c8gb.24xlarge
c8gb.48xlarge c8gb.metal-24xl c8gb.metal-48xl c8gd.24xlarge c8gd.48xlarge c8gd.metal-24xl
c8gd.metal-48xl c8gn.16xlarge c8gn.24xlarge c8gn.48xlarge c8gn.metal-24xl c8gn.metal-48xl c8i.48xlarge
c8i.96xlarge c8i.metal-48xl c8i.metal-96xl c8ib.48xlarge c8ib.96xlarge c8ib.metal-48xl c8ib.metal-96xl
c8id.48xlarge c8id.96xlarge c8id.metal-48xl c8id.metal-96xl c8in.48xlarge c8in.96xlarge c8in.metal-48xl
c8in.metal-96xl c9g.48xlarge c9g.metal-48xl c9gd.48xlarge c9gd.metal-48xl dl2q.24xlarge f2.48xlarge
g4dn.12xlarge g4dn.16xlarge g4dn.8xlarge g4dn.metal g5.12xlarge g5.16xlarge g5.24xlarge g5.48xlarge
g5.8xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.48xlarge g6.8xlarge g6e.12xlarge g6e.16xlarge
g6e.24xlarge g6e.48xlarge g6e.8xlarge g7.12xlarge g7.24xlarge g7.48xlarge g7.8xlarge g7e.12xlarge
g7e.24xlarge g7e.48xlarge g7e.8xlarge gr6.8xlarge hpc6a.48xlarge hpc6id.32xlarge hpc7a.12xlarge
hpc7a.24xlarge hpc7a.48xlarge hpc7a.96xlarge hpc7g.16xlarge hpc7g.4xlarge hpc7g.8xlarge hpc8a.96xlarge
i3en.12xlarge i3en.24xlarge i3en.metal i4g.16xlarge i4i.32xlarge i4i.metal i7i.24xlarge i7i.48xlarge
i7i.metal-48xl i7ie.48xlarge i7ie.metal-48xl i8g.48xlarge i8g.metal-48xl i8ge.48xlarge i8ge.metal-48xl
im4gn.16xlarge inf1.24xlarge m5dn.24xlarge m5dn.metal m5n.24xlarge m5n.metal m5zn.12xlarge m5zn.metal
m6a.48xlarge m6a.metal m6i.32xlarge m6i.metal m6id.32xlarge m6id.metal m6idn.32xlarge m6idn.metal
m6in.32xlarge m6in.metal m7a.48xlarge m7a.metal-48xl m7g.16xlarge m7g.metal m7gd.16xlarge m7gd.metal
m7i.48xlarge m7i.metal-48xl m8a.48xlarge m8a.metal-48xl m8azn.24xlarge m8azn.metal-24xl m8g.24xlarge
m8g.48xlarge m8g.metal-24xl m8g.metal-48xl m8gb.16xlarge m8gb.24xlarge m8gb.48xlarge m8gb.metal-24xl
m8gb.metal-48xl m8gd.24xlarge m8gd.48xlarge m8gd.metal-24xl m8gd.metal-48xl m8gn.16xlarge m8gn.24xlarge
m8gn.48xlarge m8gn.metal-24xl m8gn.metal-48xl m8i.48xlarge m8i.96xlarge m8i.metal-48xl m8i.metal-96xl
m8ib.48xlarge m8ib.96xlarge m8ib.metal-48xl m8ib.metal-96xl m8id.48xlarge m8id.96xlarge m8id.metal-48xl
m8id.metal-96xl m8idb.48xlarge m8idb.96xlarge m8idb.metal-48xl m8idb.metal-96xl m8idn.48xlarge
m8idn.96xlarge m8idn.metal-48xl m8idn.metal-96xl m8in.48xlarge m8in.96xlarge m8in.metal-48xl
m8in.metal-96xl m9g.48xlarge m9g.metal-48xl m9gd.48xlarge m9gd.metal-48xl p3dn.24xlarge p4d.24xlarge
p4de.24xlarge p5.48xlarge p5.4xlarge p5e.48xlarge p5en.48xlarge p6-b200.48xlarge p6-b300.48xlarge
p6e-gb200.36xlarge p6e-gb300.36xlarge r5dn.24xlarge r5dn.metal r5n.24xlarge r5n.metal r6a.48xlarge
r6a.metal r6i.32xlarge r6i.metal r6id.32xlarge r6id.metal r6idn.32xlarge r6idn.metal r6in.32xlarge
r6in.metal r7a.48xlarge r7a.metal-48xl r7g.16xlarge r7g.metal r7gd.16xlarge r7gd.metal r7i.48xlarge
r7i.metal-48xl r7iz.32xlarge r7iz.metal-32xl r8a.48xlarge r8a.metal-48xl r8g.24xlarge r8g.48xlarge
r8g.metal-24xl r8g.metal-48xl r8gb.16xlarge r8gb.24xlarge r8gb.48xlarge r8gb.metal-24xl r8gb.metal-48xl
r8gd.24xlarge r8gd.48xlarge r8gd.metal-24xl r8gd.metal-48xl r8gn.16xlarge r8gn.24xlarge r8gn.48xlarge
r8gn.metal-24xl r8gn.metal-48xl r8i.48xlarge r8i.96xlarge r8i.metal-48xl r8i.metal-96xl r8ib.48xlarge
r8ib.96xlarge r8ib.metal-48xl r8ib.metal-96xl r8id.48xlarge r8id.96xlarge r8id.metal-48xl
r8id.metal-96xl r8idb.48xlarge r8idb.96xlarge r8idb.metal-48xl r8idb.metal-96xl r8idn.48xlarge
r8idn.96xlarge r8idn.metal-48xl r8idn.metal-96xl r8in.48xlarge r8in.96xlarge r8in.metal-48xl
r8in.metal-96xl trn1.32xlarge trn1n.32xlarge trn2-ac.24xlarge trn2.3xlarge trn2.48xlarge
trn2u-ac.24xlarge trn2u.48xlarge u7i-12tb.224xlarge u7i-6tb.112xlarge u7i-8tb.112xlarge
u7in-16tb.224xlarge u7in-24tb.224xlarge u7in-32tb.224xlarge vt1.24xlarge x2idn.32xlarge x2idn.metal
x2iedn.32xlarge x2iedn.metal x2iezn.12xlarge x2iezn.metal x8aedz.24xlarge x8aedz.metal-24xl x8g.24xlarge
x8g.48xlarge x8g.metal-24xl x8g.metal-48xl x8i.48xlarge x8i.64xlarge x8i.96xlarge x8i.metal-48xl
x8i.metal-96xl
"""
EFA_PLUGIN_TYPES: dict[str, frozenset[str]] = {EFA_PLUGIN_CHART_VERSION: frozenset(_EFA_PLUGIN_LIST.split())}
