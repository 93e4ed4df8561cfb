"""aiplat's additions to the vLLM image (loaded by ``vllm serve --middleware``)."""
