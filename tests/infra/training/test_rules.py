"""Plan-time refusals of training configs that Kubernetes, JobSet or the trainer would refuse or silently get
wrong. Each case changes one thing in the real prod-us-train (or dev-us-train) stack file and runs the
real program under mocks: one line naming the field and the fix, and no cloud resource registered."""

from __future__ import annotations

import pytest

from infra.core.errors import ConfigErrors
from infra.core.trainer_settings import TrainerSettings
from infra.plan import runner
from infra.schema.parse import parse_platform_config
from infra.stack.registry import RuleContext
from infra.training.rules import trainer_configs
from tests.support.config_cases import assert_refused, set_at

T = "aiplat:platform.training"


def _run(**fields):
    def mutate(c: dict) -> None:
        c["training"]["runs"]["gpt2-124m"].update(fields)

    return mutate


CASES = [
    (set_at("training.runtime.pool", "gpux"), f"{T}.runtime.pool: 'gpux' is not a node pool of this stack"),
    (set_at("training.runtime.pool", "system"), "pool 'system' is not a GPU pool"),
    (
        set_at("training.runtime.image", "missing"),
        f"{T}.runtime.image: 'missing' is not an image of images.builds",
    ),
    (
        set_at("images.builds.notarepo", {"dockerfile": "images/trainer/Dockerfile"}),
        "aiplat:platform.images.builds.notarepo: no ECR repository 'notarepo'",
    ),
    (_run(nodes=5), f"{T}.runs.gpt2-124m.nodes: gpt2-124m wants 5 nodes but pool 'train' has max_size 4"),
    # Nothing scales a managed node group (no cluster autoscaler): the pool has desired_size nodes.
    (
        _run(nodes=3),
        f"{T}.runs.gpt2-124m.nodes: gpt2-124m wants 3 nodes but pool 'train' has desired_size 2 and nothing "
        "scales managed node groups (no cluster autoscaler), so 1 of its pods would stay Pending; fix: set "
        "node_pools.train.desired_size to 3 and run pulumi up, or scale the group now with aws eks "
        "update-nodegroup-config --cluster-name aiplat-prod-train --nodegroup-name "
        "aiplat-prod-train-train --scaling-config desiredSize=3",
    ),
    (
        # the case: a check outside Kueue takes GPUs Kueue counts as free
        lambda c: c["training"]["bandwidth_check"].pop("team"),
        f"{T}.bandwidth_check.team: not set, but the stack's GPUs are Kueue's (teams): a check outside its "
        "queues would take nodes Kueue counts as free; fix: set training.bandwidth_check.team to one of "
        "['production', 'research']",
    ),
    (
        set_at("training.bandwidth_check.team", "ml"),
        f"{T}.bandwidth_check.team: 'ml' is not one of the stack's teams ['production', 'research']",
    ),
    (
        set_at("training.bandwidth_check.nodes", 4),
        f"{T}.bandwidth_check.nodes: bandwidth-check wants 4 nodes but pool 'train' has desired_size 2",
    ),
    (
        lambda c: c["training"]["runs"].update({"r" * 50: dict(c["training"]["runs"]["gpt2-124m"])}),
        "gives pod names of 65 characters; JobSet refuses more than 63",
    ),
    (
        _run(config="trainer/configs/debug.toml"),
        "data.cache_dir 'runs/data/cache' is not on the NVMe cache, which the runtime mounts at "
        "'/mnt/nvme/trainer-data'",
    ),
    (_run(overrides={"metrics.port_base": "9500"}), "metrics.port_base 9500 differs from the runtime's 9400"),
    (
        _run(overrides={"checkpoint.shutdown_window_s": "300"}),
        "checkpoint.shutdown_window_s 300 s is longer than the runtime's 110 s; pods get 130 s after SIGTERM",
    ),
    (_run(overrides={"train.steps": "0"}), "train.steps=0"),
    (
        set_at("training.runtime.trainer_config", "trainer/configs/debug.toml"),
        "data.cache_dir 'runs/data/cache' is relative",
    ),
    (set_at("training.runtime.cache_size_gib", 40000), "40000 GiB is more than the 30400 GB instance store"),
    (set_at("training.runtime.shm_size", "4000Gi"), "4000Gi is not below the worker's memory limit"),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES)
