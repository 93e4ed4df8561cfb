"""Read-only AWS calls for ``aiplat preflight``: the live facts of one stack's region, as plain data.

Every call here only reads (Get*/Describe*/Head*); the preflight rules (``infra/preflight/rules.py`` and the
plan rules registered for preflight) judge what comes back. Clients come from a ``Clients`` factory so that
tests can point them at a local moto server (``AWS_ENDPOINT_URL``) and put botocore's Stubber on the few
operations moto does not implement. A call that fails is recorded as ``Unreadable`` (API + AWS's error),
never turned into a pass.

API shapes: botocore's service models (the AWS API reference): ``sts`` GetCallerIdentity, ``account``
GetRegionOptStatus, ``ec2`` DescribeAvailabilityZones / DescribeInstanceTypeOfferings / DescribeInstanceTypes
/ DescribeCapacityReservations, ``service-quotas`` GetServiceQuota, ``eks`` DescribeAddonVersions /
DescribeCluster, ``iam`` GetRole, ``s3`` HeadBucket, ``kms`` DescribeKey.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from botocore.exceptions import BotoCoreError, ClientError

from infra.core.errors import AwsCredentialsError
from infra.core.facts import (
    AddonVersion,
    AvailabilityZone,
    BackendFacts,
    CallerIdentity,
    ClusterEndpointFacts,
    GlobalDnsFacts,
    InstanceFacts,
    LiveFacts,
    RegionFacts,
    ReservationFacts,
    SecretsProviderFacts,
    Unreadable,
)
from infra.core.instance_types import GPU_FAMILY_PATTERNS
from infra.io.aws_credentials import require_credentials
from infra.karpenter.gpu_offers import karpenter_patterns
from infra.preflight.quotas import QUOTAS
from infra.schema.platform import PlatformConfig

Clients = Callable[[str, str], Any]
"""``clients(service, region)`` -> a boto3 client for that service in that region."""

Probe = Callable[[str, float], tuple[bool, str]]
"""``probe(url, timeout)`` -> (answered, why not)."""

AUTOSCALING_ROLE = "AWSServiceRoleForAutoScaling"


def boto3_clients() -> Clients:
    """Clients from the default boto3 session (``AWS_PROFILE``, SSO, ``AWS_ENDPOINT_URL``...), one per
    service and region, with short timeouts and standard retries."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"})
    session = boto3.session.Session()

    @cache
    def make(service: str, region: str) -> Any:
        return session.client(service, region_name=region, config=config)

    return make


def home_region(region: str) -> str:
    """Where the partition's global APIs (STS global, IAM, Account) answer for ``region``."""
    if region.startswith("cn-"):
        return "cn-north-1"
    if region.startswith("us-gov-"):
        return "us-gov-west-1"
    return "us-east-1"


def _one_line(message: str, limit: int = 240) -> str:
    if "<html" in message.lower():  # an endpoint without this API answered with an HTML error page
        return "the endpoint does not implement this API"
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unreadable(api: str, exc: Exception) -> Unreadable:
    """``AccessDeniedException: User ... is not authorized`` from a ClientError, else the client's message."""
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return Unreadable(api, f"{err.get('Code', '?')}: {_one_line(str(err.get('Message', '') or exc))}")
    return Unreadable(api, f"{type(exc).__name__}: {_one_line(str(exc))}")


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else (str(value) if value else None)


def read_identity(sts: Any) -> CallerIdentity | Unreadable:
    try:
        r = sts.get_caller_identity()
    except (ClientError, BotoCoreError) as exc:
        return unreadable("sts:GetCallerIdentity", exc)
    return CallerIdentity(account=r["Account"], arn=r["Arn"])


def read_credentials(sts: Any) -> CallerIdentity | Unreadable:
    """Who the credentials are; when they are missing, expired or refused, the same words every command
    uses for that (``infra/io/aws_credentials.py``)."""
    try:
        return require_credentials(sts)
    except AwsCredentialsError as exc:
        return Unreadable("sts:GetCallerIdentity", exc.problem)
    except (ClientError, BotoCoreError) as exc:
        return unreadable("sts:GetCallerIdentity", exc)


def read_region_opt_status(account: Any, region: str) -> str | Unreadable:
    try:
        return str(account.get_region_opt_status(RegionName=region)["RegionOptStatus"])
    except (ClientError, BotoCoreError) as exc:
        return unreadable("account:GetRegionOptStatus", exc)


