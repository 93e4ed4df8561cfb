"""The inference Ingress as data: the AWS Load Balancer Controller's annotations and the Ingress spec. Pure.

Annotation names and value formats are those of the controller v3.5.0
(kubernetes-sigs/aws-load-balancer-controller ``docs/guide/ingress/annotations.md`` at tag v3.5.0, 11eb202c9).
Things that are silently wrong if missing: the controller's own TLS default is ``ELBSecurityPolicy-2016-08``
(TLS 1.0-1.2), an absent ``wafv2-acl-arn`` leaves whatever web ACL is attached in place (``none`` removes
it), and the ALB's 60 s idle timeout would cut a generation that takes longer.

Routes: only the OpenAI paths the server offers, each ``Exact``; everything else (``/metrics``,
``/health``, vLLM's unauthenticated ``/invocations``) gets the ALB's 404. The ALB's health check goes to the
targets directly, not through a route.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PREFIX = "alb.ingress.kubernetes.io/"
INGRESS_CLASS = "alb"  # the chart's ingressClass and IngressClass resource (values.yaml 3.5.0)
HTTPS_PORT = 443
# Seconds the ALB keeps a connection with no bytes on it beyond the longest generation (responses are not
# streamed, so a request is silent until it is answered).
IDLE_MARGIN_S = 30
# Health checks of vLLM's /health (no key needed): a replica takes traffic two checks after its engine is up,
# stops two after not (the readiness probe, which asks /v1/models with a key, removes it sooner).
HEALTH_INTERVAL_S = 10
HEALTH_TIMEOUT_S = 5
HEALTH_THRESHOLD = 2


@dataclass(frozen=True, kw_only=True)
class IngressSpec:
    """What the ALB is: who reaches it, with which certificate and TLS policy, behind which web ACL."""

    internet_facing: bool
    tls_policy: str
    health_path: str
    request_timeout_s: int
    deregistration_delay_s: int
    inbound_cidrs: Sequence[str]
    tags: Mapping[str, str] = field(default_factory=dict)


def _string_map(values: Mapping[str, Any]) -> str:
    """The controller's ``stringMap`` format ``k1=v1,k2=v2`` (no ',' or '=' inside keys or values)."""
    for k, v in values.items():
        if any(c in f"{k}{v}" for c in ",="):
            raise ValueError(f"{k}={v}: ',' and '=' cannot be written in an ALB annotation's stringMap")
    return ",".join(f"{k}={v}" for k, v in values.items())


def ingress_annotations(s: IngressSpec, *, certificate_arn: Any, waf_acl_arn: Any | None) -> dict[str, Any]:
    """Every annotation of the inference Ingress (all strings, as the API requires); ``waf_acl_arn`` None
    detaches any web ACL. The two ARNs are placed as they are (strings, or deploy-time values passed
    without an apply, so the TLS policy and listeners stay known to the policy pack at preview)."""
    annotations = {
        "scheme": "internet-facing" if s.internet_facing else "internal",
        # Pod IPs as targets: the ALB sends straight to the pods (readiness gates work only with ip).
        "target-type": "ip",
        "ip-address-type": "ipv4",
        # HTTPS only: no port-80 listener, not even a redirect (a client's first request to http:// would
        # carry its key in clear text); the controller opens the ALB's security group on this port only.
        "listen-ports": json.dumps([{"HTTPS": HTTPS_PORT}]),
        "certificate-arn": certificate_arn,
        "ssl-policy": s.tls_policy,
        "inbound-cidrs": ",".join(s.inbound_cidrs),
        "backend-protocol": "HTTP",
        "healthcheck-path": s.health_path,
        "healthcheck-port": "traffic-port",
        "healthcheck-interval-seconds": str(HEALTH_INTERVAL_S),
        "healthcheck-timeout-seconds": str(HEALTH_TIMEOUT_S),
        "healthy-threshold-count": str(HEALTH_THRESHOLD),
        "unhealthy-threshold-count": str(HEALTH_THRESHOLD),
        "success-codes": "200",
        "load-balancer-attributes": load_balancer_attributes(s),
        "target-group-attributes": _string_map(
            {
                # A draining target keeps its connections as long as the server keeps serving after SIGTERM.
                "deregistration_delay.timeout_seconds": s.deregistration_delay_s,
                # Generations differ in length: send to the replica with the fewest open requests.
                "load_balancing.algorithm.type": "least_outstanding_requests",
            }
        ),
        "wafv2-acl-arn": waf_acl_arn or "none",
    }
    if s.tags:
        annotations["tags"] = _string_map(s.tags)
    return {PREFIX + k: v for k, v in annotations.items()}


def load_balancer_attributes(s: IngressSpec, access_logs: tuple[str, str] | None = None) -> str:
    """The ALB's attributes (``load-balancer-attributes``); ``access_logs``: (bucket, prefix) where the ALB
    writes its access logs, ``<bucket>/<prefix>/AWSLogs/<account>/elasticloadbalancing/...`` (the bucket in
    the ALB's Region, SSE-S3, with the ELB log-delivery grant: infra/storage/documents.py
    ``load_balancer_log_delivery``).
    https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html"""
    attributes: dict[str, Any] = {
        "idle_timeout.timeout_seconds": s.request_timeout_s + IDLE_MARGIN_S,
        "routing.http.drop_invalid_header_fields.enabled": "true",
    }
    if access_logs is not None:
        bucket, prefix = access_logs
        attributes |= {
            "access_logs.s3.enabled": "true",
            "access_logs.s3.bucket": bucket,
            "access_logs.s3.prefix": prefix,
        }
    return _string_map(attributes)


def ingress_spec(*, host: str, service: str, service_port: str, paths: Sequence[str]) -> dict[str, Any]:
    """``Ingress.spec``: requests for exactly one of ``paths`` on ``host`` go to ``service``; any other
    path or host gets the ALB's 404."""
    backend = {"service": {"name": service, "port": {"name": service_port}}}
    return {
        "ingressClassName": INGRESS_CLASS,
        "rules": [
            {
                "host": host,
                "http": {"paths": [{"path": p, "pathType": "Exact", "backend": backend} for p in paths]},
            }
        ],
    }
