"""Pulumi ComponentResources, one concern per module (``aws/``, ``k8s/``).

A component imports only ``infra.lib`` and takes a frozen ``<Name>Args`` of plain values; it never reads
the stack config, facts or files (the wiring derives its arguments).
"""
