"""The inference capability's documents modules: pure builders: IAM JSON, chart values, Kubernetes objects."""