def read_region_facts(ec2: Any, cfg: PlatformConfig) -> RegionFacts | Unreadable:
    """Zones (name and ID, this account's mapping), offerings of the config's types per zone ID mapped to
    this account's zone names, the Karpenter pools' candidate types (every type of their families offered
    in a zone), and the facts of all of them."""
    try:
        azs = ec2.describe_availability_zones(
            Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
        )["AvailabilityZones"]
        zones = tuple(
            AvailabilityZone(z["ZoneName"], z["ZoneId"])
            for z in sorted(azs, key=lambda z: z["ZoneName"])
            if z.get("State", "available") == "available"
        )
        name_of = {z.zone_id: z.name for z in zones}
        types = sorted({p.instance_type for p in cfg.node_pools.values()})
        offerings: dict[str, set[str]] = {z.name: set() for z in zones}
        region_types: frozenset[str] = frozenset()
        suggestions: dict[str, InstanceFacts] = {}
        instances: dict[str, InstanceFacts] = {}
        if types:
            _add_offerings(ec2, types, name_of, offerings)
            offered = sorted({t for ts in offerings.values() for t in ts})
            if set(offered) != set(types):
                everything = ec2.get_paginator("describe_instance_type_offerings").paginate(
                    LocationType="region"
                )
                region_types = frozenset(
                    o["InstanceType"] for p in everything for o in p["InstanceTypeOfferings"]
                )
                if any(p.gpu and p.instance_type not in offered for p in cfg.node_pools.values()):
                    suggestions = _gpu_suggestions(ec2, region_types)
            if offered:
                described = ec2.describe_instance_types(InstanceTypes=offered)["InstanceTypes"]
                instances = {
                    d["InstanceType"]: InstanceFacts.from_describe_instance_types(d) for d in described
                }
        instances.update(_karpenter_candidates(ec2, cfg, name_of, offerings))
    except (ClientError, BotoCoreError) as exc:
        return unreadable(
            "ec2:DescribeAvailabilityZones/DescribeInstanceTypeOfferings/DescribeInstanceTypes", exc
        )
    return RegionFacts(
        region=cfg.region,
        zones=zones,
        offerings={az: frozenset(ts) for az, ts in offerings.items()},
        instances=instances,
        region_types=region_types,
        by_zone_id=True,
        suggestions=suggestions,
    )


def _gpu_suggestions(ec2: Any, region_types: frozenset[str]) -> dict[str, InstanceFacts]:
    """Facts of the region's types with GPUs, as the plan has them (``infra/io/provider_facts.py``): what a
    GPU pool whose type is not offered is offered instead. The name patterns narrow the question
    (DescribeInstanceTypes takes wildcards in its instance-type filter); each type's GpuInfo decides."""
    pages = ec2.get_paginator("describe_instance_types").paginate(
        Filters=[{"Name": "instance-type", "Values": list(GPU_FAMILY_PATTERNS)}]
    )
    facts = (
        InstanceFacts.from_describe_instance_types(d)
        for page in pages
        for d in page["InstanceTypes"]
        if d["InstanceType"] in region_types
    )
    return {f.instance_type: f for f in facts if f.has_gpus}


# DescribeInstanceTypeOfferings takes the types as filter values; asked in slices of this many.
_OFFERING_FILTER_VALUES = 100


def _add_offerings(
    ec2: Any, types: list[str], name_of: Mapping[str, str], offerings: dict[str, set[str]]
) -> None:
    """Offerings of ``types`` per zone ID, recorded under this account's zone names."""
    for i in range(0, len(types), _OFFERING_FILTER_VALUES):
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": types[i : i + _OFFERING_FILTER_VALUES]}],
        )
        for page in pages:
            for o in page["InstanceTypeOfferings"]:
                if o["Location"] in name_of:
                    offerings[name_of[o["Location"]]].add(o["InstanceType"])


