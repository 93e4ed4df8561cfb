"""Chart values of the AWS Load Balancer Controller. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.core.kube import IRSA_ANNOTATION
from infra.pools.documents.nodes import pool_affinity
from infra.services.documents import lbc_iam


def load_balancer_controller_values(
    *,
    cluster_name: str,
    region: str,
    vpc_id: Any,
    role_arn: Any,
    replicas: int,
    ssl_policy: str,
    system_pools: Sequence[str],
) -> dict[str, Any]:
    """aws/eks-charts ``stable/aws-load-balancer-controller`` 3.5.0 values.

    ``vpc_id`` and ``role_arn`` are placed as given (possibly deploy-time values), so the rest stays known at
    preview. ``region`` and ``vpcId`` are set because pods cannot reach instance metadata (hop limit 1,
    NetworkPolicies); the chart's service account carries the IRSA role (``lbc_iam.POLICY``); the security
    context adds what PSS ``restricted`` needs beyond the chart's default.

    ``enableServiceMutatorWebhook`` is off: at 3.5.0 it is a ``failurePolicy: Fail`` webhook on CREATE of
    every Service (``values.yaml`` l.484-490, ``templates/webhook.yaml`` l.104-146), so while the controller
    starts every other release's Service create fails and rolls back; it only defaults new LoadBalancer
    Services to this controller, and the platform creates none (inference uses an Ingress). Source, commit
    5239609: https://github.com/aws/eks-charts/blob/master/stable/aws-load-balancer-controller/values.yaml
    """
    return {
        "clusterName": cluster_name,
        "enableServiceMutatorWebhook": False,
        "region": region,
        "vpcId": vpc_id,
        "replicaCount": replicas,
        "serviceAccount": {
            "create": True,
            "name": lbc_iam.SERVICE_ACCOUNT,
            "annotations": {IRSA_ANNOTATION: role_arn},
        },
        "defaultSSLPolicy": ssl_policy,
        "affinity": pool_affinity(system_pools),
        "podDisruptionBudget": {"maxUnavailable": 1},
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
