"""The aiplat policy pack: ``pulumi preview --policy-pack policies``. Only builds the PolicyPack.

The rules live in ``aiplat_policies`` (importable without starting the policy server). They share checks
with the plan through the pure modules of ``infra`` (core, config, rules, documents), so the repository
root goes on ``sys.path`` first (the pack's own virtualenv does not install the project).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiplat_policies.pack import DESCRIPTION, PACK_NAME, policies  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

# Each rule sets its own enforcement level; MANDATORY is the level of any rule that does not.
PolicyPack(
    name=PACK_NAME,
    policies=policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description=DESCRIPTION,
)
