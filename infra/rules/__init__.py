"""The rules layer: small named checks returning findings, registered for the phases that use them.

Importing this package registers every rule module. Pure: rules read the config, AWS facts and the other
stacks as data and never do I/O.
"""

from infra.rules import (  # noqa: F401  (registration)
    allowlists,
    cluster,
    fsx,
    inference,
    network,
    pools,
    preflight,
    regions,
    services,
    stacks,
    storage,
    training,
)
from infra.rules.base import (
    Finding,
    Level,
    Need,
    Phase,
    Rule,
    RuleContext,
    registered,
    run_rules,
)

__all__ = ["Finding", "Level", "Need", "Phase", "Rule", "RuleContext", "registered", "run_rules"]
