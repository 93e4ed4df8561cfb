"""``aiplat review`` end to end: a saved plan gives the stack's verdict, and the issue's "Done when" changes
make the review fail with the rule's message: through a changed stack file where the config can express the
change, through a changed saved plan (what a CI job keeps) where it cannot (nothing in the stack config opens
SSH or drops bucket encryption: those come from a code change, which shows up in the plan)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from infra.cli.common import EXIT_POLICY
from infra.cli.main import main
from infra.io.policypack import read_plan
from infra.plan.runner import run_plan
from infra.review import review_configured_plan
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that a violation's message stays on one table row line."""
    from rich.console import Console

    monkeypatch.setattr(
        "infra.cli.main.consoles", lambda: (Console(width=600), Console(stderr=True, width=600))
    )


_SAVED: dict[tuple[str, str], str] = {}


def plan_file(
    tmp_path: Path, stack: str, mutate: Callable[[dict], None] | None = None, stacks_dir: Path | None = None
) -> Path:
    """``aiplat plan`` the stack (once per session and folder), copy the saved plan into tmp_path,
    optionally edit it, return its path."""
    key = (stack, str(stacks_dir or ""))
    if key not in _SAVED:
        out = tmp_path / "planned"
        extra = ["--stacks-dir", str(stacks_dir)] if stacks_dir else []
        assert main(["plan", "--stack", stack, *extra, "--out", str(out)]) == 0
        _SAVED[key] = (out / f"{stack}.json").read_text()
    doc = json.loads(_SAVED[key])
    if mutate:
        mutate(doc)
    path = tmp_path / f"{stack}.json"
    path.write_text(json.dumps(doc))
    return path


def test_saved_plan_gives_the_same_verdict_as_the_stack(tmp_path, capsys) -> None:
    path = plan_file(tmp_path, "prod-us-train")
    capsys.readouterr()
    from_file = review_configured_plan(read_plan(path))
    from_stack = review_configured_plan(run_plan("prod-us-train").as_json())
    assert from_file.diagnostics == from_stack.diagnostics
    # (prod-us-train passes the pack; the verdict from the file and from the stack must agree)
    code_file = main(["review", "--plan", str(path)])
    out_file = capsys.readouterr().out
    code_stack = main(["review", "--stack", "prod-us-train"])
    out_stack = capsys.readouterr().out
    assert code_file == code_stack == (EXIT_POLICY if from_file.mandatory else 0)

    def table(out: str) -> list[str]:
        return [line for line in out.splitlines() if not line.startswith("reviewed ")]

    assert table(out_file) == table(out_stack)
    verdict = (
        f"prod-us-train: fails aiplat-policies@0.1.0: {len(from_file.mandatory)} mandatory"
        if from_file.mandatory
        else "prod-us-train: passes"
    )
    assert verdict in out_file


def _resource(doc: dict, type_: str, name: str) -> dict:
    return next(r for r in doc["resources"] if r["type"] == type_ and r["name"] == name)


def open_ssh_to_the_world(doc: dict) -> None:
    sg = _resource(doc, "aws:ec2/securityGroup:SecurityGroup", "pool-train-efa-sg")
    doc["resources"].append(
        {
            **{k: sg[k] for k in ("parent", "provider", "options")},
            "urn": sg["urn"].replace(
                "aws:ec2/securityGroup:SecurityGroup::pool-train-efa-sg",
                "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule::pool-train-ssh",
            ),
            "type": "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "name": "pool-train-ssh",
            "inputs": {
                "cidrIpv4": "0.0.0.0/0",
                "fromPort": 22.0,
                "toPort": 22.0,
                "ipProtocol": "tcp",
                "securityGroupId": "sg-1",
            },
            "dependencies": [sg["urn"]],
            "propertyDependencies": {"securityGroupId": [sg["urn"]]},
        }
    )


def drop_bucket_encryption(doc: dict) -> None:
    sse = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    doc["resources"] = [
        r for r in doc["resources"] if not (r["type"] == sse and r["name"] == "storage-datasets-sse")
    ]


def spread_training_pool(doc: dict) -> None:
    ng = _resource(doc, "aws:eks/nodeGroup:NodeGroup", "pool-train-ng")
    other = _resource(doc, "aws:ec2/subnet:Subnet", "network-private-us-east-1b")
    ng["inputs"]["subnetIds"].append("subnet-b")
    ng["propertyDependencies"]["subnetIds"].append(other["urn"])


def inference_resource_in_us_east_1(doc: dict) -> None:
    _resource(doc, "aws:ec2/vpc:Vpc", "network-vpc")["inputs"]["region"] = "us-east-1"


def drop_efa(doc: dict) -> None:
    _resource(doc, "aws:ec2/launchTemplate:LaunchTemplate", "pool-train-lt")["inputs"].pop(
        "networkInterfaces"
    )