def _karpenter_candidates(
    ec2: Any, cfg: PlatformConfig, name_of: Mapping[str, str], offerings: dict[str, set[str]]
) -> dict[str, InstanceFacts]:
    """Every type of the Karpenter pools' families offered in a zone (added to ``offerings``), with its facts:
    what ``gpu_offer`` chooses the NodePool's types from, as the program does with the provider's answers.

    The families' types come from DescribeInstanceTypes with wildcard values (``g5.*``) on its
    ``instance-type`` filter, which the EC2 API reference documents with wildcards ("c5*"); their offerings
    from DescribeInstanceTypeOfferings by exact name, whose ``instance-type`` filter the reference documents
    without wildcards (and moto matches exactly). The same types and zones as the program's wildcard
    offerings call, from calls both AWS and the emulator answer as documented.
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html
    """
    patterns = karpenter_patterns(cfg)
    if not patterns:
        return {}
    described: dict[str, Mapping[str, Any]] = {}
    pages = ec2.get_paginator("describe_instance_types").paginate(
        Filters=[{"Name": "instance-type", "Values": patterns}]
    )
    for page in pages:
        for d in page["InstanceTypes"]:
            described[d["InstanceType"]] = d
    _add_offerings(ec2, sorted(described), name_of, offerings)
    offered = {t for ts in offerings.values() for t in ts}
    return {
        t: InstanceFacts.from_describe_instance_types(d) for t, d in sorted(described.items()) if t in offered
    }


