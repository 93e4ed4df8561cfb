"""``aiplat``: the platform's command line; one module per command, ``main.py`` dispatches."""

from infra.cli.main import main

__all__ = ["main"]
