"""The training capability's documents modules: pure builders: IAM JSON, chart values, Kubernetes objects."""
