"""The stack config schema composed of the capabilities' sections, its parser (one-line errors) and
its generated reference. It sits above every capability whose section it composes (the import
contracts in pyproject.toml); the capabilities name ``PlatformConfig`` in annotations only."""
