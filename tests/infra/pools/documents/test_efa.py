"""EFA interface layout derived from the AWS facts of each type."""

from __future__ import annotations

import pytest

from infra.io import snapshot as awsdata
from infra.pools.documents.efa import EFA, EFA_ONLY, efa_layout, max_efa_interfaces


def facts(t: str) -> awsdata.InstanceFacts:
    f = awsdata.instance_facts(t)
    assert f is not None
    return f


@pytest.mark.parametrize(
    ("itype", "count", "further"),
    [
        ("p5.48xlarge", 32, EFA_ONLY),
        ("p5e.48xlarge", 32, EFA_ONLY),
        ("p5en.48xlarge", 16, EFA_ONLY),
        ("p6-b200.48xlarge", 8, EFA_ONLY),
        ("p4d.24xlarge", 4, EFA),
        ("g6e.48xlarge", 4, EFA),
        ("g5.48xlarge", 1, None),
    ],
)
def test_layout_per_family(itype: str, count: int, further: str | None) -> None:
    f = facts(itype)
    assert max_efa_interfaces(f) == count == min(f.max_efa_interfaces, f.max_network_cards)
    layout = efa_layout(f)
    assert len(layout) == count
    primary = layout[0]
    assert (primary.network_card_index, primary.device_index, primary.interface_type) == (0, 0, EFA)
    assert primary.primary and not any(i.primary for i in layout[1:])
    # every further interface: the next network card, device index 1
    assert [i.network_card_index for i in layout] == list(range(count))
    assert {i.device_index for i in layout[1:]} <= {1}
    assert {i.interface_type for i in layout[1:]} == ({further} if further else set())


def test_fewer_interfaces_on_request() -> None:
    layout = efa_layout(facts("p5.48xlarge"), 8)
    assert [i.network_card_index for i in layout] == list(range(8))


@pytest.mark.parametrize(
    ("itype", "count", "message"),
    [
        ("g5.xlarge", None, "does not support EFA"),
        ("p5.48xlarge", 33, "takes 1 to 32 EFA interfaces, not 33"),
        ("p4d.24xlarge", 0, "takes 1 to 4 EFA interfaces, not 0"),
    ],
)
def test_refused(itype: str, count: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        efa_layout(facts(itype), count)
