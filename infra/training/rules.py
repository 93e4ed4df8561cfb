"""Rules on images and training on the cluster: what Kubernetes, JobSet or the trainer would refuse (or
silently get wrong) is refused before any resource is declared, under `aiplat plan`, `pulumi up` and
`aiplat train render` alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.core import naming
from infra.core.trainer_settings import SCRAPED_METRICS_PORTS
from infra.core.trainjobs import grace_period_s, pod_name_length, quantity_mib
from infra.pools.config import CapacityType
from infra.pools.rules import CAPACITY_BLOCKS_DOC
from infra.stack.registry import Finding, Need, RuleContext, at, error, rule, warning
from infra.training.config import BANDWIDTH_CHECK_NAME

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

JOBSET_WEBHOOK = "https://github.com/kubernetes-sigs/jobset/blob/v0.12.0/pkg/webhooks/jobset_webhook.go"
SPOT_NOTICE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html"
GRACE_DOC = "https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#hook-handler-execution"
EMPTYDIR_DOC = "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"
SPOT_NOTICE_S = 120
# desiredSize: "Whenever this parameter changes, the number of worker nodes in the node group is updated"
SCALING_DOC = "https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html"


def _jobs(ctx: RuleContext) -> Iterator[tuple[tuple[str, ...], str, int]]:
    """(field path, TrainJob name, nodes) of every TrainJob the stack declares."""
    t = ctx.cfg.training
    if t is None:
        return
    for name, run in t.runs.items():
        yield ("training", "runs", name, "nodes"), name, run.nodes
    if t.bandwidth_check.enabled:
        yield ("training", "bandwidth_check", "nodes"), BANDWIDTH_CHECK_NAME, t.bandwidth_check.nodes


@rule("bandwidth-check-queued")
def bandwidth_check_queued(ctx: RuleContext) -> Iterator[Finding]:
    """On a stack with teams (Kueue), the bandwidth check names the team whose queue admits it: a TrainJob
    outside Kueue would take GPUs Kueue counts as free and leave admitted work unplaceable."""
    t = ctx.cfg.training
    if t is None or not t.bandwidth_check.enabled or not ctx.cfg.teams:
        return
    team = t.bandwidth_check.team
    teams = sorted(ctx.cfg.teams)
    if team is None:
        yield error(
            at("training", "bandwidth_check", "team"),
            "not set, but the stack's GPUs are Kueue's (teams): a check outside its queues would take nodes "
            "Kueue counts as free",
            f"set training.bandwidth_check.team to one of {teams} (its quota admits the check)",
        )
    elif team not in ctx.cfg.teams:
        yield error(
            at("training", "bandwidth_check", "team"),
            f"{team!r} is not one of the stack's teams {teams}",
            f"use one of {teams}",
        )
    elif t.runtime.pool not in ctx.cfg.teams[team].quotas:
        yield error(
            at("training", "bandwidth_check", "team"),
            f"team {team!r} has no quota on the runtime's pool {t.runtime.pool!r}: Kueue would never admit "
            "the check",
            f"pick a team with quota on {t.runtime.pool!r} or give {team!r} one",
        )


@rule("training-runtime-pool")
def runtime_pool(ctx: RuleContext) -> Iterator[Finding]:
    """The runtime's pool exists and is a GPU pool."""
    t = ctx.cfg.training
    if t is None:
        return
    pools = ctx.cfg.node_pools
    pool = pools.get(t.runtime.pool)
    if pool is None:
        yield error(
            at("training", "runtime", "pool"),
            f"{t.runtime.pool!r} is not a node pool of this stack",
            f"use one of {sorted(pools)}",
        )
    elif not pool.gpu:
        yield error(
            at("training", "runtime", "pool"),
            f"pool {t.runtime.pool!r} is not a GPU pool (gpu: false)",
            "name a GPU pool: the workers request every GPU of a node",
        )


