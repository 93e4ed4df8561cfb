"""``aiplat preflight`` against a local moto server over HTTP, each failing case set up in the emulator.

Where moto 5.2.5 lacks the API (Account GetRegionOptStatus, Service Quotas for ec2, EC2
DescribeCapacityReservations, EKS DescribeAddonVersions) the client gets botocore's Stubber for those
operations only (``tests/support/stubbing.py``): it checks each request's parameters and each response
against the real API model. Everything else (STS, IAM, EC2 zones/offerings/instance types, EKS clusters,
S3, KMS) is moto answering real HTTP requests.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli.main import main
from infra.io.aws_live import probe_tcp
from infra.io.stackfiles import load_stack_config
from infra.mirror.digests import DIGESTS
from infra.mirror.rules import copied_images
from infra.ops.preflight import CheckRow, Status, preflight, preflight_project, preflight_stack
from infra.preflight.quotas import QUOTAS
from infra.rules import Phase
from infra.schema.parse import parse_platform_config
from infra.schema.platform import PlatformConfig
from infra.stack.registry import registered
from infra.stack.rollout import RolloutConfig
from tests.conftest import REPO
from tests.support.stubbing import OperationStubber
from trainer.tools.moto_server import MotoServer

CR = "cr-0123456789abcdef0"
GRAFANA = DIGESTS[("docker.io/grafana/grafana", "13.2.0")].digest
ROLLOUT = RolloutConfig(
    backend_url="s3://state-bucket/aiplat?region=us-east-1",
    secrets_provider="awskms://alias/aiplat-pulumi?region=us-east-1",
)


class Account:
    """The ``Clients`` factory preflight gets: boto3 clients on the moto server, one per service and region,
    and Stubbers on the operations moto does not implement."""

    def __init__(self, server: MotoServer) -> None:
        self.server = server
        self._clients: dict[tuple[str, str], Any] = {}
        self._stubbers: dict[tuple[str, str], OperationStubber] = {}

    def __call__(self, service: str, region: str) -> Any:
        if (service, region) not in self._clients:
            self._clients[(service, region)] = self.server.client(service, region)
        return self._clients[(service, region)]

    def stub(self, service: str, region: str, operation: str) -> OperationStubber:
        key = (service, region)
        if key not in self._stubbers:
            self._stubbers[key] = OperationStubber(self(service, region), [operation])
            self._stubbers[key].activate()
        return self._stubbers[key]

    def all_answered(self) -> None:
        for stubber in self._stubbers.values():
            stubber.assert_no_pending_responses()

    # -- answers for the APIs moto lacks ---------------------------------------------------------------

    def opt_status(self, region: str, status: str) -> None:
        self.stub("account", "us-east-1", "GetRegionOptStatus").add_response(
            "get_region_opt_status",
            {"RegionName": region, "RegionOptStatus": status},
            {"RegionName": region},
        )

    def quotas(self, region: str, **values: float) -> None:
        """Every vCPU quota preflight reads, in its order; ``values`` by code, default 10,000 vCPUs."""
        stub = self.stub("service-quotas", region, "GetServiceQuota")
        for q in QUOTAS:
            stub.add_response(
                "get_service_quota",
                {
                    "Quota": {
                        "ServiceCode": "ec2",
                        "QuotaCode": q.code,
                        "QuotaName": q.name,
                        "Value": float(values.get(q.code.replace("-", "_"), 10_000)),
                        "Unit": "None",
                        "Adjustable": True,
                        "GlobalQuota": False,
                    }
                },
                {"ServiceCode": "ec2", "QuotaCode": q.code},
            )

    def addons(self, cfg: PlatformConfig, listed: dict[str, list[str]] | None = None) -> None:
        """EKS's answer per add-on (sorted by name, as preflight asks): ``listed`` versions (newest first,
        the first is the default), else the pinned one."""
        k8s = cfg.cluster.kubernetes_version
        stub = self.stub("eks", cfg.region, "DescribeAddonVersions")
        for name, pinned in sorted(cfg.cluster.addon_versions().items()):
            versions = (listed or {}).get(name, [pinned])
            stub.add_response(
                "describe_addon_versions",
                {
                    "addons": [
                        {
                            "addonName": name,
                            "type": "networking",
                            "addonVersions": [
                                {
                                    "addonVersion": v,
                                    "architecture": ["amd64"],
                                    "compatibilities": [{"clusterVersion": k8s, "defaultVersion": i == 0}],
                                }
                                for i, v in enumerate(versions)
                            ],
                        }
                    ]
                },
                {"kubernetesVersion": k8s, "addonName": name},
            )

    def reservation(self, region: str, rid: str, **fields: Any) -> None:
        stub = self.stub("ec2", region, "DescribeCapacityReservations")
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [{"CapacityReservationId": rid, **fields}]},
            {"CapacityReservationIds": [rid]},
        )

    def no_reservation(self, region: str, rid: str) -> None:
        self.stub("ec2", region, "DescribeCapacityReservations").add_client_error(
            "describe_capacity_reservations",
            service_error_code="InvalidCapacityReservationId.NotFound",
            service_message=f"The capacity reservation ID '{rid}' does not exist",
            expected_params={"CapacityReservationIds": [rid]},
        )

    def healthy(self, cfg: PlatformConfig, opt: str = "ENABLED_BY_DEFAULT", **quotas: float) -> None:
        """The Auto Scaling role in the emulator and healthy answers for what moto lacks."""
        self("iam", "us-east-1").create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
        self.opt_status(cfg.region, opt)
        self.quotas(cfg.region, **quotas)
        self.addons(cfg)
        self.copies(cfg)

    def copies(self, cfg: PlatformConfig, skip: int = 0) -> None:
        """The copy area's images in the stack's registry, as `aiplat images copy` leaves them (ECR keeps
        the digest it is given); the first ``skip`` are left out."""
        ecr = self("ecr", cfg.region)
        index = '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}'
        for repository, digest in copied_images(cfg)[skip:]:
            ecr.create_repository(repositoryName=repository)
            ecr.put_image(repositoryName=repository, imageManifest=index, imageDigest=digest)

    def zone_id(self, region: str, name: str) -> str:
        zones = self("ec2", region).describe_availability_zones()["AvailabilityZones"]
        return next(z["ZoneId"] for z in zones if z["ZoneName"] == name)


@pytest.fixture
def account(aws: MotoServer) -> Account:
    return Account(aws)


def _raw(stack: str, folder: Path = REPO / "stacks") -> dict:
    return yaml.safe_load((folder / f"Pulumi.{stack}.yaml").read_text())["config"]["aiplat:platform"]


# The chart images without a digest (infra/mirror/digests.py) refuse every shipped stack until they are
# pinned (a check of the config alone), and those of the copy area until `aiplat images copy` ran (a check
# of the account): test_unpinned_chart_images_refuse_the_stack and
# test_an_image_not_copied_yet_refuses_the_stack assert it; the other tests look at the rest.
CONFIG_IMAGE_RULES = ("chart-images-pinned", "chart-images-pinned-to-deploy")
IMAGE_RULES = (*CONFIG_IMAGE_RULES, "copied-images-present")


def _problems(rows: list[CheckRow]) -> list[CheckRow]:
    return [r for r in rows if r.status in (Status.fail, Status.warn) and r.check not in IMAGE_RULES]


def _one(rows: list[CheckRow], check: str, status: Status = Status.fail) -> CheckRow:
    found = [r for r in rows if r.check == check and r.status is status]
    assert len(found) == 1, [(r.check, r.status, r.detail) for r in rows]
    return found[0]


def test_healthy_account_passes(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg)
    rows = preflight_stack("prod-us-train", cfg, account)
    account.all_answered()
    assert _problems(rows) == []
    # what was not checked says why: a train stack serves no global endpoint, and there is no cluster yet
    skipped = {r.check: r.detail for r in rows if r.status is Status.skip}
    assert skipped == {
        "global-endpoint-dns": "the stack serves no global endpoint (inference.global_endpoint unset)",
        "cluster-endpoint-reachable": "cluster aiplat-prod-train does not exist yet: nothing to reach before "
        "the first up (aiplat rollout's health gate checks it after)",
        "capacity-reservations": "no pool names a capacity reservation (capacity_reservation)",
    }
    assert "account 123456789012 is the stack's" in _one(rows, "account-matches", Status.passed).detail
    # what the checks saw: vCPUs from moto's instance data times the config's max_size (4 x p5.48xlarge,
    # 4 x m6i.2xlarge and the publisher's 2 x m6i.xlarge)
    quotas = sorted(r.detail for r in rows if r.check == "vcpu-quotas")
    assert quotas == [
        "Running On-Demand P instances (L-417A185B): 768 of 10000 vCPUs at max_size",
        "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A): 40 of 10000 vCPUs "
        "at max_size",
    ]
    details = " | ".join(r.detail for r in rows)
    assert "account 123456789012 as arn:aws:sts::123456789012:user/moto" in details
    assert "us-east-1 is ENABLED_BY_DEFAULT" in details
    checks = {r.check for r in rows}
    assert {"pool-zones-usable", "efa-supported", "instance-type-offered"} <= checks  # the plan rules, again


def test_unpinned_chart_images_refuse_the_stack(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg)
    rows = preflight_stack("prod-us-train", cfg, account)
    refused = {
        r.detail for r in rows if r.check == "chart-images-pinned-to-deploy" and r.status is Status.fail
    }
    # one row per chart with an image not from our ECR by digest, naming the image
    assert any("ghcr.io/kubeflow/trainer/trainer-controller-manager" in d for d in refused), refused
    assert any("eks/aws-efa-k8s-device-plugin" in d for d in refused), refused
    # the charts whose digests are all recorded pass (cert-manager, Karpenter, Kueue, NVIDIA's device plugin)
    passed = ("cert-manager-controller", "karpenter/controller", "kueue/kueue", "nvidia/k8s-device-plugin")
    assert not any(name in d for d in refused for name in passed), refused


def test_an_image_not_copied_yet_refuses_the_stack(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    wanted = copied_images(cfg)
    # Grafana's images (Docker Hub: no rule in the shipped stacks) have digests, so they are to be copied
    assert ("aiplat-prod-train/copy/docker.io/grafana/grafana", GRAFANA) in wanted, wanted
    account("iam", "us-east-1").create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
    account.opt_status(cfg.region, "ENABLED_BY_DEFAULT")
    account.quotas(cfg.region)
    account.addons(cfg)
    account.copies(cfg, skip=1)
    rows = preflight_stack("prod-us-train", cfg, account)
    row = _one(rows, "copied-images-present")
    repository, digest = wanted[0]
    assert (
        f"1 image(s) of the copy area are not in the stack's registry yet: {repository}@{digest}"
        in row.detail
    )
    assert row.fix is not None and "aiplat images copy --stack prod-us-train" in row.fix


def test_pool_zone_that_does_not_offer_the_type_by_zone_id(account: Account) -> None:
    # Find, in the emulator, a us-east-1 zone whose zone ID does not offer p4d.24xlarge.
    ec2 = account("ec2", "us-east-1")
    zones = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    offered = {
        o["Location"]
        for o in ec2.describe_instance_type_offerings(
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}],
        )["InstanceTypeOfferings"]
    }
    missing = next(name for name, zid in sorted(zones.items()) if zid not in offered)
    raw = _raw("prod-us-train")
    raw["network"]["availability_zones"] = sorted({"us-east-1a", "us-east-1b", missing})
    raw["node_pools"]["train"].update(instance_type="p4d.24xlarge", availability_zones=[missing])
    cfg = parse_platform_config(raw)
    account.healthy(cfg)
    row = _one(preflight_stack("prod-us-train", cfg, account), "pool-zones-usable")
    assert row.field == "aiplat:platform.node_pools.train.availability_zones"
    assert row.detail == f"p4d.24xlarge is not offered in {missing} ({zones[missing]})"
    assert row.fix and row.fix.startswith("use a zone that offers it: ")


def test_more_efa_interfaces_than_the_type_takes(account: Account) -> None:
    raw = _raw("prod-us-train")
    raw["node_pools"]["train"]["efa_interfaces"] = 33
    cfg = parse_platform_config(raw)
    account.healthy(cfg)
    row = _one(preflight_stack("prod-us-train", cfg, account), "efa-supported")
    assert row.detail == "33 but p5.48xlarge supports at most 32 EFA interfaces"
    assert row.fix == "set efa_interfaces to at most 32, or leave it out to attach all 32"


def test_missing_autoscaling_service_linked_role(account: Account) -> None:
    cfg = load_stack_config("prod-sg-infer")
    account.opt_status(cfg.region, "ENABLED_BY_DEFAULT")
    account.quotas(cfg.region)
    account.addons(cfg)  # the role is NOT created in the emulator
    # a fresh account deploys as it is (the EBS key names the role only in a condition): a note, no failure
    row = _one(
        preflight_stack("prod-sg-infer", cfg, account), "autoscaling-service-linked-role", Status.passed
    )
    assert "does not exist in this account yet; EKS creates it with the first node group" in row.detail


def test_opt_in_region_not_enabled(account: Account) -> None:
    cfg = load_stack_config("prod-hk-infer")
    account("iam", "us-east-1").create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
    account.opt_status("ap-east-1", "DISABLED")
    rows = preflight_stack("prod-hk-infer", cfg, account)
    account.all_answered()
    row = _one(rows, "region-enabled")
    assert row.detail == "ap-east-1 is DISABLED for this account (an opt-in region)"
    assert row.fix == "aws account enable-region --region-name ap-east-1, then wait until it is ENABLED"
    # each check that could not run is a skip row of its own, with the reason
    skipped = {r.check: r.detail for r in rows if r.status is Status.skip}
    assert skipped["vcpu-quotas"] == "not run: ap-east-1 does not answer for these credentials"
    assert skipped["regional-sts-works"] == (
        "sts.ap-east-1 not asked: ap-east-1 is not enabled for this account (region-enabled)"
    )


def test_regional_sts_refuses_the_credentials(account: Account) -> None:
    cfg = load_stack_config("prod-hk-infer")
    account.opt_status("ap-east-1", "ENABLED")
    stub = account.stub("sts", "ap-east-1", "GetCallerIdentity")
    stub.add_client_error(
        "get_caller_identity",
        service_error_code="InvalidClientTokenId",
        service_message="The security token included in the request is invalid.",
        http_status_code=403,
    )
    row = _one(preflight_stack("prod-hk-infer", cfg, account), "regional-sts-works")
    assert row.detail == (
        "the STS endpoint of ap-east-1 refused the credentials (sts:GetCallerIdentity: "
        "InvalidClientTokenId: The security token included in the request is invalid.)"
    )
    assert "enable it and wait until it is ENABLED" in (row.fix or "")


def test_on_demand_quota_below_max_size(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg, L_417A185B=192)
    row = _one(preflight_stack("prod-us-train", cfg, account), "vcpu-quotas")
    assert row.field == "aiplat:platform.node_pools.train.max_size"
    assert row.detail == (
        "Running On-Demand P instances (L-417A185B) is 192 vCPUs but the pools need 768: "
        "node_pools.train: 4 x p5.48xlarge (192 vCPUs)"
    )
    assert row.fix == (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 768 --region us-east-1, or lower max_size"
    )


def test_spot_quota_below_max_size_and_the_karpenter_limit(account: Account) -> None:
    """dev-us-train: the managed Spot pool at max_size and the Karpenter Spot pool at its GPU limit draw on
    one quota; the Karpenter pool's types are the account's (its families offered in the VPC's zones)."""
    cfg = load_stack_config("dev-us-train")
    account.healthy(cfg, L_3819A6DF=4)
    row = _one(preflight_stack("dev-us-train", cfg, account), "vcpu-quotas")
    # 2 x g5.xlarge (4 vCPUs) + 4 GPUs (gpu_limit) x 64 vCPUs per GPU (g4dn.16xlarge, g5.16xlarge and
    # g6.16xlarge: one GPU, 64 vCPUs; the first by name is named)
    assert row.field == "aiplat:platform"  # a managed pool and a Karpenter pool: the field of neither
    assert row.detail.startswith(
        "All G and VT Spot Instance Requests (L-3819A6DF) is 4 vCPUs but the pools need 264: "
        "node_pools.gpu: 2 x g5.xlarge (4 vCPUs); karpenter.spot-gpu: up to 4 GPUs (gpu_limit) as "
        "g4dn.16xlarge (64 vCPUs/GPU, the most of g4dn.16xlarge, g4dn.2xlarge, "
    )
    assert row.detail.endswith("g6.8xlarge, g6.xlarge) = 256 vCPUs")
    assert row.fix == (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF "
        "--desired-value 264 --region us-west-2, or lower max_size / gpu_limit"
    )


def test_g_quota_below_the_karpenter_limit_of_an_infer_stack(account: Account) -> None:
    """prod-hk-infer has no managed GPU pool: its G quota demand is the Karpenter pool's, from the types
    moto's ap-east-1 offers in the VPC's zones (read live: DescribeInstanceTypes with the families'
    wildcards, DescribeInstanceTypeOfferings by zone ID)."""
    cfg = load_stack_config("prod-hk-infer")
    account.healthy(cfg, opt="ENABLED", L_DB2E81BA=64)
    rows = preflight_stack("prod-hk-infer", cfg, account)
    account.all_answered()
    row = _one(rows, "vcpu-quotas")
    assert row.field == "aiplat:platform.cluster_services.karpenter.node_pools.gpu.gpu_limit"
    # 16 GPUs x 64 vCPUs per GPU: g4dn.16xlarge and g5.16xlarge carry one GPU and 64 vCPUs (the
    # 4-GPU g5.12xlarge/g4dn.12xlarge have 12 per GPU; the 8-GPU types exceed max_gpus_per_node 4)
    assert row.detail == (
        "Running On-Demand G and VT instances (L-DB2E81BA) is 64 vCPUs but the pools need 1024: "
        "karpenter.gpu: up to 16 GPUs (gpu_limit) as g4dn.16xlarge (64 vCPUs/GPU, the most of "
        "g4dn.12xlarge, g4dn.16xlarge, g4dn.2xlarge, g4dn.4xlarge, g4dn.8xlarge, g4dn.xlarge, g5.12xlarge, "
        "g5.16xlarge, g5.24xlarge, g5.2xlarge, g5.4xlarge, g5.8xlarge, g5.xlarge) = 1024 vCPUs"
    )
    assert row.fix == (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-DB2E81BA "
        "--desired-value 1024 --region ap-east-1, or lower gpu_limit"
    )
    # the Spot G quota is not asked for (the pool is on-demand only); the system pool's quota passes
    passed = sorted(r.detail for r in rows if r.check == "vcpu-quotas" and r.status is Status.passed)
    assert passed == [
        "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A): 12 of 10000 vCPUs "
        "at max_size"
    ]
    # the plan's rule, on the account's offerings: g5 and g4dn are offered in the VPC's zones
    assert _one(rows, "karpenter-gpu-types-offered", Status.passed)


def test_karpenter_pool_on_both_capacity_types_counts_against_both_quotas(account: Account) -> None:
    raw = _raw("prod-sg-infer")
    raw["cluster_services"]["karpenter"]["node_pools"]["gpu"]["capacity_types"] = ["on-demand", "spot"]
    cfg = parse_platform_config(raw)
    account.healthy(cfg, L_7212CCBC=96)
    rows = [r for r in preflight_stack("prod-sg-infer", cfg, account) if r.check == "vcpu-quotas"]
    failed = _one(rows, "vcpu-quotas")
    # p4de.24xlarge: 96 vCPUs, 8 GPUs -> 16 GPUs need 192 vCPUs of the P Spot quota
    assert failed.detail == (
        "All P Spot Instance Requests (L-7212CCBC) is 96 vCPUs but the pools need 192: karpenter.gpu: up to "
        "16 GPUs (gpu_limit) as p4de.24xlarge (12 vCPUs/GPU, the most of p4de.24xlarge) = 192 vCPUs; "
        "on-demand and spot both allowed: counted against both quotas"
    )
    assert "--quota-code L-7212CCBC --desired-value 192 --region ap-southeast-1" in (failed.fix or "")
    passed = {r.detail.split(":")[0] for r in rows if r.status is Status.passed}
    assert passed == {
        "Running On-Demand P instances (L-417A185B)",
        "Running On-Demand G and VT instances (L-DB2E81BA)",
        "All G and VT Spot Instance Requests (L-3819A6DF)",
        "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)",
    }


def _capacity_block() -> PlatformConfig:
    return parse_platform_config(_raw("capacity-block", REPO / "examples"))


def _block(account: Account, **changes: Any) -> dict[str, Any]:
    fields = {
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "AvailabilityZoneId": account.zone_id("us-east-1", "us-east-1a"),
        "State": "active",
        "ReservationType": "capacity-block",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "InstanceMatchCriteria": "targeted",
        "InstancePlatform": "Linux/UNIX",
        "StartDate": dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
        "EndDate": dt.datetime(2026, 12, 13, tzinfo=dt.UTC),
    }
    return {**fields, **changes}


def test_capacity_block_that_matches_passes(account: Account) -> None:
    cfg = _capacity_block()
    account.healthy(cfg)
    account.reservation("us-east-1", CR, **_block(account))
    rows = preflight_stack("capacity-block", cfg, account)
    account.all_answered()
    assert [r for r in rows if r.check == "capacity-reservations" and r.status is not Status.passed] == []
    zone_id = account.zone_id("us-east-1", "us-east-1a")
    assert _one(rows, "capacity-reservations", Status.passed).detail == (
        f"{CR}: active capacity-block for 2 x p5.48xlarge in us-east-1a ({zone_id})"
    )


def test_capacity_reservation_does_not_exist(account: Account) -> None:
    cfg = _capacity_block()
    account.healthy(cfg)
    account.no_reservation("us-east-1", CR)
    row = _one(preflight_stack("capacity-block", cfg, account), "capacity-reservations")
    assert row.detail == f"{CR} does not exist in us-east-1 for this account"
    assert row.fix == "copy the id from `aws ec2 describe-capacity-reservations` in the stack's region"


def test_capacity_block_in_another_zone_expired_and_an_odcr(account: Account) -> None:
    cfg = _capacity_block()
    account.healthy(cfg)
    other = account.zone_id("us-east-1", "us-east-1b")
    account.reservation(
        "us-east-1",
        CR,
        **_block(
            account,
            AvailabilityZone="us-east-1b",
            AvailabilityZoneId=other,
            State="expired",
            ReservationType="default",
            InstanceType="p5en.48xlarge",
            TotalInstanceCount=1,
        ),
    )
    rows = [r for r in preflight_stack("capacity-block", cfg, account) if r.check == "capacity-reservations"]
    by_field = {r.field.rsplit(".", 1)[1]: r for r in rows if r.status is not Status.passed}
    assert by_field["capacity_type"].detail == f"capacity_block but {CR} is an On-Demand Capacity Reservation"
    assert by_field["capacity_reservation"].detail == f"{CR} is expired; nothing can launch into it"
    assert by_field["instance_type"].detail == f"p5.48xlarge but reservation {CR} is for p5en.48xlarge"
    assert by_field["availability_zone"].detail == (
        f"{CR} is in us-east-1b ({other}) in this account, but the pool is configured for us-east-1a / zones "
        "['us-east-1a']"
    )
    assert by_field["availability_zone"].fix == (
        "set capacity_reservation.availability_zone and availability_zones to [us-east-1b]"
    )
    assert by_field["max_size"].status is Status.warn
    assert by_field["max_size"].fix == "set max_size to at most 1"


def test_scheduled_capacity_block_warns(account: Account) -> None:
    cfg = _capacity_block()
    account.healthy(cfg)
    account.reservation("us-east-1", CR, **_block(account, State="scheduled"))
    row = _one(preflight_stack("capacity-block", cfg, account), "capacity-reservations", Status.warn)
    assert (
        row.detail == f"{CR} is scheduled (starts 2026-11-29T00:00:00+00:00); nodes cannot launch before then"
    )
    assert row.fix == "keep min_size and desired_size at 0 until the reservation is active"


def test_addon_version_not_listed_by_eks(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    account("iam", "us-east-1").create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
    account.opt_status("us-east-1", "ENABLED_BY_DEFAULT")
    account.quotas("us-east-1")
    account.addons(cfg, listed={"vpc-cni": ["v1.21.1-eksbuild.9", "v1.21.1-eksbuild.3"]})
    row = _one(preflight_stack("prod-us-train", cfg, account), "addon-versions-listed")
    pinned = cfg.cluster.addon_versions()["vpc-cni"]
    assert row.field == "aiplat:platform.cluster.addons.vpc_cni"
    assert row.detail == (
        f"{pinned} is not a vpc-cni version EKS lists for Kubernetes 1.35 "
        "(listed: v1.21.1-eksbuild.9, v1.21.1-eksbuild.3)"
    )
    assert row.fix == "set vpc_cni: v1.21.1-eksbuild.9 (EKS's default)"


def test_private_cluster_endpoint_not_reachable(account: Account) -> None:
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg)
    account("eks", "us-east-1").create_cluster(
        name=cfg.names.cluster,
        roleArn="arn:aws:iam::123456789012:role/cluster",
        resourcesVpcConfig={
            "subnetIds": ["subnet-1"],
            "endpointPrivateAccess": True,
            "endpointPublicAccess": False,
        },
    )
    row = _one(preflight_stack("prod-us-train", cfg, account), "cluster-endpoint-reachable")
    assert f"cluster {cfg.names.cluster} (ACTIVE): https://" in row.detail
    assert "does not answer from here" in row.detail
    assert row.fix and row.fix.startswith("the endpoint is private: run from inside the VPC")


def test_project_backend_and_secrets_key(account: Account) -> None:
    rows = preflight_project(ROLLOUT, account)
    assert [(r.check, r.status) for r in rows] == [
        ("state-backend", Status.fail),
        ("secrets-provider", Status.fail),
    ]
    assert "s3:HeadBucket state-bucket: 404" in rows[0].detail
    assert "kms:DescribeKey alias/aiplat-pulumi: NotFoundException" in rows[1].detail

    account("s3", "us-east-1").create_bucket(Bucket="state-bucket")
    kms = account("kms", "us-east-1")
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName="alias/aiplat-pulumi", TargetKeyId=key)
    assert [r.status for r in preflight_project(ROLLOUT, account)] == [Status.passed, Status.passed]

    kms.disable_key(KeyId=key)
    secrets = preflight_project(ROLLOUT, account)[1]
    assert secrets.status is Status.fail and secrets.detail.endswith(f"(key {key} is Disabled)")


