"""The inference side's own code: the release fetch tool (``python -m inference.fetch``), the init container
that puts a verified model release on the node before vLLM serves it (docs/inference/release.md)."""