@pytest.mark.parametrize(
    ("stack", "mutate", "policy", "message"),
    [
        (
            "prod-us-train",
            open_ssh_to_the_world,
            "no-world-open-ingress",
            "ingress on SSH (port 22) (protocol tcp) from ['0.0.0.0/0']",
        ),
        (
            "prod-us-train",
            open_ssh_to_the_world,
            "nodes-no-ssh",
            "ingress on ports 22-22 from ['0.0.0.0/0'] admits SSH",
        ),
        (
            "dev-us-train",
            drop_bucket_encryption,
            "s3-bucket-cmk-encryption",
            "bucket 'storage-datasets' has no default encryption configuration",
        ),
        (
            "prod-us-train",
            spread_training_pool,
            "training-pool-single-zone",
            "node group 'pool-train-ng': the pool uses EFA but spans 2 zones/subnets "
            "['us-east-1a', 'us-east-1b']",
        ),
        (
            "prod-hk-infer",
            inference_resource_in_us_east_1,
            "data-residency-regions",
            "created in us-east-1, which is not allowed for infer stacks",
        ),
        (
            "odcr",
            drop_efa,
            "training-pool-efa-interfaces",
            "attaches 0 EFA interfaces but p4d.24xlarge takes 4",
        ),
    ],
    ids=["ssh-world", "ssh-nodes", "no-encryption", "two-zones", "infer-in-us-east-1", "odcr-without-efa"],
)
def test_changed_plan_fails_with_the_rules_message(tmp_path, capsys, stack, mutate, policy, message) -> None:
    examples = REPO / "examples" if stack == "odcr" else None
    if examples:
        before = review_configured_plan(read_plan(plan_file(tmp_path, stack, stacks_dir=examples))).mandatory
    path = plan_file(tmp_path, stack, mutate, stacks_dir=examples)
    capsys.readouterr()
    assert main(["review", "--plan", str(path)]) == EXIT_POLICY
    out = capsys.readouterr().out
    review = review_configured_plan(read_plan(path))
    assert any(d.policy == policy and message in d.message and d.mandatory for d in review.diagnostics), [
        (d.policy, d.message) for d in review.diagnostics if d.policy == policy
    ]
    assert policy in out and message in out
    if examples:
        assert not [d for d in before if d.policy == policy]


def _stack_doc(name: str) -> dict:
    import yaml

    return yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())


