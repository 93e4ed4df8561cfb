"""EKS control-plane settings the cluster component and the policy pack agree on. Pure, no Pulumi."""

from __future__ import annotations

# Every control-plane log type: https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
