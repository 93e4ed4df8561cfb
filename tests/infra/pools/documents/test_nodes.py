"""AMI type, nodeadm user data, labels and taints per instance type."""

from __future__ import annotations

import pytest

from infra.core import naming
from infra.io import snapshot as awsdata
from infra.pools.documents import nodes


@pytest.mark.parametrize(
    ("itype", "gpu", "expected"),
    [
        ("p5.48xlarge", True, "AL2023_x86_64_NVIDIA"),
        ("g5.xlarge", True, "AL2023_x86_64_NVIDIA"),
        ("g5g.2xlarge", True, "AL2023_ARM_64_NVIDIA"),
        ("m6i.2xlarge", False, "AL2023_x86_64_STANDARD"),
        ("m7g.xlarge", False, "AL2023_ARM_64_STANDARD"),
    ],
)
def test_ami_type(itype: str, gpu: bool, expected: str) -> None:
    assert nodes.ami_type(awsdata.instance_facts(itype), gpu) == expected


@pytest.mark.parametrize(
    ("itype", "raid"), [("p5.48xlarge", True), ("g5.xlarge", True), ("m6i.xlarge", False)]
)
def test_user_data_raid0_only_with_instance_store(itype: str, raid: bool) -> None:
    data = nodes.node_user_data(awsdata.instance_facts(itype))
    if not raid:
        assert data is None
        return
    assert data is not None
    assert "Content-Type: application/node.eks.aws" in data
    assert "kind: NodeConfig" in data and "strategy: RAID0" in data
    assert data.rstrip().endswith(f"--{nodes.MIME_BOUNDARY}--")


def test_taints_and_labels() -> None:
    taints = nodes.pool_taints(True, {"team": ("ml", "NoExecute"), "nvidia.com/gpu": ("x", "NoSchedule")})
    assert taints == (
        nodes.Taint("nvidia.com/gpu", "true", "NO_SCHEDULE"),
        nodes.Taint("team", "ml", "NO_EXECUTE"),
    )
    assert nodes.pool_taints(False, {}) == ()
    assert nodes.pool_labels("train", {"a": "b"}, True) == {
        "aiplat.io/pool": "train",
        "vpc.amazonaws.com/efa.present": "true",
        "a": "b",
    }
    with pytest.raises(ValueError, match="set by the platform"):
        nodes.pool_labels("x", {"aiplat.io/pool": "y"}, False)


@pytest.mark.parametrize(
    ("name", "limit", "expected_len"),
    [("aiplat-prod-train-system", 63, 24), ("a" * 70, 63, 63), ("b" * 200, 100, 100)],
)
def test_fit(name: str, limit: int, expected_len: int) -> None:
    out = naming.fit(name, limit)
    assert len(out) == expected_len
    assert (out == name) == (len(name) <= limit)
    assert naming.fit("a" * 70, 63) != naming.fit("a" * 69 + "b", 63)
