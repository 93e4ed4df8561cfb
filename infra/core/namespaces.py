"""Workload namespaces as data: Pod Security Standards labels and NetworkPolicies. Pure, no Pulumi.

Each workload namespace gets the strictest Pod Security Standard its workloads allow (enforced; the
stricter ``restricted`` is still warned about and audited where it is not enforced) and a default-deny
NetworkPolicy with the allows the workload needs. The VPC CNI enforces NetworkPolicies once its
``enableNetworkPolicy`` is on (EksCluster's vpc-cni configuration).

- Pod Security Standards: https://kubernetes.io/docs/concepts/security/pod-security-standards/
- PSA labels: https://kubernetes.io/docs/concepts/security/pod-security-admission/
- VPC CNI network policies: https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html

The workload namespaces (trainer, publisher, inference, teams) send HTTPS only to ``https_egress_cidrs``:
the interface endpoints' own subnets (STS, ECR, CloudWatch Logs, KMS ...; infra/network/documents/cidr.py),
the CIDRs of the region's S3 prefix list and ``network.workload_egress_cidrs``. A NetworkPolicy cannot name
the endpoints' security group, so the endpoints live in subnets of their own. S3 traffic through the
gateway endpoint keeps S3's public addresses (the endpoint is a route to the prefix list, not an address
in the VPC), and an ``ipBlock`` cannot name a prefix list: the program reads the list's CIDRs
(``getPrefixList``) on every ``pulumi up``.
When AWS adds a range to the list, pods reach it after the next ``pulumi up``.
https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html
The cluster services' namespaces (monitoring, exporters, KEDA) keep HTTPS to anywhere: they talk to the
Kubernetes API through its service address and to AWS APIs that have no endpoint here.

Every ``ipBlock`` that admits the internet excepts the instance metadata address 169.254.169.254/32: with
hop limit 1 pods cannot get an IMDSv2 token anyway, the policy is the second lock. (EKS Pod Identity's
agent at 169.254.170.23:80 is not admitted either: workload pods use IRSA.)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from infra.core.labels import WORKLOADS_LABEL

IMDS_CIDR = "169.254.169.254/32"
ANYWHERE = "0.0.0.0/0"
PSS_LABEL_PREFIX = "pod-security.kubernetes.io/"  # PSA labels: <prefix><mode>, <prefix><mode>-version
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
PART_OF = {"app.kubernetes.io/part-of": "aiplat"}
# The node agents' own namespace, the only one at Pod Security ``privileged``: node-exporter (host network,
# PID and root file system), dcgm-exporter (SYS_ADMIN, the kubelet's pod-resources socket), the EFA exporter
# (the host's sysfs) and the log collector (infra/logs: the host's /var/log and its offsets). Prometheus,
# Alertmanager and Grafana stay in the monitoring namespace at ``baseline``.
EXPORTERS_NAMESPACE = "node-exporters"
# Ports Prometheus scrapes there over the pod network: dcgm-exporter (NVIDIA/dcgm-exporter chart values
# service.port / the exporter's --address :9400), aiplat's EFA exporter (infra/monitoring/documents.py) and
# Fluent Bit's HTTP server (fluent-bit chart values metricsPort). node-exporter listens on the host network,
# which NetworkPolicies do not govern.
LOG_COLLECTOR_PORT = 2020
EXPORTER_PORTS = (9400, 9809, LOG_COLLECTOR_PORT)
# vpc-cni add-on configuration that turns on NetworkPolicy enforcement (the node agent in aws-node; the
# policy controller runs in the EKS control plane). aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml
# (enableNetworkPolicy, v1.23.1);
# https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
VPC_CNI_NETWORK_POLICY = {"enableNetworkPolicy": "true"}
# The AWS Load Balancer Controller adds a readiness gate (target healthy in the ALB's target group) to pods
# created in namespaces with this label, so a rollout never removes old pods before the ALB sends to the new
# ones. kubernetes-sigs/aws-load-balancer-controller docs/deploy/pod_readiness_gate.md (v3.5.0)
READINESS_GATE_LABEL = ("elbv2.k8s.aws/pod-readiness-gate-inject", "enabled")
# The label the Prometheus operator puts on every Prometheus server pod it runs (kube-prometheus-stack's
# one Prometheus in the monitoring namespace): prometheus-operator pkg/prometheus/statefulset.go pod labels.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}


class PodSecurity(StrEnum):
    privileged = "privileged"
    baseline = "baseline"
    restricted = "restricted"


def pss_labels(enforce: PodSecurity, kubernetes_version: str) -> dict[str, str]:
    """PSA labels: enforce ``enforce``; warn and audit at ``restricted``; every level pinned to the
    cluster's minor so that a control-plane upgrade does not tighten the checks unannounced."""
    version = f"v{kubernetes_version}"
    labels = {}
    for mode, level in (
        ("enforce", enforce),
        ("warn", PodSecurity.restricted),
        ("audit", PodSecurity.restricted),
    ):
        labels[f"{PSS_LABEL_PREFIX}{mode}"] = level.value
        labels[f"{PSS_LABEL_PREFIX}{mode}-version"] = version
    return labels


