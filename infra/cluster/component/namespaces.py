"""WorkloadNamespaces (Pod Security labels, default-deny NetworkPolicies and their allows) and
WorkloadServiceAccounts (service accounts bound to the pods' IAM roles through IRSA).

The documents come from ``infra/core/namespaces.py``; the Kubernetes provider comes in through
``opts.provider`` (the EKS component's ``k8s_provider``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.core.kube import IRSA_ANNOTATION
from infra.core.namespaces import PART_OF
from infra.resources.options import child_options

REASON_ANNOTATION = "aiplat.io/pod-security-reason"


def own_namespace(
    resource_name: str,
    *,
    name: str,
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    annotations: Mapping[str, str] | None = None,
) -> k8s.core.v1.Namespace:
    """A namespace we create: ``app.kubernetes.io/part-of: aiplat`` plus ``labels`` (Pod Security's)."""
    return k8s.core.v1.Namespace(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels={**PART_OF, **labels}, annotations=annotations),
        opts=opts,
    )


@dataclass(frozen=True, kw_only=True)
class NamespaceSpec:
    """One namespace: its labels (Pod Security), why it is not ``restricted``, and NetworkPolicy specs."""

    name: str
    labels: Mapping[str, str]
    reason: str = ""
    network_policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WorkloadNamespacesArgs:
    namespaces: Sequence[NamespaceSpec]


class WorkloadNamespaces(pulumi.ComponentResource):
    """The workload namespaces with their Pod Security labels and NetworkPolicies."""

    names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: WorkloadNamespacesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:namespaces:WorkloadNamespaces", name, None, opts)
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        self.policies: list[k8s.networking.v1.NetworkPolicy] = []
        for spec in args.namespaces:
            ns = own_namespace(
                f"{name}-{spec.name}",
                name=spec.name,
                labels=spec.labels,
                annotations={REASON_ANNOTATION: spec.reason} if spec.reason else None,
                opts=child_options(self, opts),
            )
            self.namespaces[spec.name] = ns
            for policy_name, policy_spec in sorted(spec.network_policies.items()):
                self.policies.append(
                    k8s.networking.v1.NetworkPolicy(
                        f"{name}-{spec.name}-{policy_name}",
                        metadata=k8s.meta.v1.ObjectMetaArgs(
                            name=policy_name, namespace=spec.name, labels=PART_OF
                        ),
                        spec=dict(policy_spec),
                        opts=child_options(self, opts, depends_on=[ns]),
                    )
                )
        self.names = [ns.metadata.name for ns in self.namespaces.values()]
        self.register_outputs({"names": self.names})


@dataclass(frozen=True, kw_only=True)
class ServiceAccountSpec:
    """A service account and the IAM role its pods assume through IRSA (None: no AWS access)."""

    namespace: str
    name: str
    role_arn: pulumi.Input[str] | None = None


@dataclass(frozen=True, kw_only=True)
class WorkloadServiceAccountsArgs:
    service_accounts: Sequence[ServiceAccountSpec]


class WorkloadServiceAccounts(pulumi.ComponentResource):
    """Service accounts of the workloads, annotated with their IRSA role.

    No Kubernetes API token is mounted (``automountServiceAccountToken: false``): the trainer and the
    inference server do not call the API, and the EKS pod identity webhook mounts the web identity token
    IRSA needs on its own.
    https://docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html
    """

    def __init__(
        self, name: str, args: WorkloadServiceAccountsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("aiplat:namespaces:WorkloadServiceAccounts", name, None, opts)
        self.service_accounts: dict[str, k8s.core.v1.ServiceAccount] = {}
        for sa in args.service_accounts:
            self.service_accounts[f"{sa.namespace}/{sa.name}"] = k8s.core.v1.ServiceAccount(
                f"{name}-{sa.namespace}-{sa.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=sa.name,
                    namespace=sa.namespace,
                    labels=PART_OF,
                    annotations={IRSA_ANNOTATION: sa.role_arn} if sa.role_arn is not None else None,
                ),
                automount_service_account_token=False,
                opts=child_options(self, opts),
            )
        self.register_outputs({})
