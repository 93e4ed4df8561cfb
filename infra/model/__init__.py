"""The model layer: the stack config schema, AWS fact types, project names and user errors.

Pure: nothing here reads files, calls AWS or imports Pulumi. Every other layer may import it.
"""
