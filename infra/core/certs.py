"""cert-manager custom resources of the cluster CA, as data (cert-manager.io/v1, CRDs of v1.21.1). Pure.

Bootstrap (https://cert-manager.io/docs/configuration/selfsigned/#bootstrapping-ca-issuers): a self-signed
ClusterIssuer signs one CA certificate, kept as a Secret in cert-manager's namespace (where a ClusterIssuer
reads its ``ca.secretName`` by default, ``clusterResourceNamespace``), and the CA ClusterIssuer signs the
workloads' certificates with it. ``tests/k8s/crds/cert_manager.py`` checks them against a typed model.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "cert-manager.io/v1"


def issuer_ref(name: str) -> dict[str, str]:
    return {"name": name, "kind": "ClusterIssuer", "group": "cert-manager.io"}


def self_signed_issuer_spec() -> dict[str, Any]:
    return {"selfSigned": {}}


def ca_certificate_spec(
    *, common_name: str, secret_name: str, issuer: str, duration_hours: int
) -> dict[str, Any]:
    """The root CA: ECDSA P-256, kept across renewals (``rotationPolicy: Never``: a new key on each
    renewal would invalidate every certificate it signed; cert-manager >= 1.18 defaults to Always)."""
    return {
        "isCA": True,
        "commonName": common_name,
        "secretName": secret_name,
        "duration": f"{duration_hours}h",
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Never"},
        "issuerRef": issuer_ref(issuer),
    }


def ca_issuer_spec(secret_name: str) -> dict[str, Any]:
    return {"ca": {"secretName": secret_name}}


def leaf_certificate_spec(*, secret_name: str, issuer: str, names: dict[str, Any]) -> dict[str, Any]:
    """A certificate the CA ClusterIssuer signs into ``secret_name`` (with the CA in its ``ca.crt``):
    ECDSA P-256, a new key on each renewal; ``names``: its ``commonName`` and/or ``dnsNames``.
    https://cert-manager.io/docs/usage/certificate/"""
    return {
        "secretName": secret_name,
        **names,
        "issuerRef": issuer_ref(issuer),
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
    }
