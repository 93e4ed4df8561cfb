"""Kubernetes ComponentResources (pulumi-kubernetes), applied through the cluster's Kubernetes provider."""
