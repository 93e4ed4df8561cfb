"""Typed models of the cert-manager custom resources we create, written from the CRDs of v1.21.1.

Source: cert-manager/cert-manager tag v1.21.1 (24e3319, 2026-07-29)
``deploy/charts/cert-manager/templates/crd-cert-manager.io_clusterissuers.yaml`` and
``crd-cert-manager.io_certificates.yaml`` (cert-manager.io/v1). Only the fields we set are modelled
(``extra="forbid"``); enums and required fields follow the CRDs.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from tests.k8s.crds.base import ClusterMetadata, ObjectName, Strict

CRD_VERSION = "cert-manager v1.21.1 CRDs"
# Go durations as cert-manager parses them (time.ParseDuration units), e.g. "2160h", "87600h0m0s".
_GO_DURATION = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
_DNS_NAME = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class Metadata(Strict):
    name: ObjectName
    namespace: str | None = None
    labels: dict[str, str] = {}


class SelfSigned(Strict):
    crlDistributionPoints: list[str] | None = None  # noqa: N815


class CA(Strict):
    secretName: Annotated[str, Field(min_length=1)]  # noqa: N815 (required)
    crlDistributionPoints: list[str] | None = None  # noqa: N815
    issuingCertificateURLs: list[str] | None = None  # noqa: N815
    ocspServers: list[str] | None = None  # noqa: N815


class IssuerSpec(Strict):
    selfSigned: SelfSigned | None = None  # noqa: N815
    ca: CA | None = None

    @model_validator(mode="after")
    def _one(self) -> IssuerSpec:
        if (self.selfSigned is None) == (self.ca is None):
            raise ValueError("an issuer configures exactly one of acme, ca, selfSigned, vault, venafi")
        return self


class ClusterIssuer(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["cert-manager.io/v1"]  # noqa: N815
    kind: Literal["ClusterIssuer"]
    metadata: ClusterMetadata
    spec: IssuerSpec


class IssuerRef(Strict):
    name: Annotated[str, Field(min_length=1)]
    kind: Literal["Issuer", "ClusterIssuer"] | None = None  # defaults to Issuer: set it for ClusterIssuers
    group: Literal["cert-manager.io"] | None = None


class PrivateKey(Strict):
    algorithm: Literal["RSA", "ECDSA", "Ed25519"] | None = None
    size: int | None = None
    encoding: Literal["PKCS1", "PKCS8"] | None = None
    rotationPolicy: Literal["Never", "Always"] | None = None  # noqa: N815

    @model_validator(mode="after")
    def _size(self) -> PrivateKey:
        # sizes cert-manager accepts per algorithm (validation in its webhook)
        allowed = {"RSA": {2048, 3072, 4096, 8192}, "ECDSA": {256, 384, 521}}.get(self.algorithm or "")
        if allowed and self.size is not None and self.size not in allowed:
            raise ValueError(f"size {self.size} is not valid for {self.algorithm}")
        return self


class CertificateSpec(Strict):
    secretName: Annotated[str, Field(min_length=1)]  # noqa: N815 (required)
    issuerRef: IssuerRef  # noqa: N815 (required)
    isCA: bool | None = None  # noqa: N815
    commonName: Annotated[str, Field(max_length=64)] | None = None  # noqa: N815
    dnsNames: list[Annotated[str, Field(pattern=_DNS_NAME)]] | None = None  # noqa: N815
    duration: Annotated[str, Field(pattern=_GO_DURATION)] | None = None
    renewBefore: Annotated[str, Field(pattern=_GO_DURATION)] | None = None  # noqa: N815
    privateKey: PrivateKey | None = None  # noqa: N815

    @model_validator(mode="after")
    def _subject(self) -> CertificateSpec:
        # the webhook's rule (cert-manager validation): some subject must be set
        if not (self.commonName or self.dnsNames):
            raise ValueError("a certificate needs a commonName or dnsNames")
        return self


class Certificate(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["cert-manager.io/v1"]  # noqa: N815
    kind: Literal["Certificate"]
    metadata: Metadata
    spec: CertificateSpec

    @model_validator(mode="after")
    def _namespaced(self) -> Certificate:
        if not self.metadata.namespace:
            raise ValueError("a Certificate is namespaced: metadata.namespace is required")
        return self


MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("cert-manager.io/v1", "ClusterIssuer"): ClusterIssuer,
    ("cert-manager.io/v1", "Certificate"): Certificate,
}
