"""``aiplat prices refresh``: Spot prices from EC2 DescribeSpotPriceHistory (a moto server over HTTP) and
On-Demand / Capacity Block prices from the Price List API's GetProducts (botocore's Stubber: moto has no
``pricing`` service), written into the price table with their API source and date."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from infra.cli.main import main
from infra.cost.estimate import Option, PriceTable, Usage, estimate_stack
from infra.io import price_refresh
from infra.io.prices import load_price_table
from infra.schema.parse import parse_model, parse_platform_config

REGION = "us-east-1"
TYPE = "p5.48xlarge"


def _product(usd: str, market: str, itype: str = TYPE, region: str = REGION) -> str:
    """One GetProducts ``PriceList`` document in the Price List's shape (terms.OnDemand...pricePerUnit)."""
    sku = f"SKU{market.upper()}"
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": itype, "regionCode": region, "marketoption": market}},
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


@pytest.fixture
def stubbed_pricing():
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client) as stub:
        yield client, stub


def _expect(
    stub: Stubber, market: str, pages: list[list[str]], itype: str = TYPE, region: str = REGION
) -> None:
    for i, page in enumerate(pages):
        response = {"PriceList": page, "FormatVersion": "aws_v1"}
        if i < len(pages) - 1:
            response["NextToken"] = f"t{i}"
        params = {"ServiceCode": "AmazonEC2", "Filters": price_refresh.product_filters(region, itype, market)}
        if i:
            params["NextToken"] = f"t{i - 1}"
        stub.add_response("get_products", response, params)


def test_refresh_writes_api_prices_with_source_and_date(aws, stubbed_pricing, tmp_path, monkeypatch, capsys):
    pricing, stub = stubbed_pricing
    _expect(stub, "OnDemand", [[], [_product("98.32", "OnDemand")]])  # the answer is on the second page
    _expect(stub, "CapacityBlock", [[_product("31.464", "CapacityBlock")]])
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, region: pricing if service == "pricing" else aws.client(service, region),
    )
    out = tmp_path / "prices.yaml"

    assert main(["prices", "refresh", "--region", REGION, "--instance-type", TYPE, "--out", str(out)]) == 0

    stub.assert_no_pending_responses()
    table = parse_model(yaml.safe_load(out.read_text()), PriceTable, "prices.yaml")
    entry = table.instances[REGION][TYPE]
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert (entry.on_demand.usd, entry.on_demand.source, entry.on_demand.read) == (
        98.32,
        "aws-price-list",
        today,
    )
    assert (entry.capacity_block.usd, entry.capacity_block.source) == (31.464, "aws-price-list")
    # Spot: what the emulator's DescribeSpotPriceHistory answered, per zone ID (this account's mapping)
    ec2 = aws.client("ec2", REGION)
    history = ec2.describe_spot_price_history(
        InstanceTypes=[TYPE], ProductDescriptions=["Linux/UNIX (Amazon VPC)"]
    )
    ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    expected = {ids[p["AvailabilityZone"]]: float(p["SpotPrice"]) for p in history["SpotPriceHistory"]}
    assert expected and entry.spot.zones == expected
    assert (entry.spot.source, entry.spot.read) == ("aws-spot-price-history", today)
    assert table.sources["aws-price-list"].kind == "aws-api"
    # what was not asked for is kept as it was, header comments included
    shipped = load_price_table()
    assert table.instances["us-west-2"] == shipped.instances["us-west-2"]
    assert table.regional == shipped.regional
    assert f"wrote {out}" in capsys.readouterr().out


def test_a_product_the_price_list_lacks_keeps_the_entry(aws, stubbed_pricing) -> None:
    pricing, stub = stubbed_pricing
    _expect(stub, "OnDemand", [[_product("98.32", "OnDemand")]])
    _expect(stub, "CapacityBlock", [[]])  # no Capacity Block product listed
    shipped = load_price_table()

    def clients(service, region):
        return pricing if service == "pricing" else aws.client(service, region)

    table = price_refresh.refresh_instances(shipped, {REGION: [TYPE]}, clients)

    assert table.instances[REGION][TYPE].capacity_block == shipped.instances[REGION][TYPE].capacity_block
    assert table.instances[REGION][TYPE].on_demand.source == "aws-price-list"


def test_several_prices_for_one_product_are_refused(stubbed_pricing) -> None:
    pricing, stub = stubbed_pricing
    _expect(stub, "OnDemand", [[_product("98.32", "OnDemand"), _product("55.04", "OnDemand")]])
    with pytest.raises(
        ValueError,
        match=r"p5.48xlarge OnDemand in us-east-1: the Price List has several prices \[55.04, 98.32\]",
    ):
        price_refresh.read_product_price(pricing, REGION, TYPE, "OnDemand")


def test_refresh_without_credentials_is_one_line_exit_6(tmp_path, monkeypatch, capsys) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "prices.yaml"
    assert main(["prices", "refresh", "--region", REGION, "--instance-type", TYPE, "--out", str(out)]) == 6
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NoCredentialsError" in err[0] and "fix: sign in" in err[0], err
    assert not out.exists()


def test_the_command_the_estimate_names_prices_a_region_the_table_lacks(
    aws, stubbed_pricing, stack_doc, tmp_path, monkeypatch
) -> None:
    """A stack copied to eu-central-1: the estimate (and the cost cap) name the command that records the
    region's prices; run as named, it makes the region priced."""
    region = "eu-central-1"
    doc = stack_doc("dev-us-train")
    doc["config"]["aiplat:platform"]["region"] = region
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.dev-euc1-train.yaml").write_text(yaml.safe_dump(doc))
    cfg = parse_platform_config(doc["config"]["aiplat:platform"])
    shipped = load_price_table()
    before = estimate_stack("dev-euc1-train", cfg, shipped, Usage(dt.date.today()))
    assert not before.region_priced
    (note,) = [n for n in before.notes if "aiplat prices refresh" in n]
    command = note.split("`")[1]

    pricing, stub = stubbed_pricing
    types = sorted({p.instance_type for p in cfg.node_pools.values()})
    for i, itype in enumerate(types):
        _expect(stub, "OnDemand", [[_product(f"{1 + i}.5", "OnDemand", itype, region)]], itype, region)
        _expect(stub, "CapacityBlock", [[]], itype, region)
    monkeypatch.setattr(
        "infra.io.aws_live.boto3_clients",
        lambda: lambda service, r: pricing if service == "pricing" else aws.client(service, r),
    )
    out = tmp_path / "prices.yaml"
    argv = command.split()[1:] + ["--stacks-dir", str(stacks), "--out", str(out)]
    assert main(argv) == 0
    stub.assert_no_pending_responses()

    table = parse_model(yaml.safe_load(out.read_text()), PriceTable, "prices.yaml")
    assert table.prices_region(region)
    after = estimate_stack("dev-euc1-train", cfg, table, Usage(dt.date.today()))
    assert after.region_priced and not [n for n in after.notes if "aiplat prices refresh" in n]
    for pool in after.pools:
        assert (
            pool.prices[Option.on_demand].known and pool.prices[Option.on_demand].source == "aws-price-list"
        )
