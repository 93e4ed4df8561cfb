"""Pulumi mocks that answer provider data calls from the AWS snapshot bundled in moto.

Resource registrations are answered with their inputs plus the identifiers AWS would compute (id, arn);
the values are placeholders, the *shape* is what the real provider returns. Data calls (availability
zones, instance types, offerings, caller identity, partition, region) are answered from the region's
offline AWS data (``infra/io/snapshot.py:offline_aws``: a refreshed facts file, else moto's snapshot).
A data call we cannot answer raises ``DataSourceError`` naming the call, so nothing silently receives an
empty answer.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import pulumi

from infra.core.errors import DataSourceError
from infra.io import snapshot
from infra.plan.lb_zones import LB_HOSTED_ZONES

# The offline plan has no real account: moto's default account id (moto.core.models.DEFAULT_ACCOUNT_ID),
# so ARNs in plans match what a moto server returns in the tests.
ACCOUNT_ID = "123456789012"
PARTITION = "aws"


def _filter_values(args: dict[str, Any], name: str) -> list[str] | None:
    for f in args.get("filters") or []:
        if f.get("name") == name:
            return list(f.get("values") or [])
    return None


class AwsSnapshotMocks(pulumi.runtime.Mocks):
    """Answers the program's resource registrations and data calls for one region."""

    def __init__(self, region: str, stack_outputs: dict[str, dict[str, Any]] | None = None):
        self.region = region
        # referenced stack -> its planned outputs (answers pulumi.StackReference)
        self.stack_outputs = dict(stack_outputs or {})
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._data: dict[str, snapshot.OfflineAws] = {}
        self._prefix_lists: dict[str, dict[str, list[str]]] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "aws:index/getAvailabilityZones:getAvailabilityZones": self._availability_zones,
            "aws:ec2/getInstanceType:getInstanceType": self._instance_type,
            "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": self._instance_type_offerings,
            "aws:ec2/getInstanceTypes:getInstanceTypes": self._instance_types,
            "aws:index/getCallerIdentity:getCallerIdentity": self._caller_identity,
            "aws:index/getPartition:getPartition": self._partition,
            "aws:index/getRegion:getRegion": self._region,
            "aws:ecr/getAuthorizationToken:getAuthorizationToken": self._ecr_token,
            "aws:lb/getHostedZoneId:getHostedZoneId": self._lb_hosted_zone,
            "aws:kms/getPublicKey:getPublicKey": self._kms_public_key,
            "aws:ec2/getPrefixList:getPrefixList": self._prefix_list,
        }

    # -- data calls -------------------------------------------------------------------------------
    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        handler = self._handlers.get(args.token)
        self.calls.append((args.token, dict(args.args)))
        if handler is None:
            raise DataSourceError(
                f"offline AWS data cannot answer data call {args.token!r}; "
                "add it to infra/plan/mocks.py from the moto snapshot or avoid the call"
            )
        return handler(dict(args.args))

    def _region_of(self, args: dict[str, Any]) -> str:
        return args.get("region") or self.region

    def data(self, region: str | None = None) -> snapshot.OfflineAws:
        """The offline AWS data of ``region`` (the stack's by default), read once per plan."""
        region = region or self.region
        if region not in self._data:
            self._data[region] = snapshot.offline_aws(region)
        return self._data[region]

    def regional(self, region: str, call: str) -> snapshot.OfflineAws:
        """``data(region)`` for a data call about the region's own zones and offerings: a region the offline
        data lacks is refused in one line naming the step that records it."""
        data = self.data(region)
        if not data.has_region:
            raise DataSourceError(f"{call}: {snapshot.region_missing(region)}")
        return data

    @property
    def facts_source(self) -> str:
        """Which data answers the stack region's data calls, and its date (for the rules' messages)."""
        return self.data().label

    def _availability_zones(self, args: dict[str, Any]) -> dict[str, Any]:
        region = self._region_of(args)
        zones = self.regional(region, "getAvailabilityZones").availability_zones()
        if not zones:
            raise DataSourceError(
                f"getAvailabilityZones: {self.data(region).label} has no zones for region {region!r}"
            )
        excluded = set(args.get("excludeNames") or [])
        excluded_ids = set(args.get("excludeZoneIds") or [])
        zones = tuple(z for z in zones if z.name not in excluded and z.zone_id not in excluded_ids)
        # The filters DescribeAvailabilityZones applies, on the snapshot's own zone data. Every zone in
        # the snapshot is an ordinary availability zone ('opt-in-not-required' by AWS's definition).
        fields = {
            "zone-type": lambda z: z.zone_type,
            "zone-name": lambda z: z.name,
            "zone-id": lambda z: z.zone_id,
            "opt-in-status": lambda z: (
                "opt-in-not-required" if z.zone_type == "availability-zone" else "opted-in"
            ),
        }
        for f in args.get("filters") or []:
            if f.get("name") not in fields:
                raise DataSourceError(
                    f"getAvailabilityZones: filter {f.get('name')!r} is not in the snapshot"
                )
            get, values = fields[f["name"]], set(f.get("values") or [])
            zones = tuple(z for z in zones if get(z) in values)
        return {
            "id": region,
            "region": region,
            "names": [z.name for z in zones],
            "zoneIds": [z.zone_id for z in zones],
            "groupNames": [region for _ in zones],
            "state": args.get("state"),
        }

    def _instance_type(self, args: dict[str, Any]) -> dict[str, Any]:
        itype = args.get("instanceType", "")
        raw = self.data(self._region_of(args)).describe_instance_type(itype)
        if raw is None:
            # What EC2 answers for an unknown type; our config validation catches it earlier.
            raise DataSourceError(f"getInstanceType: InvalidInstanceType: {itype!r} does not exist")
        return snapshot.get_instance_type_result(raw, self._region_of(args))

    def _instance_types(self, args: dict[str, Any]) -> dict[str, Any]:
        """DescribeInstanceTypes with an ``instance-type`` filter (wildcards allowed, as AWS documents):
        every type AWS has that matches, from the snapshot; offerings are a separate call."""
        region = self._region_of(args)
        wanted = _filter_values(args, "instance-type")
        other = [f.get("name") for f in args.get("filters") or [] if f.get("name") != "instance-type"]
        if other:
            raise DataSourceError(f"getInstanceTypes: filters {other} are not answered by the snapshot")
        types = [
            t
            for t in self.data(region).instance_type_names()
            if wanted is None or any(fnmatch.fnmatchcase(t, w) for w in wanted)
        ]
        return {"id": region, "region": region, "instanceTypes": types}

    def _instance_type_offerings(self, args: dict[str, Any]) -> dict[str, Any]:
        region = self._region_of(args)
        location_type = args.get("locationType") or "region"
        if location_type not in ("region", "availability-zone"):
            raise DataSourceError(
                f"getInstanceTypeOfferings: locationType {location_type!r} is not in the snapshot"
            )
        wanted = _filter_values(args, "instance-type")
        locations = _filter_values(args, "location")
        data = self.regional(region, "getInstanceTypeOfferings")
        if location_type == "region":
            rows = [(t, region) for t in sorted(data.offered_in_region())]
        else:
            rows = [(t, az) for az, types in data.offered_by_az().items() for t in sorted(types)]
        # EC2 filter values match exactly or with the wildcards * and ?, as AWS documents for Describe*
        # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Filtering.html).
        rows = [
            (t, loc)
            for t, loc in rows
            if (wanted is None or any(fnmatch.fnmatchcase(t, w) for w in wanted))
            and (locations is None or loc in locations)
        ]
        return {
            "id": region,
            "region": region,
            "instanceTypes": [t for t, _ in rows],
            "locations": [loc for _, loc in rows],
            "locationTypes": [location_type for _ in rows],
        }

    def _kms_public_key(self, args: dict[str, Any]) -> dict[str, Any]:
        # The release signing key's public half (kms:GetPublicKey) has no offline source: a fixed P-256
        # placeholder of the right shape; `pulumi up` reads the real one from KMS.
        key_id = str(args.get("keyId", ""))
        return {
            "id": key_id,
            "keyId": key_id,
            "arn": key_id,
            "customerMasterKeySpec": "ECC_NIST_P256",
            "keyUsage": "SIGN_VERIFY",
            "signingAlgorithms": ["ECDSA_SHA_256"],
            "encryptionAlgorithms": [],
            "publicKey": base64.b64encode(bytes.fromhex(OFFLINE_P256_PUBLIC_KEY_DER)).decode(),
            "publicKeyPem": OFFLINE_P256_PUBLIC_KEY_PEM,
        }

    def _caller_identity(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": ACCOUNT_ID,
            "accountId": ACCOUNT_ID,
            "arn": f"arn:{PARTITION}:iam::{ACCOUNT_ID}:user/offline-plan",
            "userId": "AIDAOFFLINEPLAN",
        }

    def _partition(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": PARTITION,
            "partition": PARTITION,
            "dnsSuffix": "amazonaws.com",
            "reverseDnsPrefix": "com.amazonaws",
        }

    def _prefix_list(self, args: dict[str, Any]) -> dict[str, Any]:
        """An AWS-managed prefix list by name, as moto's EC2 creates it in every region
        (moto/ec2/models/managed_prefixes.py ``create_default_pls``). moto gives the S3 list the same three
        us-east-1 ranges in every region: the offline plan has no region's own S3 ranges, ``pulumi up``
        reads the real list."""
        region, name = self._region_of(args), args.get("name")
        if region not in self._prefix_lists:
            from moto.ec2.models.managed_prefixes import ManagedPrefixListBackend

            class _Lists:  # receives what moto would create, without starting its EC2 backend
                region_name = region

                def __init__(self) -> None:
                    self.lists: dict[str, list[str]] = {}

                def _create_aws_managed_prefix_list(
                    self, name: str, address_family: str, entries: list
                ) -> None:  # noqa: E501
                    self.lists[name] = [e["Cidr"] for e in entries]

            got = _Lists()
            ManagedPrefixListBackend.create_default_pls(got)  # type: ignore[arg-type]
            self._prefix_lists[region] = got.lists
        if name not in self._prefix_lists[region]:
            raise DataSourceError(f"getPrefixList: moto has no AWS-managed prefix list {name!r} in {region}")
        return {"id": f"pl-{name}", "name": name, "cidrBlocks": self._prefix_lists[region][name]}

    def _region(self, args: dict[str, Any]) -> dict[str, Any]:
        region = self._region_of(args)
        return {
            "id": region,
            "region": region,
            "name": region,
            "endpoint": f"ec2.{region}.amazonaws.com",
            "description": region,
        }

    def _lb_hosted_zone(self, args: dict[str, Any]) -> dict[str, Any]:
        """The canonical hosted zone of a region's load balancers (an alias record's target zone)."""
        region = self._region_of(args)
        lb_type = args.get("loadBalancerType") or "application"
        zones = LB_HOSTED_ZONES.get(region)
        zone = zones._asdict().get(lb_type) if zones is not None else None
        if zone is None:
            raise DataSourceError(
                f"getHostedZoneId: no {lb_type} load balancer hosted zone of {region!r} is known offline: "
                "AWS's ELB endpoints page listed none when read (its date: infra/plan/lb_zones.py); fix: "
                "serve from a region https://docs.aws.amazon.com/general/latest/gr/elb.html lists"
            )
        return {"id": zone, "region": region, "loadBalancerType": lb_type}

    def _ecr_token(self, args: dict[str, Any]) -> dict[str, Any]:
        """The shape of ECR GetAuthorizationToken as moto answers it (moto/ecr/responses.py): user AWS,
        a per-registry placeholder password, the registry's proxy endpoint."""
        registry = args.get("registryId") or ACCOUNT_ID
        password = f"{registry}-auth-token"
        return {
            "id": registry,
            "registryId": registry,
            "userName": "AWS",
            "password": password,
            "authorizationToken": base64.b64encode(f"AWS:{password}".encode()).decode(),
            "proxyEndpoint": f"https://{registry}.dkr.ecr.{self._region_of(args)}.amazonaws.com",
            "expiresAt": "2015-01-01T00:00:00Z",
        }

    # -- resources --------------------------------------------------------------------------------
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Echo the inputs and add what AWS computes: a stable id and, for AWS resources, an ARN.

        A resource with v7's per-resource ``region`` input gets that region in its computed values.
        A StackReference is answered from the referenced stack's planned outputs (``stack_outputs``).
        """
        if args.typ == "pulumi:pulumi:StackReference":
            return self._stack_reference(args)
        digest = hashlib.sha256(f"{args.typ}/{args.name}".encode()).hexdigest()[:17]
        state = dict(args.inputs)
        region = state.get("region") or self.region
        resource_id = f"{args.name}-{digest}"
        extra = COMPUTED.get(args.typ)
        if extra is not None:
            computed = extra(args, region)
            # the provider's id where AWS has a natural one (an S3 bucket's id is its name)
            resource_id = computed.pop("id", resource_id)
            for key, value in computed.items():
                if isinstance(value, dict) and isinstance(state.get(key), dict):
                    state[key] = {**value, **state[key]}  # computed fields inside an input block
                else:
                    state.setdefault(key, value)
        if args.typ.startswith("aws:"):
            module = args.typ.split(":")[1].split("/")[0]
            kind = args.typ.split(":")[-1].lower()
            state.setdefault("arn", f"arn:{PARTITION}:{module}:{region}:{ACCOUNT_ID}:{kind}/{args.name}")
        return resource_id, state

    def _stack_reference(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        name = str(args.inputs.get("name") or args.name)
        stack = name.split("/")[-1]
        if stack not in self.stack_outputs:
            raise DataSourceError(
                f"StackReference {name!r}: no planned outputs of stack {stack!r}; plan that stack first"
            )
        return name, {"name": name, "outputs": self.stack_outputs[stack], "secretOutputNames": []}


class FirstPreviewMocks(AwsSnapshotMocks):
    """The first ``pulumi preview`` of a new stack: nothing exists yet, so nothing a provider computes on
    create (ids, ARNs, an EKS cluster's OIDC issuer) is known; only the inputs the program gave are.

    Run with ``preview=True``: the SDK then resolves every output the engine did not send as unknown and
    echoes the known inputs (pulumi/runtime/rpc.py ``resolve_outputs``: "We're previewing ... inform the
    Output that the value isn't known"; an empty id is unknown, resource.py), exactly as a provider's
    preview of a create leaves computed attributes unknown. Every input computed from such an output (an
    IRSA trust policy, a policy naming a key ARN) then reaches the engine as the unknown sentinel, where a
    policy pack sees it. Data calls are answered as in a plan (the engine answers them at preview too);
    a StackReference reads a stack that exists already (an earlier rollout wave), so it answers in full.
    """

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            return super().new_resource(args)
        return "", {}


def _s3_bucket(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    name = args.inputs.get("bucket") or args.name
    return {
        "id": name,
        "bucket": name,
        "arn": f"arn:{PARTITION}:s3:::{name}",
        "bucketRegionalDomainName": f"{name}.s3.{region}.amazonaws.com",
        "bucketRegion": region,
    }


# A P-256 public key generated once for the offline plan (its private half was discarded): what
# aws.kms.get_public_key answers for the release signing key in a plan.
OFFLINE_P256_PUBLIC_KEY_PEM = """-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7IS7JWcl7+6FNeFwUp2eUPinxr7q
nMrD3RGGWt+1W1RfBbXO+NEpTOIWcqnxg4jXvPVKKKb5YAbagAtiiBlWwA==
-----END PUBLIC KEY-----
"""
OFFLINE_P256_PUBLIC_KEY_DER = (
    "3059301306072a8648ce3d020106082a8648ce3d03010703420004ec84bb256725efee8535e170529d9e50f8a7c6beea9c"
    "cac3dd11865adfb55b545f05b5cef8d1294ce21672a9f18388d7bcf54a28a6f96006da800b62881956c0"
)


def _kms_key(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    key_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{region}/{args.name}"))
    return {"keyId": key_id, "arn": f"arn:{PARTITION}:kms:{region}:{ACCOUNT_ID}:key/{key_id}"}


def _ecr_repository(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {
        "registryId": ACCOUNT_ID,
        "repositoryUrl": f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/{name}",
        "arn": f"arn:{PARTITION}:ecr:{region}:{ACCOUNT_ID}:repository/{name}",
    }


def _iam_role(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {"name": name, "arn": f"arn:{PARTITION}:iam::{ACCOUNT_ID}:role/{name}"}


def _iam_policy(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {"name": name, "arn": f"arn:{PARTITION}:iam::{ACCOUNT_ID}:policy/{name}"}


def _sqs_queue(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """An SQS queue's id is its URL; auto-named queues get the resource name as placeholder."""
    name = args.inputs.get("name") or args.name
    url = f"https://sqs.{region}.amazonaws.com/{ACCOUNT_ID}/{name}"
    return {"id": url, "name": name, "url": url, "arn": f"arn:{PARTITION}:sqs:{region}:{ACCOUNT_ID}:{name}"}


def _event_rule(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {"name": name, "arn": f"arn:{PARTITION}:events:{region}:{ACCOUNT_ID}:rule/{name}"}


def _random_password(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    # A fresh value per plan, as the real provider generates one; the SDK marks ``result`` secret.
    length = int(args.inputs.get("length") or 32)
    return {"result": secrets.token_urlsafe(length)[:length]}


def _digest(args: pulumi.runtime.MockResourceArgs, n: int = 17) -> str:
    return hashlib.sha256(f"{args.typ}/{args.name}".encode()).hexdigest()[:n]


def _eks_cluster(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """What CreateCluster returns that the program reads: endpoint, CA, OIDC issuer, cluster SG.

    EKS gives every cluster its own issuer ID, so the ID here follows the cluster's name and region (two
    stacks' clusters never share an OIDC provider URL, which is account-wide in IAM).
    """
    cluster = args.inputs.get("name") or args.name
    oidc_id = hashlib.sha256(f"{region}/{cluster}".encode()).hexdigest()[:32].upper()
    return {
        "endpoint": f"https://{oidc_id}.gr7.{region}.eks.amazonaws.com",
        "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm9mZmxpbmUtcGxhbgo="},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{oidc_id}"}]}],
        "vpcConfig": {"clusterSecurityGroupId": f"sg-{_digest(args)}", "vpcId": f"vpc-{_digest(args)}"},
        "status": "ACTIVE",
        "platformVersion": "eks.1",
    }


def _oidc_provider(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    url = str(args.inputs.get("url", "")).removeprefix("https://")
    return {"arn": f"arn:{PARTITION}:iam::{ACCOUNT_ID}:oidc-provider/{url}"}


def _docker_image(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """What pulumi-docker-build returns after a push (v0.0.22 image.go Create): the manifest digest, the
    first tag with that digest as ``ref``, the context hash. Placeholders of the right shape."""
    tags = list(args.inputs.get("tags") or [])
    seed = "/".join([args.name, *map(str, tags)])
    digest = "sha256:" + hashlib.sha256(seed.encode()).hexdigest()
    return {
        "digest": digest,
        "ref": f"{tags[0]}@{digest}" if tags else "",
        "contextHash": hashlib.sha256(f"context/{seed}".encode()).hexdigest(),
    }


def _acm_certificate(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """ACM's ARN (a UUID) and the CNAME it asks for per name (RequestCertificate + DescribeCertificate's
    ResourceRecord: ``_<token>.<domain>.`` -> ``_<token>.<id>.acm-validations.aws.``). Like ACM, the
    record depends on the name and the account only: every region's certificate for a name asks for the
    same one (https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html)."""
    cert_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{region}/acm/{args.name}"))
    names = [args.inputs.get("domainName"), *(args.inputs.get("subjectAlternativeNames") or [])]

    def token(name: str) -> str:
        return hashlib.sha256(f"{ACCOUNT_ID}/acm/{name}".encode()).hexdigest()[:32]

    return {
        "arn": f"arn:{PARTITION}:acm:{region}:{ACCOUNT_ID}:certificate/{cert_id}",
        "status": "PENDING_VALIDATION",
        "domainValidationOptions": [
            {
                "domainName": n,
                "resourceRecordName": f"_{token(n)}.{n}.",
                "resourceRecordType": "CNAME",
                "resourceRecordValue": f"_{token(n)[::-1]}.offline.acm-validations.aws.",
            }
            for n in names
            if n
        ],
    }


def _route53_record(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    # The provider's fqdn is the record name without the trailing dot.
    return {"fqdn": str(args.inputs.get("name") or args.name).rstrip(".")}


def _web_acl(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    acl_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{region}/wafv2/{args.name}"))
    scope = "regional" if args.inputs.get("scope") == "REGIONAL" else "global"
    name = args.inputs.get("name") or args.name
    return {
        "id": acl_id,
        "arn": f"arn:{PARTITION}:wafv2:{region}:{ACCOUNT_ID}:{scope}/webacl/{name}/{acl_id}",
    }


def _ingress(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """The status the AWS Load Balancer Controller writes: its ALB's DNS name
    (``k8s-<namespace>-<ingress>-<hash>-<id>.<region>.elb.amazonaws.com``)."""
    meta = args.inputs.get("metadata") or {}
    name = f"k8s-{meta.get('namespace', 'default')}-{meta.get('name', args.name)}"[:24]
    host = f"{name}-{_digest(args, 10)}-{int(_digest(args, 8), 16) % 10**10}.{region}.elb.amazonaws.com"
    return {"status": {"loadBalancer": {"ingress": [{"hostname": host}]}}}


def _lustre_file_system(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """What CreateFileSystem returns that the program reads (botocore fsx shapes): the id
    (``fs-[0-9a-f]{8,}``), the DNS name (``<id>.fsx.<region>.amazonaws.com``), the Lustre mount name (1-8 of
    ``[A-Za-z0-9_-]``; persistent file systems get a generated one, scratch_1 ``fsx``) and the ARN."""
    fs_id = f"fs-{_digest(args)}"
    mount = "fsx" if args.inputs.get("deploymentType") == "SCRATCH_1" else _digest(args, 8)
    return {
        "id": fs_id,
        "dnsName": f"{fs_id}.fsx.{region}.amazonaws.com",
        "mountName": mount,
        "arn": f"arn:{PARTITION}:fsx:{region}:{ACCOUNT_ID}:file-system/{fs_id}",
        "networkInterfaceIds": [f"eni-{_digest(args)}"],
    }


def _data_repository_association(args: pulumi.runtime.MockResourceArgs, region: str) -> dict[str, Any]:
    """CreateDataRepositoryAssociation's id (``dra-[0-9a-f]{8,}``), which the provider also reads back as
    ``associationId``."""
    dra_id = f"dra-{_digest(args)}"
    return {"id": dra_id, "associationId": dra_id}


# Per-type outputs that AWS computes and that the program reads (e.g. an EKS cluster's OIDC issuer).
# Components register what they need here, keyed by resource type token.
COMPUTED: dict[str, Callable[[pulumi.runtime.MockResourceArgs, str], dict[str, Any]]] = {
    "aws:eks/cluster:Cluster": _eks_cluster,
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": _oidc_provider,
    "aws:ec2/launchTemplate:LaunchTemplate": lambda args, region: {"latestVersion": 1},
    "aws:iam/role:Role": _iam_role,
    "aws:iam/policy:Policy": _iam_policy,
    "aws:sqs/queue:Queue": _sqs_queue,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:s3/bucket:Bucket": _s3_bucket,
    "aws:kms/key:Key": _kms_key,
    "aws:ecr/repository:Repository": _ecr_repository,
    "random:index/randomPassword:RandomPassword": _random_password,
    "docker-build:index:Image": _docker_image,
    "aws:acm/certificate:Certificate": _acm_certificate,
    "aws:route53/record:Record": _route53_record,
    "aws:wafv2/webAcl:WebAcl": _web_acl,
    "kubernetes:networking.k8s.io/v1:Ingress": _ingress,
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre_file_system,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": _data_repository_association,
}
