"""The launcher of the model-name router image (images/router/Dockerfile): vllm-router plus its backends."""
