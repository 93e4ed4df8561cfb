"""The aiplat CrossGuard policy pack's rules, importable without starting the policy server.

``aiplat_policies.pack.policies()`` builds the policy objects; ``policies/__main__.py`` hands them to
``PolicyPack`` (which starts the gRPC server the Pulumi engine talks to). The modules need the repository
root on ``sys.path`` for the pure modules of ``infra`` (core, config, rules, documents: the checks they
share with the plan).
"""
