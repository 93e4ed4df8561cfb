"""The real program under mocks: every stack plans, and the plan carries the real inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.cli.main import main
from infra.core.project import CONFIG_KEY
from infra.io import snapshot as awsdata
from tests.conftest import STACKS

EXPECTED_REGION = {
    "dev-us-train": "us-west-2",
    "prod-us-train": "us-east-1",
    "prod-hk-infer": "ap-east-1",
    "prod-sg-infer": "ap-southeast-1",
}


def test_the_four_stacks_exist() -> None:
    assert sorted(STACKS) == sorted(EXPECTED_REGION)


@pytest.mark.parametrize("stack", sorted(EXPECTED_REGION))
def test_stack_plans_in_its_region(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    assert plan.region == EXPECTED_REGION[stack]
    provider = plan.one("pulumi:providers:aws")
    assert provider.inputs["region"] == EXPECTED_REGION[stack]
    tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert tags["Environment"] == plan.config["environment"]
    assert set(tags) >= {"CostCenter", "Project", "Owner", "Environment", "Workload"}
    # every AWS resource goes through the stack's explicit provider
    for r in plan.resources:
        if r.type.startswith("aws:"):
            assert r.provider and r.provider.startswith(provider.urn), r.urn


@pytest.mark.parametrize("stack", sorted(EXPECTED_REGION))
def test_vpc_follows_config(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    vpc = plan.one("aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == plan.config["network"]["vpc_cidr"]
    assert vpc.inputs["enableDnsHostnames"] is True
    component = plan.one("aiplat:network:GpuVpc")
    assert vpc.parent == component.urn
    zones = plan.outputs["availabilityZones"]
    assert len(zones) == plan.config["network"]["az_count"]
    assert set(zones) <= {z.name for z in awsdata.availability_zones(plan.region)}


def test_facts_come_from_data_calls(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    tokens = [t for t, _ in plan.calls]
    assert "aws:index/getAvailabilityZones:getAvailabilityZones" in tokens
    asked = [a["instanceType"] for t, a in plan.calls if t == "aws:ec2/getInstanceType:getInstanceType"]
    assert sorted(asked) == sorted({p["instance_type"] for p in plan.config["node_pools"].values()})


def test_cli_plans_a_source_stack_once(tmp_path, monitors, monkeypatch) -> None:
    """The infer stacks' StackReference plans prod-us-train; its own plan in the same run is that plan, and
    the neighbour planned for the name check (dev-us-train) is planned once too."""
    from infra.plan import runner
    from infra.plan.summaries import CACHE_ENV

    monkeypatch.setattr(runner, "_PLAN_CACHE", {})  # nothing planned before this run
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # and no summary of an earlier one
    stacks = ["prod-hk-infer", "prod-sg-infer", "prod-us-train"]
    assert main(["plan", *(f"--stack={s}" for s in stacks), "--out", str(tmp_path)]) == 0
    assert _planned(monitors) == sorted([*stacks, "dev-us-train"])
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == stacks


def _planned(monitors: list) -> list[str]:
    return sorted(m.recorded[0].urn.removeprefix("urn:pulumi:").split("::")[0] for m in monitors)


@pytest.mark.slow
def test_one_stack_plans_alone_once_its_neighbours_left_summaries(
    stack_doc, write_stack, monitors, monkeypatch, tmp_path
) -> None:
    """After ``--all``, a new run of ``--stack prod-hk-infer`` runs that stack's program only: the name check
    reads the neighbours' summaries and the StackReference its source's, and the plan is the one ``--all``
    wrote. A neighbour whose file changed is planned again."""
    from infra.io.stackfiles import list_stacks
    from infra.plan import runner
    from infra.plan.summaries import CACHE_ENV

    monkeypatch.setattr(runner, "_PLAN_CACHE", {})
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    for stack in list_stacks():
        folder = write_stack(stack, stack_doc(stack))
    every, one = tmp_path / "all", tmp_path / "one"
    assert main(["plan", "--all", "--stacks-dir", str(folder), "--out", str(every)]) == 0
    assert _planned(monitors) == list_stacks()

    def alone(stack: str) -> list[str]:
        runner._PLAN_CACHE.clear()  # a new run: nothing planned in this process
        monitors.clear()
        assert main(["plan", "--stack", stack, "--stacks-dir", str(folder), "--out", str(one)]) == 0
        return _planned(monitors)

    assert alone("prod-hk-infer") == ["prod-hk-infer"]
    assert (one / "prod-hk-infer.json").read_text() == (every / "prod-hk-infer.json").read_text()
    changed = stack_doc("dev-us-train")
    changed["config"][CONFIG_KEY]["tags"]["Owner"] = "someone-else@example.com"
    write_stack("dev-us-train", changed)
    assert alone("prod-hk-infer") == ["dev-us-train", "prod-hk-infer"]
    assert alone("prod-hk-infer") == ["prod-hk-infer"]


def test_a_stack_plan_is_reused_until_its_stacks_folder_changes(stack_doc, write_stack, monitors) -> None:
    from infra.plan.runner import stack_file_plan

    folder = write_stack("dev-us-train", stack_doc("dev-us-train"))
    first = stack_file_plan("dev-us-train", folder)
    assert stack_file_plan("dev-us-train", folder) is first and len(monitors) == 1
    # a new neighbour: the cross-stack rules see another stack index, so the stack is planned again
    write_stack("prod-us-train", stack_doc("prod-us-train"))
    assert stack_file_plan("dev-us-train", folder) is not first and len(monitors) == 2


def test_cli_writes_plan_json(tmp_path, capsys) -> None:
    assert main(["plan", "--stack", "dev-us-train", "--out", str(tmp_path), "--counts"]) == 0
    doc = json.loads((tmp_path / "dev-us-train.json").read_text())
    assert set(doc) == {"stack", "project", "region", "config", "resources", "outputs"}
    assert doc["stack"] == "dev-us-train" and doc["project"] == "aiplat" and doc["region"] == "us-west-2"
    for r in doc["resources"]:
        assert set(r) == {
            "urn",
            "type",
            "name",
            "parent",
            "provider",
            "inputs",
            "dependencies",
            "propertyDependencies",
            "options",
        }
        assert r["urn"].startswith("urn:pulumi:dev-us-train::aiplat::")
    assert doc["outputs"]["region"] == "us-west-2"
    out = capsys.readouterr().out
    assert "aws:ec2/vpc:Vpc" in out and "resources to create" in out


def _bad_stack(stack_doc, write_stack, mutate) -> str:
    doc = stack_doc("dev-us-train")
    mutate(doc["config"][CONFIG_KEY])
    return str(write_stack("bad", doc))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c.update(regoin=c.pop("region")),
            "aiplat:platform.regoin: unknown key; fix: did you mean 'region'?",
        ),
        (
            lambda c: c.update(region="eu-north-9"),
            "aiplat:platform.region: 'eu-north-9' is not an AWS region",
        ),
        (
            lambda c: (
                c["node_pools"]["gpu"].update(instance_type="p5en.48xlarge") or c.update(region="ap-east-1")
            ),
            "aiplat:platform.node_pools.gpu.instance_type: 'p5en.48xlarge' is not offered in ap-east-1",
        ),
        (
            lambda c: c["node_pools"]["system"].update(instance_type="g5.xlarge"),
            "aiplat:platform.node_pools.system.gpu: false but g5.xlarge has 1 GPUs",
        ),
    ],
    ids=["typo", "region", "not-offered", "gpu-mismatch"],
)
def test_bad_stack_fails_plan_with_one_line_and_no_file(
    stack_doc, write_stack, tmp_path, capsys, mutate, expected
):
    folder = _bad_stack(stack_doc, write_stack, mutate)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "bad.json").write_text("{}")  # a stale plan must not survive
    assert main(["plan", "--stack", "bad", "--stacks-dir", folder, "--out", str(out_dir)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0] and "Pulumi.bad.yaml" in lines[0]
    assert "Traceback" not in err
    assert not (out_dir / "bad.json").exists()


def test_not_offered_registers_no_cloud_resource(stack_doc, write_stack, monitors) -> None:
    from infra.core.errors import ConfigErrors
    from infra.io.stackfiles import load_stack_config
    from infra.plan import runner

    # a type AWS has but does not offer in us-west-2, found from the data, not typed in
    missing = sorted(set(awsdata.instance_type_names()) - awsdata.offered_in_region("us-west-2"))[0]
    folder = _bad_stack(
        stack_doc, write_stack, lambda c: c["node_pools"]["gpu"].update(instance_type=missing)
    )
    cfg = load_stack_config("bad", Path(folder))
    with pytest.raises(ConfigErrors, match=f"{missing}' is not offered in us-west-2"):
        runner.run_plan("bad", cfg, Path(folder))
    # only the provider (configuration, not a cloud resource) was registered before the check
    (monitor,) = monitors
    assert [r.type for r in monitor.recorded] == ["pulumi:providers:aws"]


def test_plan_file_is_the_same_on_every_run(tmp_path) -> None:
    # Reviews diff plan files: two runs of the same stack must write the same bytes.
    from infra.plan.runner import run_plan, write_plan

    first = write_plan(run_plan("prod-us-train"), tmp_path / "a").read_bytes()
    second = write_plan(run_plan("prod-us-train"), tmp_path / "b").read_bytes()
    assert first == second
