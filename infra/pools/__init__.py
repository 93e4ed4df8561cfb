"""Managed node groups: instance types and their GPU and EFA facts, EFA interfaces, placement groups, capacity
reservations and Capacity Blocks, node settings, Session Manager access, vCPU quotas and the preflight
rules."""
