"""What `aiplat preflight` checks against the live account before `pulumi up`: credentials, region, vCPU
quotas of the pools and Karpenter, capacity reservations, add-on builds, the cluster endpoint."""
