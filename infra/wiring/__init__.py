"""The wiring layer: stack config + AWS facts -> component arguments, one module per capability.

Each ``wire_*`` function creates components (never raw resources) and records the stack outputs it owns in
``StackContext.exports``; ``infra/program.py`` calls them in order.
"""
