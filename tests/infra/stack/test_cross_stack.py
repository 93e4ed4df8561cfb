"""Rules between the stacks of one folder, on the real stack files: VPC ranges that overlap another
stack's, refused between any two stacks of the project (those that exchange artifacts say so)."""

from __future__ import annotations

from infra.core.project import CONFIG_KEY
from infra.io.stackfiles import read_stack_index
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config

FIELD = "aiplat:platform.network.vpc_cidr"


def _cidr_findings(folder, stack: str, raw: dict) -> list:
    ctx = RuleContext(parse_platform_config(raw), stack=stack, stacks=read_stack_index(folder))
    return [f for f in run_rules(Phase.plan, ctx) if f.rule == "vpc-cidrs-disjoint"]


def _shipped(write_stack, stack_doc):
    for name in ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        folder = write_stack(name, stack_doc(name))
    return folder


def test_shipped_stacks_have_disjoint_vpcs(stack_doc, write_stack) -> None:
    folder = _shipped(write_stack, stack_doc)
    for name in ("dev-us-train", "prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        assert _cidr_findings(folder, name, stack_doc(name)["config"][CONFIG_KEY]) == []


def test_an_infer_stack_overlapping_its_source_stack_is_refused(stack_doc, write_stack) -> None:
    folder = _shipped(write_stack, stack_doc)
    doc = stack_doc("prod-hk-infer")
    doc["config"][CONFIG_KEY]["network"]["vpc_cidr"] = "10.20.0.0/17"  # inside prod-us-train's 10.20.0.0/16
    write_stack("prod-hk-infer", doc)
    [finding] = _cidr_findings(folder, "prod-hk-infer", doc["config"][CONFIG_KEY])
    assert finding.level is Level.error
    assert finding.one_line() == (
        f"{FIELD}: 10.20.0.0/17 overlaps 10.20.0.0/16, the VPC of stack prod-us-train; prod-hk-infer takes "
        "its artifacts from prod-us-train (storage.source_stack): AWS refuses a VPC peering connection "
        "between overlapping ranges, and no Transit Gateway can route between them; fix: give one of the "
        "two VPCs a range no other stack uses (network.vpc_cidr, e.g. 10.0.0.0/17) "
        "(see https://docs.aws.amazon.com/vpc/latest/peering/create-vpc-peering-connection.html)"
    )
    # the train stack sees the same overlap from its side
    [other] = _cidr_findings(folder, "prod-us-train", stack_doc("prod-us-train")["config"][CONFIG_KEY])
    assert other.level is Level.error
    assert other.problem.startswith("10.20.0.0/16 overlaps 10.20.0.0/17, the VPC of stack prod-hk-infer")


def test_a_train_stack_overlapping_a_region_it_replicates_to_is_refused(stack_doc, write_stack) -> None:
    folder = _shipped(write_stack, stack_doc)
    raw = stack_doc("dev-us-train")["config"][CONFIG_KEY]
    raw["storage"]["replicate_to"] = ["ap-southeast-1"]
    raw["network"]["vpc_cidr"] = "10.40.0.0/16"
    [finding] = _cidr_findings(folder, "dev-us-train", raw)
    assert finding.level is Level.error
    assert "dev-us-train replicates its artifacts to prod-sg-infer's region ap-southeast-1" in finding.problem


def test_unrelated_stacks_overlapping_are_refused_too(stack_doc, write_stack) -> None:
    folder = _shipped(write_stack, stack_doc)
    doc = stack_doc("dev-us-train")
    doc["config"][CONFIG_KEY]["network"].pop("vpc_cidr")  # the schema's default, 10.0.0.0/16
    write_stack("dev-eu-train", doc)
    raw = stack_doc("prod-sg-infer")["config"][CONFIG_KEY]
    raw["network"]["vpc_cidr"] = "10.0.0.0/16"
    [finding] = _cidr_findings(folder, "prod-sg-infer", raw)
    assert finding.level is Level.error
    assert finding.problem.startswith(
        "10.0.0.0/16 overlaps 10.0.0.0/16, the VPC of stack dev-eu-train; both are stacks of this project"
    )
    assert "network.vpc_cidr, e.g. 10.1.0.0/16" in finding.fix
