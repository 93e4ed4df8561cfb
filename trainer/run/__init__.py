"""A run's lifecycle around the loop: launcher, preflight, signals, outcome, run record, ports."""