@dataclass(frozen=True, kw_only=True)
class PortRange:
    """TCP ``port`` .. ``end_port`` (inclusive), or a named container port (``name``)."""

    port: int | str
    end_port: int | None = None

    def as_policy_port(self) -> dict[str, Any]:
        out: dict[str, Any] = {"protocol": "TCP", "port": self.port}
        if self.end_port is not None and self.end_port != self.port:
            out["endPort"] = self.end_port
        return out


@dataclass(frozen=True, kw_only=True)
class WorkloadNamespace:
    """One workload namespace: its Pod Security level (with the reason where not ``restricted``) and what
    its NetworkPolicies allow besides DNS and HTTPS egress."""

    name: str
    pod_security: PodSecurity
    reason: str = ""
    # pods of the namespace talk to each other (e.g. NCCL bootstrap and torchrun rendezvous)
    intra_namespace: bool = False
    # ports the monitoring namespace may scrape
    scrape_ports: tuple[PortRange, ...] = ()
    # only the monitoring namespace's pods with these labels may scrape them (empty: every pod of it)
    scrapers: Mapping[str, str] = field(default_factory=dict)
    # egress to all ports of these CIDRs (monitoring scrapes nodes and pods across the VPC)
    egress_cidrs: tuple[str, ...] = ()
    # egress to (namespace, TCP port), e.g. MinIO's S3 API
    egress_services: tuple[tuple[str, int], ...] = ()
    # labels besides Pod Security's (e.g. the load balancer controller's readiness gate injection)
    labels: Mapping[str, str] = field(default_factory=dict)
    # where its pods may send HTTPS (``https_egress_cidrs`` for the workloads)
    https_egress: tuple[str, ...] = (ANYWHERE,)

    def __post_init__(self) -> None:
        if self.pod_security is not PodSecurity.restricted and not self.reason:
            raise ValueError(f"namespace {self.name}: say why it is not 'restricted'")


def namespace_selector(name: str) -> dict[str, Any]:
    """A NetworkPolicy peer: every pod of namespace ``name`` (by the label the API server sets)."""
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def _tcp(*ports: int | str) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def https_egress_cidrs(
    *, endpoint_cidrs: Sequence[str], s3_cidrs: Sequence[str], allowed: Sequence[str]
) -> tuple[str, ...]:
    """Where a workload pod may send HTTPS: the interface endpoints' subnets (not the rest of the VPC: no
    node, load balancer or other pod), S3's ranges in the region and the configured allow-list, each once."""
    if not s3_cidrs:
        raise ValueError("no CIDRs for the region's S3 prefix list: the workload pods could not reach S3")
    if not endpoint_cidrs:
        raise ValueError("no interface endpoint subnets: the workload pods could not reach STS, ECR or KMS")
    return tuple(dict.fromkeys([*endpoint_cidrs, *s3_cidrs, *allowed]))


def _ip_block(cidr: str) -> dict[str, Any]:
    net, imds = ipaddress.ip_network(cidr, strict=False), ipaddress.ip_network(IMDS_CIDR)
    if net.version == imds.version and imds.subnet_of(net):  # type: ignore[arg-type]
        return {"ipBlock": {"cidr": cidr, "except": [IMDS_CIDR]}}
    return {"ipBlock": {"cidr": cidr}}


def baseline_policies(https_egress: Sequence[str] = (ANYWHERE,)) -> dict[str, dict[str, Any]]:
    """The policies every namespace of ours starts with (name -> spec).

    - ``default-deny``: selects every pod, no rule: nothing in or out unless another policy allows it.
    - ``allow-dns``: UDP/TCP 53 to CoreDNS (``k8s-app=kube-dns`` in kube-system).
    - ``allow-https-egress``: TCP 443 to ``https_egress`` (the workloads: ``https_egress_cidrs``; the
      cluster services: anywhere), never IMDS.
    """
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "allow-dns": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {
                            **namespace_selector("kube-system"),
                            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                        }
                    ],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                }
            ],
        },
        "allow-https-egress": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [_ip_block(c) for c in https_egress], "ports": _tcp(443)}],
        },
    }


def same_namespace_policy() -> dict[str, Any]:
    """All traffic between the namespace's own pods (``allow-same-namespace``)."""
    return {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
        "egress": [{"to": [{"podSelector": {}}]}],
    }


def ingress_from_namespace_policy(namespace: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    """Ingress from every pod of ``namespace`` to ``ports`` (NetworkPolicyPort dicts)."""
    return {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [namespace_selector(namespace)], "ports": ports}],
    }


def egress_to_namespace_policy(namespace: str, port: int) -> dict[str, Any]:
    """Egress to TCP ``port`` of every pod of ``namespace``."""
    return {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [{"to": [namespace_selector(namespace)], "ports": _tcp(port)}],
    }