@rule("image-repositories")
def image_repositories(ctx: RuleContext) -> Iterator[Finding]:
    """Every image goes to a repository of the registry, and the runtime's image is one of them."""
    repos = set(ctx.cfg.registry.repositories)
    for name in ctx.cfg.images.builds:
        if name not in repos:
            yield error(
                at("images", "builds", name),
                f"no ECR repository {name!r} (registry.repositories: {sorted(repos)})",
                f"add {name!r} to registry.repositories or rename the image",
            )
    t = ctx.cfg.training
    if t is not None and t.runtime.image not in ctx.cfg.images.builds:
        yield error(
            at("training", "runtime", "image"),
            f"{t.runtime.image!r} is not an image of images.builds",
            f"add images.builds.{t.runtime.image} (a dockerfile or a prebuilt digest)",
        )


@rule("image-base-unpinned")
def image_base_unpinned(ctx: RuleContext) -> Iterator[Finding]:
    """A build whose base image is named without a digest (``unpinned_base`` says why) warns on every plan:
    what the image holds is whatever the registry returns for the tag that day. (A base without a digest
    and without a reason is refused where the Dockerfile is read, infra/io/build_context.py.)"""
    for name, b in ctx.cfg.images.builds.items():
        if b.unpinned_base and not b.prebuilt:
            yield warning(
                at("images", "builds", name, "unpinned_base"),
                f"the base image of {name!r} is not pinned by digest ({b.unpinned_base})",
                f"pin it: images.builds.{name}.build_args.<the FROM argument>: "
                "'<image>:<tag>@sha256:<digest>' (`docker buildx imagetools inspect <image>:<tag>`), "
                "then drop unpinned_base",
            )


@rule("train-job-name-fits")
def job_names(ctx: RuleContext) -> Iterator[Finding]:
    """JobSet refuses a TrainJob whose generated pod names exceed 63 characters."""
    for path, name, nodes in _jobs(ctx):
        length = pod_name_length(name, nodes)
        if length > 63:
            yield error(
                at(*path[:-1]),
                f"TrainJob {name!r} on {nodes} nodes gives pod names of {length} characters; JobSet "
                "refuses more than 63",
                f"shorten the name by {length - 63} characters",
                JOBSET_WEBHOOK,
            )


def nodes_fit_pool(
    cfg: PlatformConfig, field: str, name: str, nodes: int, *, for_team: bool = False
) -> Iterator[Finding]:
    """A TrainJob ``name`` on ``nodes`` nodes of the runtime's pool (``field``: where the count is set):
    no more than the pool's max_size, nor its desired_size (nothing scales managed node groups); a Capacity
    Block pool below the job is a warning (it is scaled up when its block starts). ``for_team``: a team's
    job, whose author cannot change the pool: the fix is fewer nodes or a request to the platform team."""
    t = cfg.training
    if t is None or t.runtime.pool not in cfg.node_pools:
        return
    name_of_pool = t.runtime.pool
    pool = cfg.node_pools[name_of_pool]
    if nodes > pool.max_size:
        yield error(
            field,
            f"{name} wants {nodes} nodes but pool {name_of_pool!r} has max_size {pool.max_size}; its "
            "pods would stay Pending",
            f"use at most {pool.max_size} nodes, or ask your platform team to raise "
            f"node_pools.{name_of_pool}.max_size"
            if for_team
            else f"use at most {pool.max_size} nodes or raise node_pools.{name_of_pool}.max_size",
        )
    elif nodes > pool.desired_size and pool.capacity_type is CapacityType.capacity_block:
        # No instance can launch before the block starts, so the pool waits at 0
        # (docs/platform/node-pools.md, "Pool size"); the run is declared suspended and started by hand
        # once the nodes are there.
        yield warning(
            field,
            f"{name} wants {nodes} nodes but Capacity Block pool {name_of_pool!r} has desired_size "
            f"{pool.desired_size}: its pods stay Pending until the pool is scaled up",
            f"ask your platform team to scale pool {name_of_pool!r} to {nodes} nodes when its block starts"
            if for_team
            else f"when the block starts, set node_pools.{name_of_pool}.desired_size to {nodes} (at most the "
            "block's instance count) and run pulumi up",
            CAPACITY_BLOCKS_DOC,
        )
    elif nodes > pool.desired_size:
        # Managed node groups keep desired_size nodes: no cluster autoscaler is deployed, Karpenter
        # launches only its own NodePools' nodes, and the runtime's pods require aiplat.io/pool=<this
        # pool>, which Karpenter's nodes never carry.
        cluster = cfg.names.cluster
        group = naming.nodegroup_name(cfg.names.stack_prefix, name_of_pool)
        if for_team:
            yield error(
                field,
                f"{name} wants {nodes} nodes but pool {name_of_pool!r} keeps {pool.desired_size} (nothing "
                f"scales it), so {nodes - pool.desired_size} of its pods would stay Pending",
                f"use at most {pool.desired_size} nodes, or ask your platform team to scale pool "
                f"{name_of_pool!r} to {nodes} nodes",
            )
            return
        yield error(
            field,
            f"{name} wants {nodes} nodes but pool {name_of_pool!r} has desired_size {pool.desired_size} "
            "and nothing scales managed node groups (no cluster autoscaler), so "
            f"{nodes - pool.desired_size} of its pods would stay Pending",
            f"set node_pools.{name_of_pool}.desired_size to {nodes} and run pulumi up, or scale the "
            f"group now with aws eks update-nodegroup-config --cluster-name {cluster} --nodegroup-name "
            f"{group} --scaling-config desiredSize={nodes}",
            SCALING_DOC,
        )