def _signed_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere boto3 looks (environment, shared files; instance metadata is off)."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def _only_credentials_fail(rows: list[CheckRow], problem: str) -> None:
    """credentials-work fails with ``problem`` and the one fix; every other check is a skip, none a pass."""
    failed = _one(rows, "credentials-work")
    assert failed.detail == problem
    assert failed.fix and failed.fix.startswith("sign in for the target account (aws sso login")
    assert [r for r in rows if r.status is Status.passed] == []
    # the chart images' refusal reads only the config: it fails without credentials too
    assert {r.status for r in rows if r.check in CONFIG_IMAGE_RULES} <= {Status.fail, Status.warn}
    rows = [r for r in rows if r.check not in CONFIG_IMAGE_RULES]
    others = {r.check: r.detail for r in rows if r.check != "credentials-work"}
    # the checks that reported 'pass' without running before; every one says why it did not run
    assert {"region-enabled", "regional-sts-works", "autoscaling-service-linked-role", "vcpu-quotas"} <= set(
        others
    )
    assert set(others.values()) == {"not run: the AWS credentials do not work (credentials-work)"}
    assert all(r.status is Status.skip for r in rows if r.check != "credentials-work")


def test_no_credentials_fails_one_check_and_skips_the_rest(
    aws: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from infra.io.aws_live import boto3_clients

    _signed_out(monkeypatch, tmp_path)
    rows = preflight_stack("prod-us-train", load_stack_config("prod-us-train"), boto3_clients())
    _only_credentials_fail(rows, "AWS credentials: none found (Unable to locate credentials)")


def test_expired_credentials_fail_one_check_and_skip_the_rest(account: Account) -> None:
    # moto accepts any session token; the expired one is STS's documented error, answered by the Stubber
    account.stub("sts", "us-east-1", "GetCallerIdentity").add_client_error(
        "get_caller_identity",
        service_error_code="ExpiredToken",
        service_message="The security token included in the request is expired",
        http_status_code=403,
    )
    rows = preflight_stack("prod-us-train", load_stack_config("prod-us-train"), account)
    account.all_answered()
    _only_credentials_fail(
        rows,
        "AWS credentials: they have expired (ExpiredToken: The security token included in the request is "
        "expired)",
    )


def test_one_api_denied_is_a_skip_naming_the_permission(account: Account) -> None:
    """Partial permissions: iam:GetRole denied. That check is a skip with the permission to add (not a
    pass, not a failure of the stack); every other check still runs."""
    cfg = load_stack_config("prod-us-train")
    account.opt_status(cfg.region, "ENABLED_BY_DEFAULT")
    account.quotas(cfg.region)
    account.addons(cfg)
    # moto does not enforce IAM policies by default: the denial is the Stubber's, in IAM's error shape
    account.stub("iam", "us-east-1", "GetRole").add_client_error(
        "get_role",
        service_error_code="AccessDenied",
        service_message="User: arn:aws:iam::123456789012:user/dev is not authorized to perform: iam:GetRole "
        "on resource: role AWSServiceRoleForAutoScaling",
        http_status_code=403,
        expected_params={"RoleName": "AWSServiceRoleForAutoScaling"},
    )
    rows = preflight_stack("prod-us-train", cfg, account)
    account.all_answered()
    row = _one(rows, "autoscaling-service-linked-role", Status.skip)
    assert row.detail == (
        "the Auto Scaling service-linked role not checked: iam:GetRole: AccessDenied: User: "
        "arn:aws:iam::123456789012:user/dev is not authorized to perform: iam:GetRole on resource: role "
        "AWSServiceRoleForAutoScaling"
    )
    assert row.fix == "allow iam:GetRole for these credentials"
    # the other skips are what a train stack before its first up has nothing of (test_healthy_account_passes)
    nothing_here = {"global-endpoint-dns", "cluster-endpoint-reachable", "capacity-reservations"}
    not_passed = [r.check for r in rows if r.status is not Status.passed and r.check not in IMAGE_RULES]
    assert [c for c in not_passed if c not in nothing_here] == ["autoscaling-service-linked-role"]
    assert _one(rows, "credentials-work", Status.passed) and _one(rows, "region-enabled", Status.passed)


def test_cli_without_credentials_prints_one_line_and_exits_6(
    aws: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _signed_out(monkeypatch, tmp_path)
    assert main(["preflight", "--stack", "prod-sg-infer"]) == 6  # EXIT_AWS: nothing else could be checked
    captured = capsys.readouterr()
    assert captured.err.startswith("error: AWS credentials: none found (Unable to locate credentials); fix: ")
    assert len(captured.err.splitlines()) == 1 and "pass" not in captured.out


def test_cli_table_and_exit_codes(
    account: Account, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CLI with boto3's default clients on the moto server: the APIs moto lacks show as
    'not checked' warnings (not as passes), the missing role fails with its fix."""
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    assert main(["preflight", "--stack", "prod-sg-infer"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    # a fresh account: the missing Auto Scaling role is a note (the EBS key names it only in a condition)
    assert "autoscaling-service-linked-role │ pass" in out
    # an API the endpoint lacks: the check did not run, a skip with the reason
    assert (
        "region-enabled │ skip │ aiplat:platform.region │ opt-in status of ap-southeast-1 not checked: "
        "account:GetRegionOptStatus: 404: the endpoint does not implement this API"
    ) in out

    account("iam", "us-east-1").create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
    account("s3", "us-east-1").create_bucket(Bucket="aiplat-pulumi-state")
    kms = account("kms", "us-east-1")
    kms.create_alias(AliasName="alias/aiplat-pulumi", TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
    # what is left: the stack file's example zone (Z0000000000000EXAMPLE) of the global endpoint is not
    # in this account (the README has the deployer set a zone of their own first)
    assert main(["preflight", "--stack", "prod-sg-infer", "--problems-only"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    # and the charts whose images are not from our ECR by digest (one row each, infra/mirror/pins.py)
    refused = out.count("chart-images-pinned-to-deploy │ fail")
    # and the copy area's images, not copied into this fresh account (one row)
    assert "copied-images-present │ fail" in out and "aiplat images copy --stack prod-sg-infer" in out
    assert refused >= 1 and f" {2 + refused} fail" in out and "warn" in out
    assert (
        "global-endpoint-dns │ fail │ aiplat:platform.inference.https.dns_zone_id │ Route 53 has no hosted "
        "zone Z0000000000000EXAMPLE"
    ) in out


def test_probe_answers_only_when_something_listens() -> None:
    import socket
    import threading

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        accepting = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
        accepting.start()
        assert probe_tcp(f"http://127.0.0.1:{port}/", 2) == (True, "")
        # the probe's connection is queued, so accept returns: wait for it before the listener closes (on a
        # busy machine the thread may not have run yet, and would then accept on a closed socket)
        accepting.join()
    # A port held but not listening refuses (holding it keeps the kernel from connecting the probe to itself).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        ok, why = probe_tcp(f"http://127.0.0.1:{held.getsockname()[1]}/", 2)
    assert not ok and "Connection refused" in why
    ok, why = probe_tcp("https://nowhere.invalid/", 2)
    assert not ok and "does not resolve from here" in why


def test_every_stack_in_one_run(account: Account) -> None:
    stacks = [(s, load_stack_config(s)) for s in ("prod-us-train", "prod-sg-infer")]
    seen: list[str] = []
    report = preflight(stacks, account, rollout=None, on_stack=seen.append)
    assert seen == ["prod-us-train", "prod-sg-infer"]
    assert {r.scope for r in report.rows} == {"prod-us-train", "prod-sg-infer"}
    # an empty account: the missing Auto Scaling role fails nothing (EKS creates it with the first node group)
    assert not [
        r for r in report.rows if r.check == "autoscaling-service-linked-role" and r.status.value == "fail"
    ]


def test_credentials_of_another_account_are_refused_naming_both(account: Account) -> None:
    raw = _raw("prod-us-train")
    raw["security"]["account"]["id"] = "210987654321"
    cfg = parse_platform_config(raw)
    account.healthy(cfg)
    row = _one(preflight_stack("prod-us-train", cfg, account), "account-matches")
    assert row.field == "aiplat:platform.security.account.id"
    assert row.detail == "is 210987654321 but the credentials are of account 123456789012"
    assert row.fix is not None and "credentials of account 210987654321" in row.fix


def test_no_check_that_did_not_run_passes(account: Account) -> None:
    """A preflight check passes only with what it saw (an info finding): one that had nothing on the stack to
    look at is a skip with the reason, as is one whose inputs were not read."""
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg)
    rows = preflight_stack("prod-us-train", cfg, account)
    descriptions = {r.name: r.description.replace("``", "") for r in registered().values()}
    plan_rules = {r.name for r in registered().values() if Phase.plan in r.phases}
    for r in rows:
        if r.status is Status.passed and r.check not in plan_rules:
            assert r.detail != descriptions[r.check], f"{r.check} passed without saying what it saw"
        if r.status is Status.skip:
            assert r.detail, r.check


def test_cli_json(account: Account, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = load_stack_config("prod-us-train")
    account.healthy(cfg)
    code = main(["preflight", "--stack", "prod-us-train", "--json"])
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["scope"], r["check"]): r for r in doc["rows"]}
    assert rows[("prod-us-train", "global-endpoint-dns")]["status"] == "skip"
    assert rows[("prod-us-train", "account-matches")]["status"] == "pass"
    assert doc["counts"]["fail"] == sum(r["status"] == "fail" for r in doc["rows"])
    assert code == (1 if doc["counts"]["fail"] else 0)


def test_cli_refuses_credentials_of_another_account(
    account: Account, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.prod-us-train.yaml").read_text())
    doc["config"]["aiplat:platform"]["security"]["account"]["id"] = "210987654321"
    (tmp_path / "Pulumi.prod-us-train.yaml").write_text(yaml.safe_dump(doc))
    account.healthy(load_stack_config("prod-us-train"))
    code = main(["preflight", "--stack", "prod-us-train", "--stacks-dir", str(tmp_path), "--problems-only"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1
    assert (
        "account-matches │ fail │ aiplat:platform.security.account.id │ is 210987654321 but the "
        "credentials are of account 123456789012"
    ) in out


def test_preflight_suggests_what_the_plan_suggests_for_a_gpu_type_not_offered(aws) -> None:
    # preflight reads the facts with boto3 (moto over HTTP): a GPU pool's type not offered gets the region's
    # GPU types with their facts, so the offering rule can keep efa and the GPU count as it does at plan
    from infra.core.facts import RegionFacts
    from infra.io.aws_live import read_region_facts

    raw = yaml.safe_load((REPO / "stacks" / "Pulumi.prod-us-train.yaml").read_text())["config"]
    raw = raw["aiplat:platform"]
    raw.update(region="eu-central-1")
    raw["node_pools"]["train"]["availability_zones"] = ["eu-central-1a"]
    facts = read_region_facts(aws.client("ec2", "eu-central-1"), parse_platform_config(raw))
    assert isinstance(facts, RegionFacts), facts
    assert "p5.48xlarge" not in facts.region_types
    assert facts.suggestions and all(f.has_gpus for f in facts.suggestions.values())
    assert set(facts.suggestions) <= facts.region_types
    assert facts.suggestions["p4d.24xlarge"].efa_supported
