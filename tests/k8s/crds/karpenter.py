"""Typed models of the Karpenter custom resources we create, written from the CRDs of v1.14.1.

Source: aws/karpenter-provider-aws tag v1.14.1 (bde0065, 2026-08-20)
``pkg/apis/crds/karpenter.sh_nodepools.yaml``
(karpenter.sh/v1 NodePool) and ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`` (karpenter.k8s.aws/v1
EC2NodeClass). Only the fields we set are modelled (``extra="forbid"``: a field the CRD does not have, or
one we started setting without modelling it, fails). Enums, patterns, bounds and the CEL rules that apply to
those fields (restricted label domains, exclusive selector terms, one root volume, restricted tags) are
implemented as validators; CEL rules about fields we never set are not.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from tests.k8s.crds.base import ClusterMetadata, Strict

CRD_VERSION = "karpenter v1.14.1 CRDs"
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"
_QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_VOLUME_SIZE = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|"
    r"64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)
# requirement keys allowed in the karpenter.k8s.aws domain (CEL on requirements[].key)
WELL_KNOWN_AWS = {
    f"karpenter.k8s.aws/{k}"
    for k in [
        "instance-tenancy",
        "capacity-reservation-type",
        "capacity-reservation-id",
        "capacity-reservation-interruptible",
        "ec2nodeclass",
        "instance-encryption-in-transit-supported",
        "instance-category",
        "instance-hypervisor",
        "instance-family",
        "instance-generation",
        "instance-local-nvme",
        "instance-size",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-capability-flex",
        "placement-group-id",
        "placement-group-partition",
    ]
}
RESTRICTED_TAGS = (
    "eks:eks-cluster-name",
    "kubernetes.io/cluster/",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def check_label_key(key: str) -> str:
    """The CEL rules on NodePool label and requirement keys (restricted domains)."""
    if not re.fullmatch(_LABEL_KEY, key) or len(key) > 316:
        raise ValueError(f"{key!r} is not a label key")
    if key in ("karpenter.sh/nodepool", "kubernetes.io/hostname"):
        raise ValueError(f"label {key!r} is restricted")
    if _domain(key).endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
        raise ValueError(f'label domain "karpenter.sh" is restricted ({key})')
    if _domain(key).endswith("karpenter.k8s.aws") and key not in WELL_KNOWN_AWS:
        raise ValueError(f'label domain "karpenter.k8s.aws" is restricted ({key})')
    return key


# -- NodePool (karpenter.sh/v1) -------------------------------------------------------------------------
class NodeClassRef(Strict):
    group: Annotated[str, Field(pattern=r"^[^/]*$", min_length=1)]
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]


class Requirement(Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    values: list[Annotated[str, Field(pattern=_LABEL_VALUE, max_length=63)]] = []
    minValues: Annotated[int, Field(ge=1, le=50)] | None = None  # noqa: N815 (CRD field name)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        return check_label_key(v)

    @model_validator(mode="after")
    def _cel(self) -> Requirement:
        if self.operator == "In" and not self.values:
            raise ValueError("requirements with operator 'In' must have a value defined")
        if self.operator in ("Gt", "Lt", "Gte", "Lte") and (
            len(self.values) != 1 or not self.values[0].isdigit() or int(self.values[0]) <= 0
        ):
            raise ValueError("Gt/Lt/Gte/Lte must have a single positive integer value")
        if self.minValues is not None and len(self.values) < self.minValues:
            raise ValueError("requirements with 'minValues' must have at least that many values")
        return self


class Taint(Strict):
    key: Annotated[str, Field(pattern=_LABEL_KEY)]
    value: Annotated[str, Field(pattern=_LABEL_KEY)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeClaimTemplateSpec(Strict):
    nodeClassRef: NodeClassRef  # noqa: N815
    requirements: Annotated[list[Requirement], Field(max_length=100)]
    taints: list[Taint] = []
    startupTaints: list[Taint] = []  # noqa: N815
    expireAfter: Annotated[str, Field(pattern=_DURATION)] = "720h"  # noqa: N815
    terminationGracePeriod: Annotated[str, Field(pattern=r"^([0-9]+(s|m|h))+$")] | None = None  # noqa: N815


class TemplateMetadata(Strict):
    labels: Annotated[
        dict[str, Annotated[str, Field(pattern=_LABEL_VALUE, max_length=63)]], Field(max_length=100)
    ] = {}

    @field_validator("labels")
    @classmethod
    def _keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            check_label_key(key)
        return v


class NodeClaimTemplate(Strict):
    metadata: TemplateMetadata = TemplateMetadata()
    spec: NodeClaimTemplateSpec


class Budget(Strict):
    nodes: Annotated[str, Field(pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$")]
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = None
    schedule: str | None = None
    duration: Annotated[str, Field(pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")] | None = None

    @model_validator(mode="after")
    def _schedule(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration'")
        return self


class Disruption(Strict):
    consolidationPolicy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = (  # noqa: N815
        "WhenEmptyOrUnderutilized"
    )
    consolidateAfter: Annotated[str, Field(pattern=_DURATION)]  # noqa: N815 (required in the block)
    budgets: Annotated[list[Budget], Field(max_length=50)] = []


class NodePoolSpec(Strict):
    template: NodeClaimTemplate
    limits: dict[str, Annotated[str, Field(pattern=_QUANTITY)]] = {}
    disruption: Disruption | None = None
    weight: Annotated[int, Field(ge=1, le=100)] | None = None


class NodePool(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["karpenter.sh/v1"]  # noqa: N815
    kind: Literal["NodePool"]
    metadata: ClusterMetadata
    spec: NodePoolSpec


# -- EC2NodeClass (karpenter.k8s.aws/v1) ------------------------------------------------------------------
Tags = Annotated[dict[str, Annotated[str, Field(min_length=1)]], Field(max_length=20)]


class AmiSelectorTerm(Strict):
    alias: Annotated[str, Field(max_length=30)] | None = None
    id: Annotated[str, Field(pattern=r"ami-[0-9a-z]+")] | None = None
    name: str | None = None
    owner: str | None = None
    tags: Tags | None = None
    ssmParameter: str | None = None  # noqa: N815

    @model_validator(mode="after")
    def _cel(self) -> AmiSelectorTerm:
        set_fields = {k for k, v in self.model_dump().items() if v is not None}
        if not set_fields & {"tags", "id", "name", "alias", "ssmParameter"}:
            raise ValueError("expected at least one of tags, id, name, alias, ssmParameter")
        for exclusive in ("id", "alias"):
            if exclusive in set_fields and len(set_fields) > 1:
                raise ValueError(f"'{exclusive}' is mutually exclusive with other fields")
        if self.alias is not None:
            family, _, version = self.alias.partition("@")
            if not re.fullmatch(r"^[a-zA-Z0-9]+@.+$", self.alias):
                raise ValueError("'alias' must match 'family@version'")
            if family not in ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"):
                raise ValueError(f"alias family {family!r} is not supported")
            if family.startswith("windows") and version != "latest":
                raise ValueError("windows families may only specify version 'latest'")
        return self


class IdOrTagsTerm(Strict):
    id: str | None = None
    tags: Tags | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> IdOrTagsTerm:
        given = [k for k in ("id", "tags", "name") if getattr(self, k) is not None]
        if not given:
            raise ValueError("expected at least one of tags, id, name")
        if len(given) > 1 and ("id" in given or "name" in given):
            raise ValueError("'id'/'name' are mutually exclusive with other fields")
        if self.tags is not None and any(not k or not v for k, v in self.tags.items()):
            raise ValueError("empty tag keys or values aren't supported")
        return self


class SubnetTerm(IdOrTagsTerm):
    id: Annotated[str, Field(pattern=r"subnet-[0-9a-z]+")] | None = None
    name: None = None


class SecurityGroupTerm(IdOrTagsTerm):
    id: Annotated[str, Field(pattern=r"sg-[0-9a-z]+")] | None = None


class MetadataOptions(Strict):
    httpEndpoint: Literal["enabled", "disabled"] = "enabled"  # noqa: N815
    httpProtocolIPv6: Literal["enabled", "disabled"] = "disabled"  # noqa: N815
    httpPutResponseHopLimit: Annotated[int, Field(ge=1, le=64)] = 1  # noqa: N815
    httpTokens: Literal["required", "optional"] = "required"  # noqa: N815


class Ebs(Strict):
    deleteOnTermination: bool | None = None  # noqa: N815
    encrypted: bool | None = None
    iops: int | None = None
    kmsKeyID: str | None = None  # noqa: N815
    snapshotID: str | None = None  # noqa: N815
    throughput: int | None = None
    volumeSize: Annotated[str, Field(pattern=_VOLUME_SIZE)] | None = None  # noqa: N815
    volumeType: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None  # noqa: N815

    @model_validator(mode="after")
    def _size(self) -> Ebs:
        if self.snapshotID is None and self.volumeSize is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        return self


class BlockDeviceMapping(Strict):
    deviceName: str | None = None  # noqa: N815
    rootVolume: bool = False  # noqa: N815
    ebs: Ebs | None = None


class EC2NodeClassSpec(Strict):
    amiFamily: (
        Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"] | None
    ) = (  # noqa: N815
        None
    )
    amiSelectorTerms: Annotated[list[AmiSelectorTerm], Field(min_length=1, max_length=30)]  # noqa: N815
    role: Annotated[str, Field(min_length=1)] | None = None
    instanceProfile: Annotated[str, Field(min_length=1)] | None = None  # noqa: N815
    subnetSelectorTerms: Annotated[list[SubnetTerm], Field(min_length=1, max_length=30)]  # noqa: N815
    securityGroupSelectorTerms: Annotated[list[SecurityGroupTerm], Field(min_length=1, max_length=30)]  # noqa: N815
    metadataOptions: MetadataOptions | None = None  # noqa: N815
    blockDeviceMappings: Annotated[list[BlockDeviceMapping], Field(max_length=50)] = []  # noqa: N815
    instanceStorePolicy: Literal["RAID0"] | None = None  # noqa: N815
    tags: dict[str, str] = {}
    userData: str | None = None  # noqa: N815

    @model_validator(mode="after")
    def _cel(self) -> EC2NodeClassSpec:
        if (self.role is None) == (self.instanceProfile is None):
            raise ValueError("must specify exactly one of ['role', 'instanceProfile']")
        if sum(1 for b in self.blockDeviceMappings if b.rootVolume) > 1:
            raise ValueError("must have only one blockDeviceMappings with rootVolume")
        for key in self.tags:
            if not key:
                raise ValueError("empty tag keys aren't supported")
            for r in RESTRICTED_TAGS:
                if key == r or (r.endswith("/") and key.startswith(r)):
                    raise ValueError(f"tag contains a restricted tag matching {r}")
        return self


class EC2NodeClass(Strict):
    CRD_VERSION: ClassVar[str] = CRD_VERSION
    apiVersion: Literal["karpenter.k8s.aws/v1"]  # noqa: N815
    kind: Literal["EC2NodeClass"]
    metadata: ClusterMetadata
    spec: EC2NodeClassSpec


MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("karpenter.sh/v1", "NodePool"): NodePool,
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): EC2NodeClass,
}
