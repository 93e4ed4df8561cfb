"""Queueing: Kueue, the teams' namespaces, queues, quotas and identities, and the GPU flavors."""
