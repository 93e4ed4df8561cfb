"""The GPU pools' AMI drivers against the CUDA of the images they run (rule gpu-driver-runs-image-cuda)."""

from __future__ import annotations

import re

from infra.inference.config import VLLM_VERSION
from infra.karpenter.config import KarpenterConfig
from infra.pools import ami_drivers
from tests.conftest import REPO
from tests.support.config_cases import RULES, assert_refused, set_at


def test_the_recorded_drivers_and_the_pinned_release() -> None:
    default = ami_drivers.release_of(KarpenterConfig().ami_alias)
    assert ami_drivers.driver_of(default) == "580.159.03"  # the release notes of v20260714
    assert ami_drivers.NEWEST_RECORDED == "v20260714"
    assert ami_drivers.driver_runs("580.159.03", "13.0")
    assert not ami_drivers.driver_runs("575.57.08", "13.0")  # v20250715's driver
    assert ami_drivers.driver_runs("575.57.08", "12.9")
    assert ami_drivers.version_key("580.65.06") < ami_drivers.version_key("580.159.03")


def test_the_images_cuda_is_what_their_dockerfiles_build_on() -> None:
    trainer = (REPO / "images/trainer/Dockerfile").read_text()
    cuda_base = re.search(r"^ARG BASE_IMAGE=nvidia/cuda:(\d+\.\d+)\.\d+-", trainer, re.M)
    # torch from the hashed lock: PyPI's CUDA build, whose CUDA is the cuda-toolkit it requires
    lock = (REPO / "images/trainer/requirements.lock").read_text()
    torch_cuda = re.search(r"^cuda-toolkit==(\d+\.\d+)\.", lock, re.M)
    assert cuda_base and torch_cuda
    assert ami_drivers.DOCKERFILE_CUDA["images/trainer/Dockerfile"] == cuda_base.group(1)
    assert torch_cuda.group(1) == cuda_base.group(1)
    vllm = (REPO / "images/vllm/Dockerfile").read_text()
    assert f"vllm-openai:v{VLLM_VERSION}" in vllm
    assert ami_drivers.DOCKERFILE_CUDA["images/vllm/Dockerfile"] == ami_drivers.VLLM_CUDA[VLLM_VERSION]


def test_an_infer_pool_on_an_ami_with_a_570_driver_is_refused_naming_both_versions(
    stack_config, monitors
) -> None:
    raw = stack_config("prod-sg-infer")
    set_at("cluster_services.karpenter.ami_alias", "al2023@v20250807")(raw)
    message = assert_refused(raw, "NVIDIA driver 570.172.08, older than the 580.65.06", monitors, RULES)
    assert message.startswith("aiplat:platform.cluster_services.karpenter.ami_alias:")
    assert "vLLM 0.33.0" in message and "al2023@v20260714" in message


def test_an_ami_release_whose_driver_is_not_recorded_is_refused(stack_config, monitors) -> None:
    raw = stack_config("prod-hk-infer")
    set_at("cluster_services.karpenter.ami_alias", "al2023@v20990101")(raw)
    assert_refused(raw, "AMI release v20990101, whose NVIDIA driver is not recorded", monitors, RULES)
