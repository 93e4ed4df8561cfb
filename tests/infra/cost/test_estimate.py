"""The cost model's arithmetic, checked against the price data file read independently here (plain YAML),
and the shipped stack files."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from infra.cluster.calendar import CALENDAR
from infra.core.errors import ConfigErrors
from infra.cost.estimate import Money, Option, PriceTable, Usage, estimate_stack
from infra.io import snapshot
from infra.io.prices import load_price_table
from infra.io.stackfiles import load_stack_config
from infra.karpenter.gpu_offers import gpu_offer
from infra.schema.parse import parse_model, parse_platform_config
from tests.conftest import REPO

DATA = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())
HOURS = DATA["hours_per_month"]
TODAY = dt.date(2026, 11, 30)


def od(region: str, itype: str) -> float:
    return DATA["instances"][region][itype]["on_demand"]["usd"]


def spot(region: str, itype: str) -> float:
    return max(DATA["instances"][region][itype]["spot"]["zones"].values())


def regional(region: str, item: str) -> float:
    return DATA["regional"][region][item]["usd"]


def _raw(stack: str, folder: Path = REPO / "stacks") -> dict:
    return yaml.safe_load((folder / f"Pulumi.{stack}.yaml").read_text())["config"]["aiplat:platform"]


def test_every_price_names_a_known_source_and_every_source_a_date_or_undated() -> None:
    table = load_price_table()
    assert table.hours_per_month == 8760 / 12
    for key, source in table.sources.items():
        assert source.what, key
        assert key == "none" or source.url.startswith("https://"), key
    raw = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())
    raw["regional"]["us-east-1"]["nat_gateway_hour"]["source"] = "a-blog-nobody-read"
    with pytest.raises(ConfigErrors, match=r"sources \['a-blog-nobody-read'\] that are not under 'sources'"):
        parse_model(raw, PriceTable, "prices.yaml")


def test_train_stack_desired_hourly_is_the_sum_of_its_parts() -> None:
    cfg = load_stack_config("prod-us-train")
    cost = estimate_stack(
        "prod-us-train", cfg, load_price_table(), Usage(on=TODAY, artifact_gb_per_month=1000)
    )
    pools = cfg.node_pools
    # every pool On-Demand: system, train and the publisher's
    assert set(pools) == {"system", "train", "publisher"}
    nodes = sum(p.desired_size * od("us-east-1", p.instance_type) for p in pools.values())
    eks = DATA["global"]["eks_cluster_hour_standard"]["usd"]
    nat = cfg.network.az_count * regional("us-east-1", "nat_gateway_hour")
    endpoints = len(cfg.network.interface_endpoints) * cfg.network.az_count
    endpoint_cost = endpoints * regional("us-east-1", "interface_endpoint_az_hour")
    replication = 1000 * DATA["transfer_gb"]["us-east-1"]["ap-southeast-1"]["usd"] / HOURS
    hourly = cost.hourly("desired")
    assert hourly.usd == pytest.approx(nodes + eks + nat + endpoint_cost + replication)
    # us-east-1 -> ap-east-1 has no price: the amount says so instead of counting it as 0
    assert hourly.unknown == ("data transfer us-east-1 -> ap-east-1",)
    assert cost.monthly("desired").usd == pytest.approx(hourly.usd * HOURS)


def test_sizes_and_purchase_options_of_a_pool() -> None:
    cfg = load_stack_config("dev-us-train")
    cost = estimate_stack("dev-us-train", cfg, load_price_table(), Usage(on=TODAY))
    gpu = next(p for p in cost.pools if p.pool == "gpu")
    pool = cfg.node_pools["gpu"]
    assert gpu.configured is Option.spot
    for size, n in (("min", pool.min_size), ("desired", pool.desired_size), ("max", pool.max_size)):
        assert gpu.hourly(size).usd == pytest.approx(n * spot("us-west-2", "g5.xlarge"))
        assert gpu.hourly(size, Option.on_demand).usd == pytest.approx(n * od("us-west-2", "g5.xlarge"))
    # no Capacity Block price for g5 in the table: unknown, except for zero nodes
    assert gpu.hourly("max", Option.capacity_block).unknown == ("g5.xlarge capacity block, us-west-2",)


def test_capacity_block_bills_every_reserved_instance() -> None:
    cfg = parse_platform_config(_raw("capacity-block", REPO / "examples"))
    cost = estimate_stack("capacity-block", cfg, load_price_table(), Usage(on=TODAY))
    train = next(p for p in cost.pools if p.pool == "train")
    block = DATA["instances"]["us-east-1"]["p5.48xlarge"]["capacity_block"]["usd"]
    reserved = cfg.node_pools["train"].max_size
    assert cfg.node_pools["train"].min_size == 0  # nothing runs at min, the block is still paid
    assert [train.hourly(s).usd for s in ("min", "desired", "max")] == [pytest.approx(reserved * block)] * 3
    assert train.hourly("min", Option.on_demand) == Money()


def test_odcr_bills_the_reservation_at_the_on_demand_rate() -> None:
    cfg = parse_platform_config(_raw("odcr", REPO / "examples"))
    cost = estimate_stack("odcr", cfg, load_price_table(), Usage(on=TODAY))
    train = next(p for p in cost.pools if p.pool == "train")
    assert train.configured is Option.on_demand
    reserved = cfg.node_pools["train"].max_size
    assert train.hourly("min").usd == pytest.approx(reserved * od("us-west-2", "p4d.24xlarge"))


def test_zero_of_an_unknown_price_is_known_and_usage_lines_scale() -> None:
    cfg = load_stack_config("prod-hk-infer")
    table = load_price_table()
    quiet = estimate_stack("prod-hk-infer", cfg, table, Usage(on=TODAY))
    processing = next(i for i in quiet.items if i.name.startswith("NAT data processing"))
    assert processing.price.usd is None and processing.monthly(HOURS) == Money()
    busy = estimate_stack("prod-hk-infer", cfg, table, Usage(on=TODAY, nat_gb_per_month=100))
    processing = next(i for i in busy.items if i.name.startswith("NAT data processing"))
    assert processing.monthly(HOURS).unknown == ("NAT gateway data processing, ap-east-1",)

    events = estimate_stack(
        "prod-hk-infer", cfg, table, Usage(on=TODAY, cloudtrail_data_events_per_month=2_500_000)
    )
    trail = next(i for i in events.items if i.name.startswith("CloudTrail"))
    assert trail.monthly(HOURS).usd == pytest.approx(
        25 * DATA["global"]["cloudtrail_data_events_per_100k"]["usd"]
    )


def test_load_balancers_default_to_one_per_infer_stack() -> None:
    table = load_price_table()
    infer = estimate_stack("prod-sg-infer", load_stack_config("prod-sg-infer"), table, Usage(on=TODAY))
    train = estimate_stack("prod-us-train", load_stack_config("prod-us-train"), table, Usage(on=TODAY))
    assert [i.quantity for i in infer.items if i.name == "application load balancers"] == [1]
    assert [i.name for i in train.items if "load balancer" in i.name] == []
    two = estimate_stack(
        "prod-us-train", load_stack_config("prod-us-train"), table, Usage(on=TODAY, load_balancers=2)
    )
    alb = next(i for i in two.items if i.name == "application load balancers")
    assert alb.hourly(HOURS).usd == pytest.approx(2 * regional("us-east-1", "alb_hour"))


def test_extended_support_after_the_end_of_standard_support() -> None:
    """AWS: "Once a version is past the end of standard support date, it enters extended support"
    (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html): the end date itself is still
    standard, as the rules and the policy pack read the same calendar (infra/cluster/calendar.py)."""
    cfg = load_stack_config("prod-us-train")
    table = load_price_table()
    end = CALENDAR["1.35"].standard_until
    before = estimate_stack("s", cfg, table, Usage(on=end))
    after = estimate_stack("s", cfg, table, Usage(on=end + dt.timedelta(days=1)))
    eks = [next(i for i in c.items if i.name == "EKS control plane") for c in (before, after)]
    assert eks[0].price.usd == DATA["global"]["eks_cluster_hour_standard"]["usd"]
    assert eks[1].price.usd == DATA["global"]["eks_cluster_hour_extended"]["usd"]
    assert after.notes[0] == f"EKS: Kubernetes 1.35 left standard support on {end.isoformat()}"


def test_a_version_without_support_dates_is_unknown() -> None:
    raw = _raw("prod-us-train")
    raw["cluster"] = {"kubernetes_version": "1.36", "addons": {"kube_proxy": "v1.36.0-eksbuild.14"}}
    cost = estimate_stack("s", parse_platform_config(raw), load_price_table(), Usage(on=TODAY))
    assert "EKS cluster, support level unknown" in cost.hourly().unknown


def test_a_region_without_prices() -> None:
    cfg = parse_platform_config(_raw("minio", REPO / "examples"))  # eu-west-1: not in the table
    cost = estimate_stack("minio", cfg, load_price_table(), Usage(on=TODAY))
    unknown = cost.hourly().unknown
    assert "m6i.2xlarge on demand, eu-west-1" in unknown and "NAT gateway, eu-west-1" in unknown
    assert cost.hourly().usd == pytest.approx(DATA["global"]["eks_cluster_hour_standard"]["usd"])


# -- Karpenter GPU pools -------------------------------------------------------------------------------------


def _karpenter(stack: str, raw: dict | None = None, table: PriceTable | None = None):
    cfg = parse_platform_config(raw) if raw is not None else load_stack_config(stack)
    facts = snapshot.region_facts(cfg)
    cost = estimate_stack(stack, cfg, table or load_price_table(), Usage(on=TODAY), facts)
    pool = next(iter(cfg.cluster_services.karpenter.node_pools.values()))
    candidates = gpu_offer(cfg, facts, pool).instance_types
    return cfg, cost, pool, candidates, facts


def test_karpenter_pool_min_desired_and_max_from_the_data_file() -> None:
    """prod-hk-infer: min = desired = the inference Deployment's minimum replicas, each on a node of the
    cheapest candidate that holds a replica; max = gpu_limit GPUs at the dearest candidate per GPU."""
    cfg, cost, pool, candidates, facts = _karpenter("prod-hk-infer")
    [k] = cost.karpenter
    assert cfg.inference is not None and len(candidates) > 2
    prices = {t: od("ap-east-1", t) for t in candidates}  # every candidate is priced in the data file
    cheapest = min(prices.values())
    per_gpu = max(prices[t] / facts.instances[t].gpu_count for t in candidates)
    replicas = cfg.inference.models["gpt2-small"].replicas.min
    assert k.hourly("min").usd == pytest.approx(replicas * cheapest)
    assert k.hourly("desired") == k.hourly("min")
    assert k.hourly("max").usd == pytest.approx(pool.gpu_limit * per_gpu)
    assert k.hourly("max").complete
    # the stack's desired hour: the system pool, the Karpenter pool and the fixed items
    system = cfg.node_pools["system"]
    assert cost.hourly("desired").usd == pytest.approx(
        system.desired_size * od("ap-east-1", system.instance_type)
        + replicas * cheapest
        + cost.fixed_hourly().usd
    )
    # the prices used trace to the data file
    used = {p.label: p.usd for p in cost.prices()}
    cheap_type = min(prices, key=prices.__getitem__)
    assert (
        used[f"{cheap_type} on demand, ap-east-1"]
        == DATA["instances"]["ap-east-1"][cheap_type]["on_demand"]["usd"]
    )


def test_karpenter_pool_on_both_capacity_types_is_cheapest_at_min_and_dearest_at_max() -> None:
    raw = _raw("prod-sg-infer")
    raw["cluster_services"]["karpenter"]["node_pools"]["gpu"]["capacity_types"] = ["on-demand", "spot"]
    cfg, cost, pool, candidates, facts = _karpenter("prod-sg-infer", raw)
    [k] = cost.karpenter
    region = "ap-southeast-1"
    both = {(t, o): f(region, t) for t in candidates for o, f in (("od", od), ("spot", spot))}
    gpus = {t: facts.instances[t].gpu_count for t in candidates}
    assert k.hourly("min").usd == pytest.approx(
        cfg.inference.models["gpt2-small"].replicas.min * min(both.values())
    )
    assert k.hourly("max").usd == pytest.approx(
        pool.gpu_limit * max(v / gpus[t] for (t, _), v in both.items())
    )
    # all bought one way: only that option's prices
    assert k.hourly("min", Option.spot).usd == pytest.approx(
        cfg.inference.models["gpt2-small"].replicas.min * min(spot(region, t) for t in candidates)
    )
    assert k.hourly("max", Option.on_demand).usd == pytest.approx(
        pool.gpu_limit * max(od(region, t) / gpus[t] for t in candidates)
    )
    # Karpenter NodePools here buy no Capacity Blocks: that option leaves the pool as configured
    assert k.hourly("max", Option.capacity_block) == k.hourly("max")


def test_karpenter_pool_min_skips_types_too_small_for_a_replica() -> None:
    raw = _raw("prod-hk-infer")
    raw["inference"]["models"]["gpt2-small"]["resources"] = {"cpu": "6", "memory": "40Gi"}
    cfg, cost, _, candidates, facts = _karpenter("prod-hk-infer", raw)
    [k] = cost.karpenter
    fits = [
        t for t in candidates if facts.instances[t].vcpus >= 6 and facts.instances[t].memory_mib >= 40 * 1024
    ]
    assert fits and set(fits) != set(candidates)
    cheapest = min(fits, key=lambda t: od("ap-east-1", t))
    assert k.cheapest()[0].instance_type == cheapest
    assert k.hourly("min").usd == pytest.approx(
        cfg.inference.models["gpt2-small"].replicas.min * od("ap-east-1", cheapest)
    )


def test_karpenter_prices_missing_from_the_table_stay_unknown() -> None:
    raw_table = yaml.safe_load((REPO / "infra/cost/data/prices.yaml").read_text())
    cfg = load_stack_config("prod-hk-infer")
    facts = snapshot.region_facts(cfg)
    candidates = gpu_offer(cfg, facts, cfg.cluster_services.karpenter.node_pools["gpu"]).instance_types
    # take the dearest-per-GPU candidate out of the table: max is the dearest of the rest, marked unknown
    per_gpu = {t: od("ap-east-1", t) / facts.instances[t].gpu_count for t in candidates}
    dearest = max(per_gpu, key=per_gpu.__getitem__)
    del raw_table["instances"]["ap-east-1"][dearest]
    table = parse_model(raw_table, PriceTable, "prices.yaml")
    [k] = estimate_stack("s", cfg, table, Usage(on=TODAY), facts).karpenter
    rest = max(v for t, v in per_gpu.items() if t != dearest)
    assert k.hourly("max").usd == pytest.approx(
        cfg.cluster_services.karpenter.node_pools["gpu"].gpu_limit * rest
    )
    assert k.hourly("max").unknown == (
        f"karpenter.gpu: 1 of {len(candidates)} types unpriced (on-demand, ap-east-1)",
    )
    assert any(dearest in n for n in estimate_stack("s", cfg, table, Usage(on=TODAY), facts).notes)
    # no candidate priced at all: unknown, never zero
    for t in candidates:
        raw_table["instances"]["ap-east-1"].pop(t, None)
    table = parse_model(raw_table, PriceTable, "prices.yaml")
    [k] = estimate_stack("s", cfg, table, Usage(on=TODAY), facts).karpenter
    label = f"karpenter.gpu: none of its {len(candidates)} types priced (on-demand, ap-east-1)"
    assert k.hourly("min") == Money(0.0, (label,)) and k.hourly("max") == Money(0.0, (label,))


def test_karpenter_pool_without_facts_or_replicas() -> None:
    # no facts: which types the NodePool may launch is not known, so neither is its cost
    cfg = load_stack_config("prod-sg-infer")
    [k] = estimate_stack("s", cfg, load_price_table(), Usage(on=TODAY)).karpenter
    assert k.hourly("min").unknown == ("karpenter.gpu: no candidate instance types known (ap-southeast-1)",)
    # dev-us-train: no inference Deployment, so no GPUs at min (a known zero); spot prices at max
    cfg, cost, pool, candidates, facts = _karpenter("dev-us-train")
    [k] = cost.karpenter
    assert k.gpus == {"min": 0, "desired": 0, "max": pool.gpu_limit}
    assert k.hourly("min") == Money() and k.hourly("desired") == Money()
    assert k.hourly("max").usd == pytest.approx(
        pool.gpu_limit * max(spot("us-west-2", t) / facts.instances[t].gpu_count for t in candidates)
    )
