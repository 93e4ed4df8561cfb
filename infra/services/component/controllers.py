"""The AWS Load Balancer Controller and metrics-server: one Helm release each, values from
``infra/services/documents/``.

- Load balancer controller: https://docs.aws.amazon.com/eks/latest/userguide/aws-load-balancer-controller.html
  (its IRSA role is ``infra/services/component/lbc_role.py``; subnets carry the ``kubernetes.io/role/elb`` and
  ``internal-elb`` tags it discovers them by). The chart's ``crds/`` folder is installed on first install
  only; docs/platform/cluster-services.md says how to upgrade the CRDs with a new version.
- metrics-server: the ``metrics.k8s.io`` API that HorizontalPodAutoscalers read.
"""

from __future__ import annotations

from infra.resources.helm import ChartComponent


class LoadBalancerController(ChartComponent):
    """The AWS Load Balancer Controller (Ingress -> ALB, Service type LoadBalancer -> NLB)."""

    TYPE = "aiplat:controllers:LoadBalancerController"


class MetricsServer(ChartComponent):
    """metrics-server for HorizontalPodAutoscalers and ``kubectl top``."""

    TYPE = "aiplat:controllers:MetricsServer"
