"""The publisher's nodes: the admission policy ``aiplat-publisher-nodes``. Pure.

The release publisher's pods hold the one token that may ``kms:Sign`` releases, so they run on a node pool
of their own (rule ``publisher-pool``): nodes labelled and tainted ``aiplat.io/publisher=true``
(``infra/core/labels.py``).

``aiplat-publisher-nodes`` is bound to the workload namespaces (the trainer's, the inference server's, every
team's, the publisher's): a pod in the publisher's namespace selects those nodes (``nodeSelector``) and
tolerates their taint; a pod of any other workload namespace tolerates neither that taint nor every taint (a
toleration without key and ``operator: Exists``). The system namespaces are not bound: the node agents'
DaemonSets (vpc-cni, kube-proxy, the exporters, the log collector) tolerate every pool's taints and must run
on every node, the publisher's too; what runs there is held to the recorded images (aiplat-system-images)
and no team's role may create pods there.

Kubernetes only lets a pod's update add tolerations, never drop them; the policies see every CREATE and
UPDATE, so an added toleration is refused as a new one is.
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
"""

from __future__ import annotations

from typing import Any

from infra.admission.cel import validation
from infra.core.labels import PUBLISHER_NODE_LABEL, PUBLISHER_TAINT


def _tolerations_none(cond: str) -> str:
    """No toleration ``t`` of the pod satisfies ``cond``."""
    return f"!has(object.spec.tolerations) || object.spec.tolerations.all(t, !({cond}))"


def _names_key(key: str) -> str:
    return f"has(t.key) && t.key == '{key}'"


# a toleration without key and with operator Exists tolerates every taint (Toleration.key)
_WILDCARD = "(!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'"


def publisher_nodes_validations(namespace: str) -> list[dict[str, Any]]:
    label_key, label_value = PUBLISHER_NODE_LABEL
    key, value, effect = PUBLISHER_TAINT
    tolerates = (
        f"{_names_key(key)} && ((has(t.operator) && t.operator == 'Exists') || "
        f"((!has(t.operator) || t.operator == 'Equal') && has(t.value) && t.value == '{value}')) "
        f"&& (!has(t.effect) || t.effect == '' || t.effect == '{effect}')"
    )
    others = _tolerations_none(f"{_names_key(key)} || {_WILDCARD}")
    return [
        validation(
            f"request.namespace != '{namespace}' || (has(object.spec.nodeSelector) "
            f"&& '{label_key}' in object.spec.nodeSelector "
            f"&& object.spec.nodeSelector['{label_key}'] == '{label_value}')",
            f"pods in namespace '{namespace}' run on the publisher's nodes: set "
            f"spec.nodeSelector {{'{label_key}': '{label_value}'}}",
        ),
        validation(
            f"request.namespace != '{namespace}' || (has(object.spec.tolerations) "
            f"&& object.spec.tolerations.exists(t, {tolerates}))",
            f"pods in namespace '{namespace}' tolerate the publisher's nodes' taint: add the toleration "
            f"{{key: {key}, operator: Equal, value: '{value}', effect: {effect}}}",
        ),
        validation(
            f"request.namespace == '{namespace}' || ({others})",
            f"only pods in namespace '{namespace}' may tolerate the taint {key} (the release publisher's "
            "nodes): remove that toleration, and any toleration without key and with operator Exists",
        ),
    ]
