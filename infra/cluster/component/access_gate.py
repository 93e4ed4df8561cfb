"""KubernetesAccessGate: the first Kubernetes object of the stack, and the one place ``pulumi up`` stops
when it cannot reach the cluster's API.

The gate is a ConfigMap (``kube-system/aiplat-cluster-services``) listing the pinned cluster services. Its
``endpoint`` entry is the checked API endpoint: the wiring hands in an Output that, under ``pulumi up``,
connects to the endpoint first and fails with an explanation (private endpoint: run from inside the VPC,
or switch ``cluster_services.kubernetes_access``) instead of a provider timeout much later. Every other
Kubernetes component depends on the gate, so none of them is sent to an unreachable cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.core.namespaces import PART_OF
from infra.resources.options import child_options

CONFIGMAP = "aiplat-cluster-services"


@dataclass(frozen=True, kw_only=True)
class KubernetesAccessGateArgs:
    """``checked_endpoint``: the API endpoint, resolved only once it answered (see the module docstring);
    ``versions``: service -> pinned chart, recorded in the ConfigMap for ``kubectl`` readers."""

    namespace: str
    checked_endpoint: pulumi.Input[str]
    versions: Mapping[str, str]


class KubernetesAccessGate(pulumi.ComponentResource):
    """A ConfigMap that exists only once the API endpoint answered; what depends on it waits for it."""

    def __init__(self, name: str, args: KubernetesAccessGateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:access_gate:KubernetesAccessGate", name, None, opts)
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=CONFIGMAP, namespace=args.namespace, labels=PART_OF),
            data={"endpoint": args.checked_endpoint, **dict(sorted(args.versions.items()))},
            opts=child_options(self, opts),
        )
        self.register_outputs({})
