"""Upstream images through the stack region's ECR pull through cache, pinned by digest (issue 33)."""
