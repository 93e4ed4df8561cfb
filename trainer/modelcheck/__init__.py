"""Checks of a model folder against its architecture's own definition (torch, transformers), each run
in a process of its own."""
