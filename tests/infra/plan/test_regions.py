"""Every region the schema accepts (``infra/io/regions.py:known_regions``, the one region list) is answered
by every region-keyed table of the offline plan, and a region whose facts cannot be had offline is refused
in one line naming the ``aiplat facts refresh`` step; a stack that fails while ``--all`` plans the others
ends with its own error line and the others' results."""

from __future__ import annotations

import datetime as dt
import gc

import pytest
import yaml

from infra.cli.main import main
from infra.core.errors import DataSourceError
from infra.core.naming import region_code
from infra.cost.estimate import Usage, estimate_stack
from infra.io import snapshot
from infra.io.prices import load_price_table
from infra.io.regions import known_regions
from infra.io.stackfiles import load_stack_config
from infra.plan.lb_zones import LB_HOSTED_ZONES
from infra.plan.mocks import AwsSnapshotMocks
from infra.storage.documents import ELB_LOG_ACCOUNTS
from tests.conftest import REPO

# Every table keyed by region that the plan reads: it must name each region the schema accepts, no more.
REGION_TABLES = {
    "infra/plan/lb_zones.py LB_HOSTED_ZONES": LB_HOSTED_ZONES,
    "infra/storage/documents.py ELB_LOG_ACCOUNTS": ELB_LOG_ACCOUNTS,
}
# Regions whose zones and offerings neither moto's snapshot nor a facts file holds.
OFFLINE_LESS = sorted(r for r in known_regions() if not snapshot.offline_aws(r).has_region)


@pytest.mark.parametrize("table", sorted(REGION_TABLES))
def test_each_region_table_covers_exactly_the_schema_s_regions(table: str) -> None:
    keys = set(REGION_TABLES[table])
    assert keys == known_regions(), (
        f"{table}: missing {sorted(known_regions() - keys)}, unknown {sorted(keys - known_regions())}"
    )


def test_every_region_has_a_short_code() -> None:
    # the account-global names carry it (infra/core/naming.py); a new direction word must not break a plan
    codes = {region_code(r) for r in known_regions()}
    assert len(codes) == len(known_regions())


def test_the_price_table_names_schema_regions_and_an_unpriced_region_names_its_refresh() -> None:
    # prices are kept for the regions stacks use (aiplat prices refresh adds others), not for every region
    table = load_price_table()
    priced = set(table.instances) | set(table.regional) | set(table.transfer_gb)
    assert priced <= known_regions(), sorted(priced - known_regions())
    region = sorted(known_regions() - priced)[0]
    cfg = load_stack_config("prod-sg-infer").model_copy(update={"region": region})
    notes = estimate_stack("copy", cfg, table, Usage(on=dt.date(2026, 12, 6))).notes
    assert f"`aiplat prices refresh --region {region}`" in " ".join(notes), notes
    sg = estimate_stack(
        "prod-sg-infer", load_stack_config("prod-sg-infer"), table, Usage(on=dt.date(2026, 12, 6))
    )
    assert "aiplat prices refresh" not in " ".join(sg.notes)


def _call(mocks: AwsSnapshotMocks, token: str, **args: object) -> dict:
    from pulumi.runtime import MockCallArgs

    return mocks.call(MockCallArgs(token=token, args=args, provider=""))


@pytest.mark.parametrize("region", sorted(known_regions()))
def test_the_mocks_answer_the_load_balancer_zones_of_every_region(region: str) -> None:
    mocks = AwsSnapshotMocks(region)
    token = "aws:lb/getHostedZoneId:getHostedZoneId"
    for lb_type in ("application", "network"):
        if getattr(LB_HOSTED_ZONES[region], lb_type) is None:
            with pytest.raises(DataSourceError) as info:
                _call(mocks, token, loadBalancerType=lb_type)
            assert "\n" not in str(info.value) and region in str(info.value)
            assert "https://docs.aws.amazon.com/general/latest/gr/elb.html" in str(info.value)
        else:
            got = _call(mocks, token, loadBalancerType=lb_type, region=region)
            assert got["id"].startswith("Z") and got["region"] == region
    # the two kinds never share a zone
    zones = LB_HOSTED_ZONES[region]
    assert zones.application is None or zones.application != zones.network


def test_a_region_without_offline_facts_is_refused_in_one_line_naming_the_refresh() -> None:
    if not OFFLINE_LESS:
        pytest.skip("moto's snapshot holds every region the schema accepts")
    region = OFFLINE_LESS[0]
    mocks = AwsSnapshotMocks(region)
    for token in (
        "aws:index/getAvailabilityZones:getAvailabilityZones",
        "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings",
    ):
        with pytest.raises(DataSourceError) as info:
            _call(mocks, token)
        message = str(info.value)
        assert "\n" not in message and f"`aiplat facts refresh --region {region}`" in message


def test_stacks_failing_mid_all_print_own_lines_and_the_rest_plan(tmp_path, capfd, monkeypatch) -> None:
    """The issue's case: a copy of prod-sg-infer whose load balancer zone the offline data lacks fails late in
    its program while ``--all`` plans the folder; before, the next stack's plan died with 'Event loop is
    closed' and dozens of 'Task was destroyed but it is pending!'. Beside it, a copy in a region without
    offline facts fails early."""
    late = "ap-northeast-1"
    monkeypatch.delitem(LB_HOSTED_ZONES, late)  # the table as it was when the issue was filed
    stacks = {p.name: yaml.safe_load(p.read_text()) for p in (REPO / "stacks").glob("Pulumi.prod-*.yaml")}
    broken = {"prod-a-infer": late, **({"prod-b-infer": OFFLINE_LESS[0]} if OFFLINE_LESS else {})}
    for i, (name, region) in enumerate(broken.items()):
        doc = yaml.safe_load(yaml.safe_dump(stacks["Pulumi.prod-sg-infer.yaml"]))
        doc["config"]["aiplat:platform"]["region"] = region
        doc["config"]["aiplat:platform"]["network"]["vpc_cidr"] = f"10.{90 + i}.0.0/16"
        stacks[f"Pulumi.{name}.yaml"] = doc
        stacks["Pulumi.prod-us-train.yaml"]["config"]["aiplat:platform"]["storage"]["replicate_to"].append(
            region
        )
    for file, doc in stacks.items():
        (tmp_path / file).write_text(yaml.safe_dump(doc, sort_keys=False))
    # the failing stacks sort first: the good ones are planned after them
    code = main(["plan", "--all", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    gc.collect()  # a task left pending by a failed plan is reported when it is collected
    out, err = capfd.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == DataSourceError.exit_code, err
    assert len(errors) == len(broken), err
    assert errors[0].startswith("error: prod-a-infer: getHostedZoneId: ") and late in errors[0]
    if OFFLINE_LESS:
        assert errors[1].startswith("error: prod-b-infer: getAvailabilityZones: ")
        assert f"`aiplat facts refresh --region {OFFLINE_LESS[0]}`" in errors[1]
    for noise in ("Event loop is closed", "Task was destroyed", "was never retrieved", "Traceback"):
        assert noise not in err, err
    for good in ("prod-hk-infer", "prod-sg-infer", "prod-us-train"):
        assert f"\n{good} (" in f"\n{out}" and (tmp_path / "out" / f"{good}.json").exists(), out
