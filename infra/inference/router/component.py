"""InferenceRouter: the model-name router between the ALB and the vLLM servers (vllm-router in its
multi-model mode): the ConfigMap of its backends, its Deployment, Service and PodDisruptionBudget, the
NetworkPolicies that let the ALB reach it, it reach the vLLM pods and Prometheus scrape it, and its
PodMonitor.
Documents from ``infra/inference/router/documents.py``.

The Deployment comes after the Ingress that names the router's Service (``deployment_after``): the load
balancer controller adds its readiness gate only to pods created once the Ingress exists
(aws-load-balancer-controller docs/deploy/pod_readiness_gate.md, v3.5.0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from infra.inference.router import documents as rd
from infra.monitoring import documents as mon
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class InferenceRouterArgs:
    """The router (``spec``, ``image``) in ``namespace``, its backends' Services in ``backend_namespace``
    (their pods selected by ``backend_selector``, API port ``backend_port``), the CIDRs the ALB sends from,
    Prometheus's namespace (None: no PodMonitor, no scrape policy) and the job name it scrapes as."""

    namespace: str
    spec: rd.RouterSpec
    image: pulumi.Input[str]
    backend_selector: Mapping[str, str]
    backend_port: str
    load_balancer_cidrs: Sequence[str]
    monitoring_namespace: str | None
    metrics_job: str = "aiplat-inference-router"
    deployment_after: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # what the PodMonitor waits for: the prometheus-operator CRDs' release
    pod_monitor_after: Sequence[pulumi.Resource] = field(default_factory=tuple)


class InferenceRouter(pulumi.ComponentResource):
    """The router of one region; ``service_name`` is the Service the Ingress sends to."""

    service_name: str

    def __init__(self, name: str, args: InferenceRouterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:inference:InferenceRouter", name, None, opts)
        ns, s = args.namespace, args.spec
        labels = dict(rd.LABELS)

        def meta(obj: str, extra: Mapping[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=obj, namespace=ns, labels={**labels, **(extra or {})})

        def policy(obj: str, spec: dict) -> k8s.networking.v1.NetworkPolicy:
            return k8s.networking.v1.NetworkPolicy(
                f"{name}-{obj}", metadata=meta(obj), spec=spec, opts=child_options(self, opts)
            )

        self.backends = k8s.core.v1.ConfigMap(
            f"{name}-backends",
            metadata=meta(rd.NAME),
            data=rd.backends_data(s.backends, ns),
            opts=child_options(self, opts),
        )
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=meta(rd.NAME), spec=rd.service_spec(), opts=child_options(self, opts)
        )
        self.service_name = rd.NAME
        servers, port = dict(args.backend_selector), args.backend_port
        specs = {
            "router-from-load-balancer": rd.from_load_balancer_policy(args.load_balancer_cidrs),
            "router-to-servers": rd.to_backends_policy(servers, port),
            "servers-from-router": rd.backends_from_router_policy(servers, port),
        }
        if args.monitoring_namespace is not None:
            specs["router-metrics-scrape"] = rd.metrics_scrape_policy(args.monitoring_namespace)
        self.policies = [policy(obj, spec) for obj, spec in specs.items()]
        self.pod_monitor = None
        if args.monitoring_namespace is not None:
            self.pod_monitor = k8s.apiextensions.CustomResource(
                f"{name}-podmonitor",
                api_version=mon.MONITORING_API,
                kind="PodMonitor",
                metadata=meta(rd.NAME, mon.SELECT),
                spec=rd.pod_monitor_spec(args.metrics_job),
                opts=child_options(self, opts, depends_on=args.pod_monitor_after),
            )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(rd.NAME),
            spec=rd.deployment_spec(s, image=args.image),
            opts=child_options(
                self, opts, depends_on=[self.backends, self.service, *self.policies, *args.deployment_after]
            ),
        )
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=meta(rd.NAME), spec=rd.pdb_spec(), opts=child_options(self, opts)
        )
        self.register_outputs({})
