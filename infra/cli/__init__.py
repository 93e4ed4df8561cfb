"""``aiplat``: the platform's command line; one module per command, ``main.py`` dispatches."""
