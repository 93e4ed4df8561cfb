"""The rules layer: small named checks returning findings, registered for the phases that use them.

Importing this package registers every rule module. Pure: rules read the config, AWS facts and the other
stacks as data and never do I/O.
"""

from infra.bootstrap import rules as bootstrap  # noqa: F401
from infra.cluster import rules as cluster  # noqa: F401
from infra.edge import rules as edge  # noqa: F401
from infra.fsx import rules as fsx  # noqa: F401
from infra.inference import rules as inference  # noqa: F401
from infra.keys import rules as keys  # noqa: F401
from infra.logs import rules as logs  # noqa: F401
from infra.mirror import rules as mirror  # noqa: F401
from infra.network import rules as network  # noqa: F401
from infra.opencost import rules as opencost  # noqa: F401
from infra.pools import rules as pools  # noqa: F401
from infra.preflight import rules as preflight  # noqa: F401
from infra.queueing import rules as queueing  # noqa: F401
from infra.services import rules as services  # noqa: F401
from infra.stack import allowlist_rules as allowlists  # noqa: F401
from infra.stack import cross_stack as stacks  # noqa: F401
from infra.stack import regions  # noqa: F401
from infra.stack.registry import Finding, Level, Need, Phase, Rule, RuleContext, registered, run_rules
from infra.storage import rules as storage  # noqa: F401
from infra.training import rules as training  # noqa: F401

__all__ = ["Finding", "Level", "Need", "Phase", "Rule", "RuleContext", "registered", "run_rules"]