def read_quotas(quotas: Any, codes: Iterable[str]) -> dict[str, float | Unreadable]:
    """EC2 vCPU quota values by code (``service-quotas`` GetServiceQuota)."""
    out: dict[str, float | Unreadable] = {}
    for code in codes:
        try:
            out[code] = float(quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        except (ClientError, BotoCoreError) as exc:
            out[code] = unreadable(f"servicequotas:GetServiceQuota {code}", exc)
    return out


def _reservation(r: Mapping[str, Any]) -> ReservationFacts:
    return ReservationFacts(
        id=r["CapacityReservationId"],
        instance_type=r.get("InstanceType", ""),
        availability_zone=r.get("AvailabilityZone", ""),
        availability_zone_id=r.get("AvailabilityZoneId", ""),
        state=r.get("State", ""),
        reservation_type=r.get("ReservationType", "default"),
        total_instances=int(r.get("TotalInstanceCount", 0)),
        available_instances=int(r.get("AvailableInstanceCount", 0)),
        instance_match_criteria=r.get("InstanceMatchCriteria", ""),
        platform=r.get("InstancePlatform", ""),
        placement_group_arn=r.get("PlacementGroupArn"),
        start_date=_iso(r.get("StartDate")),
        end_date=_iso(r.get("EndDate")),
    )


def read_reservations(ec2: Any, ids: Iterable[str]) -> dict[str, ReservationFacts | Unreadable | None]:
    """Each reservation by ID; None when EC2 does not know it (``InvalidCapacityReservationId.NotFound``)."""
    out: dict[str, ReservationFacts | Unreadable | None] = {}
    for rid in sorted(set(ids)):
        try:
            found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            out[rid] = None if "NotFound" in code else unreadable("ec2:DescribeCapacityReservations", exc)
            continue
        except BotoCoreError as exc:
            out[rid] = unreadable("ec2:DescribeCapacityReservations", exc)
            continue
        out[rid] = _reservation(found[0]) if found else None
    return out


def read_addon_versions(
    eks: Any, kubernetes_version: str, names: Iterable[str]
) -> dict[str, tuple[AddonVersion, ...] | Unreadable]:
    """The versions EKS lists per add-on for ``kubernetes_version`` (newest first, as EKS returns them)."""
    out: dict[str, tuple[AddonVersion, ...] | Unreadable] = {}
    for name in sorted(set(names)):
        versions: list[AddonVersion] = []
        pages = eks.get_paginator("describe_addon_versions").paginate(
            kubernetesVersion=kubernetes_version, addonName=name
        )
        try:
            for page in pages:
                for addon in page.get("addons", []):
                    if addon.get("addonName") != name:
                        continue
                    for v in addon.get("addonVersions", []):
                        default = any(
                            c.get("clusterVersion") == kubernetes_version and c.get("defaultVersion")
                            for c in v.get("compatibilities", [])
                        )
                        versions.append(AddonVersion(v["addonVersion"], default))
        except (ClientError, BotoCoreError) as exc:
            out[name] = unreadable(f"eks:DescribeAddonVersions {name}", exc)
            continue
        out[name] = tuple(versions)
    return out


def read_autoscaling_role(iam: Any) -> bool | Unreadable:
    try:
        iam.get_role(RoleName=AUTOSCALING_ROLE)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return False
        return unreadable("iam:GetRole", exc)
    except BotoCoreError as exc:
        return unreadable("iam:GetRole", exc)
    return True


def probe_tcp(url: str, timeout: float) -> tuple[bool, str]:
    """Whether ``url``'s host answers a TLS handshake on its port (443 for https); why not, if it does not.

    The handshake does not verify the certificate: the question is whether the network path is open.
    """
    parsed = urlparse(url)
    host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return False, f"{host} does not resolve from here ({exc.strerror or exc})"
    try:
        with socket.create_connection(addresses[0][4][:2], timeout=timeout) as sock:
            if parsed.scheme == "https":
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                with context.wrap_socket(sock, server_hostname=host):
                    pass
    except (OSError, ssl.SSLError) as exc:
        return False, f"{host}:{port}: {exc}"
    return True, ""


def read_cluster(
    eks: Any, name: str, probe: Probe, timeout: float = 5.0
) -> ClusterEndpointFacts | Unreadable | None:
    """The cluster's endpoint and whether it answers from here; None when the cluster does not exist yet."""
    try:
        c = eks.describe_cluster(name=name)["cluster"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        return unreadable("eks:DescribeCluster", exc)
    except BotoCoreError as exc:
        return unreadable("eks:DescribeCluster", exc)
    vpc = c.get("resourcesVpcConfig", {})
    endpoint = c.get("endpoint", "")
    reachable, why = probe(endpoint, timeout) if endpoint else (False, "no endpoint yet")
    return ClusterEndpointFacts(
        name=name,
        status=c.get("status", ""),
        endpoint=endpoint,
        public_access=bool(vpc.get("endpointPublicAccess")),
        private_access=bool(vpc.get("endpointPrivateAccess")),
        public_access_cidrs=tuple(vpc.get("publicAccessCidrs", [])),
        reachable=reachable,
        reach_error=why,
    )


def read_images(ecr: Any, wanted: Sequence[tuple[str, str]]) -> dict[str, bool | Unreadable]:
    """'<repository>@<digest>' -> whether the caller's registry in ``ecr``'s region holds that image
    (ecr:DescribeImages by digest; a missing repository or image is False)."""
    out: dict[str, bool | Unreadable] = {}
    for repository, digest in wanted:
        key = f"{repository}@{digest}"
        try:
            ecr.describe_images(repositoryName=repository, imageIds=[{"imageDigest": digest}])
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("RepositoryNotFoundException", "ImageNotFoundException"):
                out[key] = False
            else:
                out[key] = unreadable("ecr:DescribeImages", exc)
            continue
        except BotoCoreError as exc:
            out[key] = unreadable("ecr:DescribeImages", exc)
            continue
        out[key] = True
    return out


def gather_live_facts(
    cfg: PlatformConfig,
    clients: Clients,
    *,
    probe: Probe = probe_tcp,
    copied: Sequence[tuple[str, str]] = (),
) -> tuple[LiveFacts, RegionFacts | Unreadable | None]:
    """Everything preflight asks the account about one stack. Stops early when the credentials or the
    region do not work (every further call would fail the same way). ``copied``: (repository, digest) of
    the copy area's images the stack runs (``infra/mirror``), looked up in the stack's registry."""
    region, home = cfg.region, home_region(cfg.region)
    identity = read_credentials(clients("sts", home))
    if isinstance(identity, Unreadable):
        return LiveFacts(region=region, identity=identity), None
    opt_status = read_region_opt_status(clients("account", home), region)
    slr = read_autoscaling_role(clients("iam", home))
    disabled = isinstance(opt_status, str) and opt_status not in ("ENABLED", "ENABLED_BY_DEFAULT")
    regional = None if disabled else read_identity(clients("sts", region))
    # Route 53 is global: read even when the stack's region does not answer
    global_dns = _global_dns(cfg, clients)
    live = LiveFacts(
        region=region,
        identity=identity,
        region_opt_status=opt_status,
        regional_identity=regional,
        autoscaling_role=slr,
        global_dns=global_dns,
    )
    if not live.region_usable:
        return live, None
    ec2 = clients("ec2", region)
    facts = read_region_facts(ec2, cfg)
    reservations = [p.capacity_reservation.id for p in cfg.node_pools.values() if p.capacity_reservation]
    live = LiveFacts(
        region=region,
        identity=identity,
        region_opt_status=opt_status,
        regional_identity=regional,
        autoscaling_role=slr,
        quotas=read_quotas(clients("service-quotas", region), [q.code for q in QUOTAS]),
        reservations=read_reservations(ec2, reservations),
        addon_versions=read_addon_versions(
            clients("eks", region),
            cfg.cluster.kubernetes_version,
            {a: v for a, v in cfg.cluster.addon_versions().items() if v},
        ),
        cluster=read_cluster(clients("eks", region), cfg.names.cluster, probe),
        global_dns=global_dns,
        copied_images=read_images(clients("ecr", region), copied),
    )
    return live, facts


def _global_dns(cfg: PlatformConfig, clients: Clients) -> GlobalDnsFacts | Unreadable | None:
    """The global endpoint's zone (infer stacks with ``inference.global_endpoint`` and a zone)."""
    from infra.io.global_dns import read_global_dns

    serving = cfg.inference
    ge = serving.global_endpoint if serving is not None else None
    if ge is None or serving is None or not serving.https.dns_zone_id or not serving.https.dns_zone_name:
        return None
    return read_global_dns(
        clients("route53", "us-east-1"),
        zone_id=serving.https.dns_zone_id,
        zone_name=serving.https.dns_zone_name,
        name=ge.name,
    )


# -- project-wide: the state backend and the secrets provider (rollout.yaml) -------------------------------


def read_backend(url: str, clients: Clients) -> BackendFacts:
    """Whether the Pulumi state backend answers: S3 HeadBucket, or a writable folder for ``file://``.
    Pulumi Cloud (``https://``), ``gs://`` and ``azblob://`` are not checked here."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        region = parse_qs(parsed.query).get("region", [None])[0] or "us-east-1"
        try:
            clients("s3", region).head_bucket(Bucket=parsed.netloc)
        except (ClientError, BotoCoreError) as exc:
            return BackendFacts(url, False, str(unreadable(f"s3:HeadBucket {parsed.netloc}", exc)))
        return BackendFacts(url, True, f"bucket {parsed.netloc} answers")
    if parsed.scheme == "file":
        folder = Path(os.path.expanduser(parsed.netloc + parsed.path) if parsed.netloc else parsed.path)
        if folder.is_dir() and os.access(folder, os.W_OK):
            return BackendFacts(url, True, f"{folder} is a writable folder")
        return BackendFacts(url, False, f"{folder} is not a writable folder")
    return BackendFacts(
        url, False, f"{parsed.scheme}:// backends are not checked by preflight", checked=False
    )


def read_secrets_provider(
    provider: str, clients: Clients, env: Mapping[str, str] | None = None
) -> SecretsProviderFacts:
    """``awskms://<key id | alias/... | /arn>?region=...``: KMS DescribeKey says Enabled;
    ``passphrase``: PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE is set."""
    env = os.environ if env is None else env
    if provider == "passphrase":
        if env.get("PULUMI_CONFIG_PASSPHRASE") is not None:
            return SecretsProviderFacts(provider, True, "PULUMI_CONFIG_PASSPHRASE is set")
        path = env.get("PULUMI_CONFIG_PASSPHRASE_FILE")
        if path and Path(path).is_file():
            return SecretsProviderFacts(provider, True, f"PULUMI_CONFIG_PASSPHRASE_FILE={path}")
        return SecretsProviderFacts(provider, False, "neither PULUMI_CONFIG_PASSPHRASE nor _FILE is set")
    if provider.startswith("awskms://"):
        rest, _, query = provider.removeprefix("awskms://").partition("?")
        key = rest.lstrip("/")
        region = parse_qs(query).get("region", [None])[0] or "us-east-1"
        try:
            meta = clients("kms", region).describe_key(KeyId=key)["KeyMetadata"]
        except (ClientError, BotoCoreError) as exc:
            return SecretsProviderFacts(provider, False, str(unreadable(f"kms:DescribeKey {key}", exc)))
        state = meta.get("KeyState", "")
        return SecretsProviderFacts(provider, state == "Enabled", f"key {meta.get('KeyId')} is {state}")
    return SecretsProviderFacts(
        provider, False, "this secrets provider is not checked by preflight", checked=False
    )
