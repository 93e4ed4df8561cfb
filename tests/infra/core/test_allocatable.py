"""The allocatable-memory estimate against AWS's published per-type pod limits (eni-max-pods)."""

from __future__ import annotations

import pytest

from infra.core import allocatable
from infra.io import snapshot


@pytest.mark.parametrize(
    ("instance_type", "pods"),
    # awslabs/amazon-eks-ami templates/shared/runtime/eni-max-pods.txt (no prefix delegation): the default
    # network card's ENIs x (IPv4 addresses per ENI - 1) + 2; p4d.24xlarge has 4 cards, only card 0 counts
    [("m5.large", 29), ("m6i.xlarge", 58), ("m6i.2xlarge", 58), ("p4d.24xlarge", 737)],
)
def test_max_pods_follow_the_eni_limit(instance_type, pods) -> None:
    facts = snapshot.instance_facts(instance_type)
    assert facts is not None and facts.ipv4_addresses_per_interface > 0  # answered by the snapshot
    assert allocatable.max_pods(facts) == pods


def test_allocatable_of_m6i_2xlarge() -> None:
    facts = snapshot.instance_facts("m6i.2xlarge")
    assert facts is not None
    # 32768 MiB less 7.5% VM overhead = 30310; kubeReserved 11 x 58 + 255 = 893; eviction 100
    assert allocatable.kube_reserved_memory_mib(facts) == 893
    assert allocatable.allocatable_memory_mib(facts) == 29317


def test_bin_packing_never_splits_a_pod() -> None:
    assert allocatable.pods_that_fit([29317, 29317], 16384) == 2
    assert allocatable.pods_that_fit([29317, 29317], 2048) == 28
    assert allocatable.largest_request_that_fits([29317, 29317], 4) == 14658
    assert allocatable.largest_request_that_fits([100], 200) == 0
    with pytest.raises(ValueError):
        allocatable.pods_that_fit([100], 0)