def network_policies(ns: WorkloadNamespace, *, monitoring_namespace: str) -> dict[str, dict[str, Any]]:
    """NetworkPolicy name -> spec for ``ns``: ``baseline_policies()``, then one allow per need.

    - ``allow-same-namespace``: all traffic between the namespace's pods, where the workload needs it.
    - ``allow-metrics-scrape``: the monitoring namespace may reach the scrape ports.
    - ``allow-vpc-egress``: all ports to the VPC (monitoring: kubelets, node exporters, pods).
    - ``allow-to-<ns>``: egress to another namespace's service port (MinIO).
    """
    policies = baseline_policies(ns.https_egress)
    if ns.intra_namespace:
        policies["allow-same-namespace"] = same_namespace_policy()
    if ns.scrape_ports:
        policies["allow-metrics-scrape"] = ingress_from_namespace_policy(
            monitoring_namespace, [p.as_policy_port() for p in ns.scrape_ports]
        )
        if ns.scrapers:
            (rule,) = policies["allow-metrics-scrape"]["ingress"]
            pods = {"podSelector": {"matchLabels": dict(ns.scrapers)}}
            rule["from"] = [{**namespace_selector(monitoring_namespace), **pods}]
    if ns.egress_cidrs:
        policies["allow-vpc-egress"] = {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": c}} for c in ns.egress_cidrs]}],
        }
    for target, port in ns.egress_services:
        policies[f"allow-to-{target}"] = egress_to_namespace_policy(target, port)
    return policies


def workload_namespaces(
    *,
    trainer: str | None,
    inference: str | None,
    monitoring: str,
    vpc_cidr: str,
    trainer_metrics_ports: tuple[int, int],
    s3_services: Sequence[tuple[str, int]] = (),
    publisher: str | None = None,
    https_egress: Sequence[str] = (ANYWHERE,),
) -> list[WorkloadNamespace]:
    """The stack's workload namespaces (``trainer``/``inference``/``publisher``: the namespace, or None if
    not here).

    ``publisher``: the release publisher's own namespace, ``restricted`` (the trainer image, uid 10001),
    a workload namespace like the trainer's, nothing scraped.

    ``trainer`` namespace: ``restricted``: the trainer image runs as uid 10001 with no capability (EFA's
    locked memory comes from the container runtime, the devices from the device plugin), and the runtime
    sets the restricted profile's fields (``infra/training/documents/runtime.py``). ``inference``:
    ``restricted`` (the server runs as non-root; GPUs come through the device plugin, which needs no
    privilege in the pod). Both carry ``aiplat.io/workloads: "true"``: the admission policies
    (``infra/admission``) govern their pods.
    ``monitoring``: ``baseline``: Prometheus, Alertmanager, Grafana and the operator need no privilege;
    the node exporters run in ``EXPORTERS_NAMESPACE``, ``privileged``, scraped from monitoring only.
    """
    out: list[WorkloadNamespace] = []
    if trainer is not None:
        out.append(
            WorkloadNamespace(
                name=trainer,
                pod_security=PodSecurity.restricted,
                intra_namespace=True,
                scrape_ports=(PortRange(port=trainer_metrics_ports[0], end_port=trainer_metrics_ports[1]),),
                egress_services=tuple(s3_services),
                labels=dict([WORKLOADS_LABEL]),
                https_egress=tuple(https_egress),
            )
        )
    if publisher is not None and publisher != trainer:
        out.append(
            WorkloadNamespace(
                name=publisher,
                pod_security=PodSecurity.restricted,
                egress_services=tuple(s3_services),
                labels=dict([WORKLOADS_LABEL]),
                https_egress=tuple(https_egress),
            )
        )
    if inference is not None:
        out.append(
            WorkloadNamespace(
                name=inference,
                pod_security=PodSecurity.restricted,
                # the inference server names its metrics container port "metrics"; only Prometheus scrapes it
                # (the port is vLLM's API too: nothing else of the monitoring namespace reaches it)
                scrape_ports=(PortRange(port="metrics"),),
                scrapers=PROMETHEUS_POD_LABELS,
                egress_services=tuple(s3_services),
                # the ALB sends to the inference pods by IP: readiness gates keep rollouts gapless
                labels=dict([READINESS_GATE_LABEL, WORKLOADS_LABEL]),
                https_egress=tuple(https_egress),
            )
        )
    out.append(
        WorkloadNamespace(
            name=monitoring,
            pod_security=PodSecurity.baseline,
            reason="upstream charts (kube-prometheus-stack, Grafana) are not all configured for restricted",
            intra_namespace=True,
            egress_cidrs=(vpc_cidr,),
        )
    )
    out.append(
        WorkloadNamespace(
            name=EXPORTERS_NAMESPACE,
            pod_security=PodSecurity.privileged,
            reason="node-exporter (host network/PID/root fs), dcgm-exporter (SYS_ADMIN, host path), EFA "
            "exporter (host sysfs), Fluent Bit (host /var/log)",
            scrape_ports=tuple(PortRange(port=p) for p in EXPORTER_PORTS),
        )
    )
    return out
