"""NVIDIA drivers of the EKS-optimized AL2023 NVIDIA AMIs, and what the CUDA of an image needs. Pure data.

A container brings its CUDA runtime; the kernel driver comes from the node's AMI. An image built on CUDA 13
(libcudart.so.13) on a node whose driver is older than CUDA 13's minimum fails at its first CUDA call
("CUDA driver version is insufficient for CUDA runtime version"), after the pool, the pods and the image
all deployed. So the plan compares the two (rule ``gpu-driver-runs-image-cuda``).

Drivers, ``AL2023_x86_64_NVIDIA``, package ``kmod-nvidia-latest-dkms``: awslabs/amazon-eks-ami CHANGELOG.md
(the release notes, "AMI Details"), at commit 81fec2e895854f599974fe4d3d72f61c0a9aaffa (2026-07-23), read
2026-12-02. The releases after the last one there are not recorded: pin one that is.
"""

from __future__ import annotations

import re

CHANGELOG = "https://github.com/awslabs/amazon-eks-ami/blob/main/CHANGELOG.md"

# AMI release -> NVIDIA driver version of its AL2023 x86_64 NVIDIA AMI.
AL2023_NVIDIA_DRIVERS: dict[str, str] = {
    "v20260714": "580.159.03",
    "v20260625": "580.159.03",
    "v20260618": "580.159.03",
    "v20260610": "580.159.03",
    "v20260505": "580.126.09",
    "v20260423": "580.126.09",
    "v20260415": "580.126.09",
    "v20260409": "580.126.09",
    "v20260403": "580.126.09",
    "v20260318": "580.126.09",
    "v20260304": "580.126.09",
    "v20260224": "580.126.09",
    "v20260209": "580.126.09",
    "v20260129": "580.126.09",
    "v20260120": "580.126.09",
    "v20260116": "580.105.08",
    "v20260114": "580.105.08",
    "v20260107": "580.105.08",
    "v20251217": "580.105.08",
    "v20251209": "580.105.08",
    "v20251120": "580.105.08",
    "v20251112": "580.95.05",
    "v20251108": "580.95.05",
    "v20251029": "580.95.05",
    "v20251023": "580.95.05",
    "v20251016": "570.195.03",
    "v20251007": "570.195.03",
    "v20251002": "570.195.03",
    "v20250920": "570.172.08",
    "v20250915": "570.172.08",
    "v20250904": "570.172.08",
    "v20250829": "570.172.08",
    "v20250821": "570.172.08",
    "v20250819": "570.172.08",
    "v20250813": "570.172.08",
    "v20250807": "570.172.08",
    "v20250715": "575.57.08",
    "v20250704": "570.158.01",
    "v20250627": "570.158.01",
    "v20250620": "570.158.01",
    "v20250519": "570.133.20",
    "v20250514": "570.133.20",
    "v20250505": "570.133.20",
    "v20250501": "570.133.20",
    "v20250419": "570.133.20",
    "v20250410": "570.124.06",
    "v20250403": "570.124.06",
    "v20250317": "560.35.05",
    "v20250304": "560.35.05",
    "v20250228": "560.35.05",
    "v20250224": "560.35.05",
    "v20250212": "560.35.05",
    "v20250203": "560.35.05",
    "v20250123": "560.35.05",
    "v20250116": "560.35.05",
    "v20250103": "560.35.05",
    "v20241225": "560.35.05",
    "v20241213": "560.35.05",
    "v20241205": "560.35.05",
    "v20241121": "560.35.05",
    "v20241115": "560.35.03",
    "v20241109": "560.35.03",
    "v20241106": "560.35.03",
    "v20241024": "560.35.03",
    "v20241016": "560.35.03",
    "v20241011": "560.35.03",
    "v20240928": "560.35.03",
    "v20240924": "560.35.03",
}
# Managed node groups are created with the newest AMI release of their Kubernetes version (no release is
# pinned: EKS picks the latest at creation); the newest release recorded above stands for it.
NEWEST_RECORDED = max(AL2023_NVIDIA_DRIVERS)

# The minimum Linux x86_64 driver of each CUDA toolkit version ("CUDA Toolkit and Corresponding Driver
# Versions", NVIDIA CUDA Toolkit release notes, Table 3, read 2026-12-02):
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver
# Minor-version compatibility: every 13.x runs on a 13.0-capable driver (>= 580), every 12.x on >= 525.60.13
# (with PTX JIT limits); the table keeps the GA minimum of each version the images use.
CUDA_MIN_DRIVER: dict[str, str] = {
    "12.4": "550.54.14",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}


def version_key(version: str) -> tuple[int, ...]:
    """'580.159.03' -> (580, 159, 3), for comparing driver versions."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


def release_of(alias: str) -> str:
    """'al2023@v20260714' -> 'v20260714'."""
    return alias.split("@", 1)[-1]


def driver_of(release: str) -> str | None:
    """The NVIDIA driver of ``release`` (``v20260714``), None when it is not recorded."""
    return AL2023_NVIDIA_DRIVERS.get(release)


def driver_runs(driver: str, cuda: str) -> bool:
    """Whether a node with ``driver`` runs an image built on CUDA ``cuda`` (its major.minor)."""
    needed = CUDA_MIN_DRIVER[cuda]
    return version_key(driver) >= version_key(needed)


# The CUDA each of our Dockerfiles builds on (major.minor), tied to the Dockerfile by
# tests/infra/pools/test_ami_drivers.py: the trainer's CUDA base image and the cuda-toolkit its hashed lock
# pins for torch (PyPI's torch 2.13.0 Linux wheel is a CUDA 13.0 build); vLLM's own image.
DOCKERFILE_CUDA: dict[str, str] = {
    "images/trainer/Dockerfile": "13.0",
    "images/vllm/Dockerfile": "13.0",
}
# vLLM's upstream image (docker.io/vllm/vllm-openai:v<version>) by version: 0.33.0 is built on CUDA 13.0
# (vllm-project/vllm docker/Dockerfile ARG CUDA_VERSION=13.0.x; its PyPI wheel requires torch 2.14.0, whose
# Linux wheel depends on nvidia-cuda-runtime 13.0.96: `uv pip compile` of vllm==0.33.0, 2026-12-02).
VLLM_CUDA: dict[str, str] = {"0.33.0": "13.0"}
