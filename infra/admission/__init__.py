"""Admission rules in the cluster: Kubernetes' built-in ValidatingAdmissionPolicy, no extra controller."""
