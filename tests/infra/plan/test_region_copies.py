"""A copy of prod-sg-infer in each commercial region the schema accepts (``known_regions``) whose offered GPU
types its inference pool can use (moto's offering data, the plan's own ``gpu_offer``) plans offline, as the
issue's new user tried for Tokyo, Seoul, Frankfurt and Mumbai; where the region offers a single one of the
pool's families the plan refuses it on the pool's field (the rule 'karpenter-gpu-types-offered'), never with
a data call it cannot answer.

The copies are planned in groups, one folder each (the shipped stacks, the group's copies, prod-us-train
replicating to them): prod-us-train replicating to more than seven regions in all exceeds IAM's policy
quotas (the plan refuses it), so one folder cannot hold every copy. About 25 regions: ~2-4 minutes on two
cores, hence ``slow``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from infra.core.errors import ConfigErrors
from infra.io import snapshot
from infra.io.regions import known_regions
from infra.io.stackfiles import load_stack_config
from infra.karpenter.gpu_offers import gpu_offer
from infra.plan.lb_zones import LB_HOSTED_ZONES
from infra.plan.runner import run_plan, stack_file_plan
from infra.storage.documents import ELB_LOG_ACCOUNTS
from tests.conftest import REPO

pytestmark = pytest.mark.slow

SOURCE = "prod-sg-infer"
# the shipped stacks' regions are planned by their own tests; an infer stack in its train stack's region is
# not a replication target (storage.replicate_to excludes the train stack's own region)
GROUP = 5
# the regions the user tried
TRIED = ("ap-northeast-1", "ap-northeast-2", "eu-central-1", "ap-south-1")
# what a region may lack for the copy as it is: its GPU pool's families (two needed), three zones, the
# system pool's instance type
LACKING = (
    "karpenter.node_pools.gpu.instance_families",
    "network.az_count",
    "node_pools.system.instance_type",
)


def _usable_regions() -> list[str]:
    """Regions with offline facts where a GPU type of prod-sg-infer's inference pools is offered."""
    cfg = load_stack_config(SOURCE)
    assert cfg.inference is not None and cfg.storage.source_stack
    taken = {load_stack_config(s).region for s in ("prod-hk-infer", SOURCE, cfg.storage.source_stack)}
    pools = [
        cfg.cluster_services.karpenter.node_pools[p] for p in cfg.inference.models["gpt2-small"].node_pools
    ]
    regions = []
    for region in sorted(known_regions() - taken):
        if not snapshot.offline_aws(region).has_region:
            continue  # refused in one line naming `aiplat facts refresh` (tests/infra/plan/test_regions.py)
        copy = cfg.model_copy(update={"region": region})
        facts = snapshot.region_facts(copy)
        if any(gpu_offer(copy, facts, pool).instance_types for pool in pools):
            regions.append(region)
    return regions


def _folder(root: Path, regions: list[str]) -> tuple[Path, dict[str, str]]:
    """The shipped stacks, a copy of prod-sg-infer per region (its own VPC range), and its source stack
    replicating to those regions. Returns the folder and region -> copy's stack name."""
    folder = root / regions[0]
    shutil.copytree(REPO / "stacks", folder)
    doc = yaml.safe_load((folder / f"Pulumi.{SOURCE}.yaml").read_text())
    source = doc["config"]["aiplat:platform"]["storage"]["source_stack"]
    train = yaml.safe_load((folder / f"Pulumi.{source}.yaml").read_text())
    names = {}
    for i, region in enumerate(regions):
        copy = yaml.safe_load(yaml.safe_dump(doc))
        copy["config"]["aiplat:platform"]["region"] = region
        copy["config"]["aiplat:platform"]["network"]["vpc_cidr"] = f"10.{100 + i}.0.0/16"
        names[region] = f"prod-{region}-infer"
        (folder / f"Pulumi.{names[region]}.yaml").write_text(yaml.safe_dump(copy, sort_keys=False))
        train["config"]["aiplat:platform"]["storage"]["replicate_to"].append(region)
    (folder / f"Pulumi.{source}.yaml").write_text(yaml.safe_dump(train, sort_keys=False))
    return folder, names


def test_a_copy_of_prod_sg_infer_plans_in_every_region_offering_its_gpus(tmp_path) -> None:
    regions = _usable_regions()
    assert set(TRIED) <= set(regions), regions
    planned, refused, problems = [], [], []
    for start in range(0, len(regions), GROUP):
        folder, names = _folder(tmp_path, regions[start : start + GROUP])
        for region, stack in names.items():
            try:
                plan = run_plan(stack, stacks_dir=folder)
            except ConfigErrors as exc:
                # the region offers less than the copy asks: refused on those fields, each with its fix
                if all(e.field.endswith(LACKING) for e in exc.errors):
                    refused.append(region)
                else:
                    problems.append(f"{region}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 (every region's outcome is reported together)
                problems.append(f"{region}: {type(exc).__name__}: {exc}")
                continue
            planned.append(region)
            # the global record aliases the load balancer through its own region's zone
            (alias,) = next(
                r for r in plan.by_type("aws:route53/record:Record") if r.inputs.get("setIdentifier")
            ).inputs["aliases"]
            if alias["zoneId"] != LB_HOSTED_ZONES[region].application:
                problems.append(f"{region}: alias zone {alias['zoneId']}")
        # the source stack's access-log bucket of each region lets that region's load balancers write
        train = stack_file_plan(load_stack_config(SOURCE).storage.source_stack or "", folder)
        for region in names:
            policy = " ".join(
                str(p.inputs.get("policy"))
                for p in train.by_type("aws:s3/bucketPolicy:BucketPolicy")
                if p.name == f"replication-{region}-access-logs-policy"
            )
            elb = ELB_LOG_ACCOUNTS[region]
            principal = (
                f"arn:aws:iam::{elb}:root" if elb else "logdelivery.elasticloadbalancing.amazonaws.com"
            )
            if principal not in policy:
                problems.append(f"{region}: the access-log bucket lets no {principal} write")
    assert not problems, "\n".join(problems)
    assert set(TRIED) <= set(planned), (planned, refused)
    print(f"planned {len(planned)}: {planned}; refused for what the region lacks {len(refused)}: {refused}")
