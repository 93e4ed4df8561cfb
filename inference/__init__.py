"""The inference server: serves the newest valid model release (trainer/release.py) over HTTP.

``python -m inference.serve``; the interface (port, probes, settings, metrics, shutdown) is described in
inference/serve.py and in docs/inference/server.md.
"""