def test_bad_training_config_is_refused_before_any_cloud_resource(
    stack_config, monitors, mutate, expected
) -> None:
    raw = stack_config("prod-us-train")
    mutate(raw)
    assert_refused(raw, expected, monitors)
    assert len(monitors) == 1  # refused by a rule, in the one program run


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("training.runs.gpt2-124m.overrides", {"data.source": "s3://x/y"}, "is set by the platform"),
        (
            "training.runs.gpt2-124m.dataset",
            "s3://bucket/x",
            "must be a key prefix inside the datasets bucket",
        ),
        ("images.builds.trainer.prebuilt", "repo/trainer:latest", "is not an image named by digest"),
        ("training.runs.Bad_Name", {"config": "x", "nodes": 1, "dataset": "d"}, "must be lower-case letters"),
    ],
)
def test_schema_refuses(stack_config, path: str, value, expected: str) -> None:
    raw = stack_config("prod-us-train")
    set_at(path, value)(raw)
    with pytest.raises(ConfigErrors) as info:
        parse_platform_config(raw)
    assert expected in str(info.value), str(info.value)


def test_infer_stack_refuses_images_and_training(stack_config) -> None:
    raw = stack_config("prod-hk-infer")
    raw["images"] = {"builds": {"trainer": {"dockerfile": "images/trainer/Dockerfile"}}}
    with pytest.raises(ConfigErrors) as info:
        parse_platform_config(raw)
    assert "images are built and pushed by the train stack" in str(info.value)


def test_spot_grace_beyond_the_notice_is_a_warning(stack_config) -> None:
    raw = stack_config("dev-us-train")
    raw["training"]["runtime"]["grace_margin_s"] = 30
    plan = runner.run_plan("dev-us-train", parse_platform_config(raw))
    assert plan.resources
    warnings = [f.one_line() for f in plan.findings]
    assert any("termination grace 140 s exceeds Spot's 120 s interruption notice" in w for w in warnings), (
        warnings
    )


def test_prebuilt_image_is_used_by_digest_without_a_build(stack_config) -> None:
    raw = stack_config("prod-us-train")
    ref = "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer@sha256:" + "ab" * 32
    raw["images"]["builds"]["trainer"]["prebuilt"] = ref
    plan = runner.run_plan("prod-us-train", parse_platform_config(raw))
    built = sorted(f"images-{name}" for name in raw["images"]["builds"] if name != "trainer")
    assert sorted(r.name for r in plan.by_type("docker-build:index:Image")) == built
    (runtime,) = plan.by_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")
    pod = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert pod["containers"][0]["image"] == ref


def test_capacity_block_pool_below_the_run_warns_to_scale_up_when_the_block_starts(stack_config) -> None:
    # A Capacity Block pool stays at desired_size 0 until its block starts (nodes cannot launch before):
    # the plan goes on and says what to do then.
    raw = stack_config("prod-us-train")
    raw["node_pools"]["train"].update(
        capacity_type="capacity_block",
        capacity_reservation={"id": "cr-0123456789abcdef0", "availability_zone": "us-east-1a"},
        placement="auto",
        min_size=0,
        desired_size=0,
    )
    plan = runner.run_plan("prod-us-train", parse_platform_config(raw))
    assert plan.resources
    warnings = [f.one_line() for f in plan.findings if f.rule == "train-job-nodes-fit-pool"]
    assert (
        f"{T}.runs.gpt2-124m.nodes: gpt2-124m wants 2 nodes but Capacity Block pool 'train' has "
        "desired_size 0: its pods stay Pending until the pool is scaled up; fix: when the block starts, set "
        "node_pools.train.desired_size to 2 (at most the block's instance count) and run pulumi up"
    ) in " ".join(warnings), warnings
    assert not [f for f in plan.findings if f.level == "error"]
    # the teams' quotas above its 0 nodes: said, not refused, for a Capacity Block pool before its block
    quota = [f.one_line() for f in plan.findings if f.rule == "team-quotas-fit-pool-together"]
    assert len(quota) == 1 and "until the Capacity Block starts" in quota[0], quota


@pytest.mark.parametrize(("port_base", "refused"), [(9400, False), (0, False), (9500, True), (9401, True)])
def test_runtime_metrics_ports_must_be_the_scraped_ones(stack_config, port_base: int, refused: bool) -> None:
    """The PodMonitor and the training NetworkPolicy admit 9400-9407: a runtime config serving elsewhere
    would be scraped by nothing (runs are held to the runtime's base by runs-match-runtime)."""
    cfg = parse_platform_config(stack_config("prod-us-train"))
    runtime = TrainerSettings(
        path="trainer/configs/x.toml",
        cache_dir="/mnt/nvme/d",
        shutdown_window_s=110,
        metrics_port_base=port_base,
    )
    messages = [f.problem for f in trainer_configs(RuleContext(cfg=cfg, trainer={"runtime": runtime}))]
    if refused:
        assert messages == [
            f"trainer/configs/x.toml: metrics.port_base {port_base}: the trainer serves on port_base + "
            "LOCAL_RANK, but the PodMonitor and the training namespace's NetworkPolicy admit only 9400-9407, "
            "so nothing would be scraped"
        ]
    else:
        assert messages == []