@rule("train-job-nodes-fit-pool")
def job_nodes(ctx: RuleContext) -> Iterator[Finding]:
    """A TrainJob asks for no more nodes than the pool has (its desired_size: nothing scales managed node
    groups); one pod per node. A Capacity Block pool below the run is a warning: it is scaled up when its
    block starts."""
    t = ctx.cfg.training
    if t is None or t.runtime.pool not in ctx.cfg.node_pools:
        return
    pool = ctx.cfg.node_pools[t.runtime.pool]
    for path, name, nodes in _jobs(ctx):
        yield from nodes_fit_pool(ctx.cfg, at(*path), name, nodes)
    bc = t.bandwidth_check
    if bc.enabled and bc.nodes == 1 and pool.efa:
        yield warning(
            at("training", "bandwidth_check", "nodes"),
            "one node measures NVLink only, not EFA",
            "use 2 or more nodes to measure the network",
        )


@rule("trainer-configs-load", needs=[Need.trainer])
def trainer_configs(ctx: RuleContext) -> Iterator[Finding]:
    """Every trainer config the stack names loads with the trainer's own validation; the runtime's mounts
    its cache at an absolute path and serves metrics on the ports the platform scrapes."""
    t = ctx.cfg.training
    if t is None or ctx.trainer is None:
        return
    low, high = SCRAPED_METRICS_PORTS
    for key, s in ctx.trainer.items():
        if s.error:
            field = (
                at("training", "runtime", "trainer_config")
                if key == "runtime"
                else at("training", *key.split(".", 1), "config")
            )
            yield error(field, f"{s.path}: {s.error}", "fix the trainer config or its overrides")
            continue
        if key != "runtime":
            continue  # runs are compared with the runtime (runs-match-runtime)
        if s.metrics_port_base not in (0, low):
            yield error(
                at("training", "runtime", "trainer_config"),
                f"{s.path}: metrics.port_base {s.metrics_port_base}: the trainer serves on port_base + "
                f"LOCAL_RANK, but the PodMonitor and the training namespace's NetworkPolicy admit only "
                f"{low}-{high}, so nothing would be scraped",
                f"use metrics.port_base = {low} (or 0 for no metrics endpoint)",
            )
        if not s.cache_dir.startswith("/"):
            yield error(
                at("training", "runtime", "trainer_config"),
                f"{s.path}: data.cache_dir {s.cache_dir!r} is relative; the runtime mounts the NVMe cache "
                "there and Kubernetes needs an absolute mountPath",
                "use a config whose data.cache_dir is absolute, e.g. /mnt/nvme/trainer-data",
            )


