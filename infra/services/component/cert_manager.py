"""CertManager: cert-manager and the cluster CA ClusterIssuer that signs in-cluster TLS (MinIO's today).

Order: namespace -> release (CRDs and webhook ready) -> self-signed ClusterIssuer -> CA Certificate -> CA
ClusterIssuer. The documents come from ``infra/core/certs.py`` and ``infra/core/kube.py``.
https://cert-manager.io/docs/installation/helm/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.component.namespaces import own_namespace
from infra.core import certs
from infra.core.charts import ChartRef
from infra.core.namespaces import PART_OF
from infra.resources.helm import chart_release
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class CertManagerArgs:
    chart: ChartRef
    namespace: str
    namespace_labels: Mapping[str, str]
    values: Mapping[str, Any]
    ca_issuer: str
    ca_duration_hours: int


class CertManager(pulumi.ComponentResource):
    """cert-manager (Helm) in its own ``restricted`` namespace, and the ``ca_issuer`` ClusterIssuer."""

    ca_issuer_name: pulumi.Output[str]

    def __init__(self, name: str, args: CertManagerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:cert_manager:CertManager", name, None, opts)
        ns = own_namespace(
            f"{name}-namespace",
            name=args.namespace,
            labels=args.namespace_labels,
            opts=child_options(self, opts),
        )
        self.release: k8s.helm.v3.Release = chart_release(
            f"{name}-release",
            release_name="cert-manager",
            chart=args.chart,
            namespace=args.namespace,
            values=args.values,
            opts=child_options(self, opts, depends_on=[ns]),
        )
        bootstrap_name = f"{args.ca_issuer}-bootstrap"
        secret_name = f"{args.ca_issuer}-root"
        bootstrap = k8s.apiextensions.CustomResource(
            f"{name}-bootstrap-issuer",
            api_version=certs.API_VERSION,
            kind="ClusterIssuer",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=bootstrap_name, labels=PART_OF),
            spec=certs.self_signed_issuer_spec(),
            opts=child_options(self, opts, depends_on=[self.release]),
        )
        ca = k8s.apiextensions.CustomResource(
            f"{name}-ca-certificate",
            api_version=certs.API_VERSION,
            kind="Certificate",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=args.namespace, labels=PART_OF),
            spec=certs.ca_certificate_spec(
                common_name=args.ca_issuer,
                secret_name=secret_name,
                issuer=bootstrap_name,
                duration_hours=args.ca_duration_hours,
            ),
            opts=child_options(self, opts, depends_on=[bootstrap]),
        )
        self.ca_issuer = k8s.apiextensions.CustomResource(
            f"{name}-ca-issuer",
            api_version=certs.API_VERSION,
            kind="ClusterIssuer",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.ca_issuer, labels=PART_OF),
            spec=certs.ca_issuer_spec(secret_name),
            opts=child_options(self, opts, depends_on=[ca]),
        )
        # the name, once the issuer exists (what depends on it waits for it)
        self.ca_issuer_name = self.ca_issuer.id.apply(lambda _: args.ca_issuer)
        self.register_outputs({"ca_issuer_name": self.ca_issuer_name})
