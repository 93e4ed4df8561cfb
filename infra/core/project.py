"""Names that identify this project, defined once.

``PROJECT`` must equal ``name`` in ``Pulumi.yaml`` (a test checks it): it is the Pulumi project name, the
namespace of the stack config (``aiplat:platform``) and the ``app.kubernetes.io/part-of`` label value.
"""

from __future__ import annotations

PROJECT = "aiplat"
CONFIG_NAMESPACE = PROJECT
CONFIG_KEY = f"{CONFIG_NAMESPACE}:platform"
# The documentation site (mkdocs.yml ``site_url``, a test keeps them equal): the default base of every
# alert's runbook URL (``monitoring.docs_url``).
DOCS_URL = "https://aiplat.github.io/aiplat/"
# What self-managed (DIY) backends call every organization; Pulumi Cloud uses the account's org name.
DEFAULT_ORGANIZATION = "organization"
# Keys a stack file may hold besides ours. The AWS provider is configured explicitly from
# aiplat:platform.region, so 'aws:region' is refused to keep one source of truth.
ALLOWED_FOREIGN_KEYS = frozenset({"pulumi:disable-default-providers", "pulumi:tags"})


def stack_reference_name(organization: str | None, stack: str) -> str:
    """``<organization>/<project>/<stack>``: how one stack of this project names another."""
    return f"{organization or DEFAULT_ORGANIZATION}/{PROJECT}/{stack}"
