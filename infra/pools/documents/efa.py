"""EFA network interface layout of a launch template, derived from the instance type's AWS facts. Pure.

One EFA per network card, up to ``EfaInfo.MaximumEfaInterfaces`` (32 on p5/p5e.48xlarge, 16 on
p5en.48xlarge, 4 on p4d.24xlarge, 1 on g5.48xlarge). Layout
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): the primary interface is
card 0, device index 0, type ``efa`` (an EFA-only interface cannot be primary, and node IP traffic needs
the ENA); each further one takes the next card at device index 1, ``efa-only`` for the families of
``infra.core.instance_types.efa_only_past_primary`` (P5 "use case 1": an ENA per card would spend 31 VPC
addresses per node), else ``efa``, and ``efa`` where the facts say a card refuses ``efa-only``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.core.facts import InstanceFacts
from infra.core.instance_types import efa_only_past_primary

EFA = "efa"
EFA_ONLY = "efa-only"


@dataclass(frozen=True)
class EfaInterface:
    """One network interface of the launch template."""

    network_card_index: int
    device_index: int
    interface_type: str

    @property
    def primary(self) -> bool:
        return self.network_card_index == 0 and self.device_index == 0


def max_efa_interfaces(facts: InstanceFacts) -> int:
    """How many EFA interfaces the type takes (``InstanceFacts.efa_interface_limit``)."""
    return facts.efa_interface_limit


def _card_accepts(facts: InstanceFacts, index: int, interface_type: str) -> bool:
    for card in facts.network_cards:
        if card.index == index and card.interface_types:
            return interface_type in card.interface_types
    return True  # the provider's data source does not say; trust the family rule


def efa_layout(facts: InstanceFacts, count: int | None = None) -> tuple[EfaInterface, ...]:
    """The launch template's interfaces for ``count`` EFAs (default: all the type supports).

    Raises ValueError when the type has no EFA or ``count`` is outside 1..max; the config validation
    reports both to the user before this runs.
    """
    return layout_for(
        facts.instance_type,
        max_efa_interfaces(facts),
        count,
        accepts=lambda card, kind: _card_accepts(facts, card, kind),
    )


def layout_for(
    instance_type: str,
    limit: int,
    count: int | None = None,
    *,
    accepts: Callable[[int, str], bool] | None = None,
) -> tuple[EfaInterface, ...]:
    """The layout for a type that takes ``limit`` EFA interfaces; ``accepts(card, type)`` says whether a
    card takes an interface type (default: trust the family rule). The policy pack checks launch
    templates against this, with ``limit`` from the instance-type table."""
    if limit == 0:
        raise ValueError(f"{instance_type} does not support EFA")
    n = limit if count is None else count
    if not 1 <= n <= limit:
        raise ValueError(f"{instance_type} takes 1 to {limit} EFA interfaces, not {n}")
    further = EFA_ONLY if efa_only_past_primary(instance_type) else EFA
    layout = [EfaInterface(0, 0, EFA)]
    for card in range(1, n):
        kind = further if accepts is None or accepts(card, further) else EFA
        layout.append(EfaInterface(card, 1, kind))
    return tuple(layout)