@rule("runs-match-runtime", needs=[Need.trainer])
def runs_match_runtime(ctx: RuleContext) -> Iterator[Finding]:
    """A run's trainer config agrees with the runtime's: cache mount, metrics ports, shutdown window."""
    t = ctx.cfg.training
    if t is None or ctx.trainer is None or "runtime" not in ctx.trainer:
        return
    rt = ctx.trainer["runtime"]
    if rt.error:
        return
    grace = grace_period_s(rt.shutdown_window_s, t.runtime.grace_margin_s)
    for name in t.runs:
        s = ctx.trainer.get(f"runs.{name}")
        if s is None or s.error:
            continue
        field = at("training", "runs", name, "config")
        if s.cache_dir != rt.cache_dir and not s.cache_dir.startswith(rt.cache_dir.rstrip("/") + "/"):
            yield error(
                field,
                f"data.cache_dir {s.cache_dir!r} is not on the NVMe cache, which the runtime mounts at "
                f"{rt.cache_dir!r} (from {rt.path}); the cache would fill the container's root file system",
                f"set data.cache_dir under {rt.cache_dir}",
            )
        if s.metrics_port_base != rt.metrics_port_base:
            yield error(
                field,
                f"metrics.port_base {s.metrics_port_base} differs from the runtime's "
                f"{rt.metrics_port_base}; the PodMonitor would scrape nothing",
                f"set metrics.port_base = {rt.metrics_port_base}",
            )
        if s.shutdown_window_s > rt.shutdown_window_s:
            yield error(
                field,
                f"checkpoint.shutdown_window_s {s.shutdown_window_s:g} s is longer than the runtime's "
                f"{rt.shutdown_window_s:g} s; pods get {grace} s after SIGTERM and would be killed "
                "during the preemption checkpoint",
                f"use at most {rt.shutdown_window_s:g} s, or raise it in {rt.path}",
                GRACE_DOC,
            )


@rule("spot-grace-within-notice", needs=[Need.trainer])
def spot_grace(ctx: RuleContext) -> Iterator[Finding]:
    """On Spot, the grace period should fit in the two-minute interruption notice."""
    t = ctx.cfg.training
    if t is None or ctx.trainer is None or "runtime" not in ctx.trainer:
        return
    pool = ctx.cfg.node_pools.get(t.runtime.pool)
    rt = ctx.trainer["runtime"]
    if pool is None or pool.capacity_type.value != "spot" or rt.error:
        return
    grace = grace_period_s(rt.shutdown_window_s, t.runtime.grace_margin_s)
    if grace > SPOT_NOTICE_S:
        yield warning(
            at("training", "runtime", "trainer_config"),
            f"termination grace {grace} s exceeds Spot's {SPOT_NOTICE_S} s interruption notice; a "
            "preemption checkpoint may be cut off",
            f"use a config with checkpoint.shutdown_window_s <= {SPOT_NOTICE_S - t.runtime.grace_margin_s}",
            SPOT_NOTICE,
        )


@rule("runtime-fits-node", needs=[Need.facts])
def runtime_fits_node(ctx: RuleContext) -> Iterator[Finding]:
    """The data cache fits the instance store, /dev/shm fits the memory limit, EFA pools get huge pages."""
    t = ctx.cfg.training
    if t is None or ctx.facts is None or t.runtime.pool not in ctx.cfg.node_pools:
        return
    pool = ctx.cfg.node_pools[t.runtime.pool]
    facts = ctx.facts.instances.get(pool.instance_type)
    if facts is None:
        return
    r = t.runtime
    if r.cache_size_gib is None and not facts.has_instance_store:
        yield error(
            at("training", "runtime", "cache_size_gib"),
            f"{pool.instance_type} has no NVMe instance store to size the data cache from",
            f"set cache_size_gib (it then lives on the {pool.root_volume_gib} GiB root volume)",
        )
    elif (
        r.cache_size_gib is not None
        and facts.has_instance_store
        and r.cache_size_gib > facts.instance_store_total_gb
    ):
        yield error(
            at("training", "runtime", "cache_size_gib"),
            f"{r.cache_size_gib} GiB is more than the {facts.instance_store_total_gb} GB instance store "
            f"of {pool.instance_type}",
            f"use at most {int(facts.instance_store_total_gb * 0.9)}",
        )
    if r.shm_size is not None:
        limit = int(facts.memory_mib * r.memory_fraction)
        if quantity_mib(r.shm_size) >= limit:
            yield error(
                at("training", "runtime", "shm_size"),
                f"{r.shm_size} is not below the worker's memory limit ({limit} MiB); /dev/shm counts "
                "against it",
                "use a smaller shm_size",
                EMPTYDIR_DOC,
            )
