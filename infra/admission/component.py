"""AdmissionPolicies: the ValidatingAdmissionPolicies and their bindings (documents from
``infra/admission/documents.py``), on the cluster's Kubernetes provider (``opts.provider``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class AdmissionPoliciesArgs:
    """``objects``: ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding documents; each binding
    is created after the policy it names."""

    objects: Sequence[Mapping[str, Any]]
    # namespace -> labels set on a namespace this program does not create (kube-system's Pod Security
    # labels), by server-side apply of those labels alone
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


class AdmissionPolicies(pulumi.ComponentResource):
    """Kubernetes' built-in admission policies, and the Pod Security labels of the namespaces EKS makes."""

    policy_names: list[str]

    def __init__(self, name: str, args: AdmissionPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:admission:AdmissionPolicies", name, None, opts)
        policies: dict[str, k8s.admissionregistration.v1.ValidatingAdmissionPolicy] = {}
        for doc in args.objects:
            if doc["kind"] != "ValidatingAdmissionPolicy":
                continue
            policy_name = doc["metadata"]["name"]
            policies[policy_name] = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{policy_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(**doc["metadata"]),
                spec=dict(doc["spec"]),
                opts=child_options(self, opts),
            )
        for doc in args.objects:
            if doc["kind"] != "ValidatingAdmissionPolicyBinding":
                continue
            target = doc["spec"]["policyName"]
            if target not in policies:
                raise ValueError(f"binding {doc['metadata']['name']!r} names no policy of this component")
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{doc['metadata']['name']}-binding",
                metadata=k8s.meta.v1.ObjectMetaArgs(**doc["metadata"]),
                spec=dict(doc["spec"]),
                opts=child_options(self, opts, depends_on=[policies[target]]),
            )
        for namespace, labels in sorted(args.namespace_labels.items()):
            k8s.core.v1.NamespacePatch(
                f"{name}-{namespace}-labels",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=namespace, labels=dict(labels)),
                opts=child_options(self, opts),
            )
        self.policy_names = sorted(policies)
        self.register_outputs({"policy_names": self.policy_names})
