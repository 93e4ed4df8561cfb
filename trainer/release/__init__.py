"""Releases: the manifest, signing, the HF folder reader, vLLM's architectures, the publisher.

Nothing here deserializes anything but JSON and safetensors headers (an import-linter contract)."""
