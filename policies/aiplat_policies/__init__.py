"""The aiplat CrossGuard policy pack's rules, importable without starting the policy server.

``aiplat_policies.pack.policies()`` builds the policy objects; ``policies/__main__.py`` hands them to
``PolicyPack`` (which starts the gRPC server the Pulumi engine talks to). The modules need the repository
root on ``sys.path`` for ``infra.model`` / ``infra.rules`` / ``infra.lib`` (the pure layers whose checks they
share with the plan).
"""