def test_stack_file_spreading_the_training_pool_fails_with_the_same_message(tmp_path, capsys) -> None:
    """The config can spread the pool: the plan refuses it before any resource, with the message the
    policy pack's training-pool-single-zone gives a plan that has it (shared:
    infra.pools.rules.zone_spread)."""
    import yaml

    doc = _stack_doc("prod-us-train")
    doc["config"]["aiplat:platform"]["node_pools"]["train"]["availability_zones"] = [
        "us-east-1a",
        "us-east-1b",
    ]
    (tmp_path / "Pulumi.prod-us-train.yaml").write_text(yaml.safe_dump(doc))
    for other in ("prod-hk-infer", "prod-sg-infer"):
        (tmp_path / f"Pulumi.{other}.yaml").write_text((REPO / "stacks" / f"Pulumi.{other}.yaml").read_text())
    assert main(["review", "--stack", "prod-us-train", "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the pool uses EFA but spans 2 zones/subnets ['us-east-1a', 'us-east-1b']" in err


def test_stack_file_putting_an_inference_stack_in_us_east_1_fails(tmp_path, capsys) -> None:
    import yaml

    doc = _stack_doc("prod-sg-infer")
    platform = doc["config"]["aiplat:platform"]
    platform["region"] = "us-east-1"
    platform["storage"].pop("source_stack")
    platform.pop("inference")  # serving needs a source stack (rule inference-needs-cluster-services)
    (tmp_path / "Pulumi.prod-us-infer.yaml").write_text(yaml.safe_dump(doc))
    assert main(["review", "--stack", "prod-us-infer", "--stacks-dir", str(tmp_path)]) == EXIT_POLICY
    captured = capsys.readouterr()
    out = captured.out
    message = "created in us-east-1, which is not allowed for infer stacks (['ap-east-1', 'ap-southeast-1'])"
    # one row for the policy, with the count and the message once (not one row per resource)
    assert out.count("data-residency-regions") == 1 and out.count(message) == 1
    count = int(re.search(r"data-residency-regions\s*│\s*(\d+)\s*│", out).group(1))
    assert count > 100
    assert re.search(r"\+\d+ more \(--verbose\)", out)
    # the plan said it once, on the field, from the same allowlist
    assert captured.err.count("is outside the regions the policy pack allows") == 1
    assert (
        "warning: prod-us-infer: aiplat:platform.region: us-east-1 is outside the regions the policy pack "
        "allows for infer stacks (ap-east-1, ap-southeast-1): aiplat review refuses every resource of the "
        "stack (data-residency-regions)"
    ) in captured.err
    # --verbose: every violation on its own row
    args = ["review", "--stack", "prod-us-infer", "--stacks-dir", str(tmp_path), "--verbose"]
    assert main(args) == EXIT_POLICY
    verbose = capsys.readouterr().out
    assert verbose.count(message) == count


def test_pack_config_file_changes_levels_and_settings(tmp_path, capsys) -> None:
    path = plan_file(tmp_path, "dev-us-train")
    config = tmp_path / "pack-config.json"
    expected = {"imds-v2-hop-limit-1", "cloudtrail-present", "eks-upgrade-policy", "s3-tls-floor"}
    # the file replaces dev-us-train's own, which accepts its unpriced interface endpoints
    config.write_text(
        json.dumps({"cost-cap": {"unpriced": "ignore"}, **{name: "advisory" for name in expected}})
    )
    capsys.readouterr()
    assert main(["review", "--plan", str(path), "--policy-pack-config", str(config)]) == 0
    assert "dev-us-train: passes" in capsys.readouterr().out
    config.write_text(
        json.dumps({"all": "disabled", "gpu-budget": {"enforcementLevel": "mandatory", "maxGpus": 1}})
    )
    assert main(["review", "--plan", str(path), "--policy-pack-config", str(config)]) == EXIT_POLICY
    out = capsys.readouterr().out
    assert (
        "stack 'dev-us-train' can run 6 GPUs (pool-gpu-ng 2x1, karpenter-nodepool-spot-gpu limit 4), " in out
    )
    assert "over its budget of 1" in out


def test_review_reads_each_stacks_own_pack_config_file(tmp_path, capsys) -> None:
    """Without --policy-pack-config a review takes <stacks-dir>/policy-pack/<stack>.json; a file given on the
    command line replaces it."""
    path = plan_file(tmp_path, "dev-us-train")
    stacks_dir = tmp_path / "stacks"
    (stacks_dir / "policy-pack").mkdir(parents=True)
    (stacks_dir / "policy-pack" / "dev-us-train.json").write_text(json.dumps({"gpu-budget": {"maxGpus": 5}}))
    capsys.readouterr()
    assert main(["review", "--plan", str(path), "--stacks-dir", str(stacks_dir)]) == EXIT_POLICY
    assert "over its budget of 5" in capsys.readouterr().out
    given = tmp_path / "pack-config.json"
    given.write_text(json.dumps({"gpu-budget": {"maxGpus": 6}, "cost-cap": {"unpriced": "ignore"}}))
    assert (
        main(
            [
                "review",
                "--plan",
                str(path),
                "--stacks-dir",
                str(stacks_dir),
                "--policy-pack-config",
                str(given),
            ]
        )
        == 0
    )
    assert "dev-us-train: passes" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"no-such-rule": "advisory"}, "policy pack config names unknown policies ['no-such-rule']"),
        ({"gpu-budget": "loud"}, "policy pack config gpu-budget: 'loud' is not one of"),
        (
            {"gpu-budget": {"maxGpu": 3}},
            "policy pack config gpu-budget: unknown properties ['maxGpu'] (known: ['maxGpus'])",
        ),
        (
            {"gpu-budget": {"maxGpus": {"dev-us-train": 3}}},
            "policy pack config gpu-budget.maxGpus: {'dev-us-train': 3} is not of type number; fix: give "
            "a JSON number (The most GPUs the stack may run.)",
        ),
        (
            {"instance-type-allowlist": {"allowedInstanceTypes": ["g5.*", 5]}},
            "policy pack config instance-type-allowlist.allowedInstanceTypes[1]: 5 is not of type string",
        ),
    ],
    ids=["unknown-policy", "bad-level", "bad-property", "stack-keyed-value", "bad-item"],
)
def test_bad_pack_config_is_a_user_error(tmp_path, capsys, config, error) -> None:
    path = plan_file(tmp_path, "dev-us-train")
    file = tmp_path / "pack-config.json"
    file.write_text(json.dumps(config))
    capsys.readouterr()
    assert main(["review", "--plan", str(path), "--policy-pack-config", str(file)]) == 2
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err


def test_bad_plan_file_is_a_user_error(tmp_path, capsys) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"stack": "x"}))
    assert main(["review", "--plan", str(bad)]) == 2
    assert (
        "not a plan written by 'aiplat plan' (missing ['project', 'config', 'resources', 'outputs'])"
        in capsys.readouterr().err
    )
    assert main(["review", "--plan", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the plan" in capsys.readouterr().err


def test_json_holds_each_stacks_verdict_and_violations(tmp_path, capsys) -> None:
    path = plan_file(tmp_path, "dev-us-train")
    stacks_dir = tmp_path / "stacks"
    (stacks_dir / "policy-pack").mkdir(parents=True)
    (stacks_dir / "policy-pack" / "dev-us-train.json").write_text(json.dumps({"gpu-budget": {"maxGpus": 5}}))
    capsys.readouterr()
    code = main(["review", "--plan", str(path), "--stacks-dir", str(stacks_dir), "--json"])
    doc = json.loads(capsys.readouterr().out)  # stdout is the document alone
    (review,) = doc["reviews"]
    assert (code, review["stack"], review["passed"]) == (EXIT_POLICY, "dev-us-train", False)
    budget = [v for v in review["violations"] if v["policy"] == "gpu-budget"]
    assert (
        budget and budget[0]["enforcement"] == "mandatory" and "over its budget of 5" in budget[0]["message"]
    )
