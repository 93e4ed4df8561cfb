"""The model-name router in front of the vLLM servers (vllm-project/router; docs/inference/router.md)."""
