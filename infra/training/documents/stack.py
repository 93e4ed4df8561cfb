"""The training documents of one stack, from its validated config, the AWS facts of the runtime's pool
and the trainer config's settings. Pure: used by the wiring (what `pulumi up` declares) and by
`aiplat train render` (what a user applies with kubectl), so both produce the same objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.core.facts import InstanceFacts
from infra.core.trainer_settings import TrainerSettings
from infra.fsx.constraints import dataset_path
from infra.fsx.documents import CLAIM_NAME as FSX_CLAIM
from infra.pod_storage.documents import MINIO_CA_SECRET, MINIO_SECRET
from infra.pools.busbw import threshold_for
from infra.pools.documents.nodes import GPU_TAINT_KEY
from infra.queueing import documents as queueing
from infra.queueing.names import QUEUE_LABEL, team_names
from infra.storage.config.storage import BucketPurpose, StorageBackend
from infra.training.config import BANDWIDTH_CHECK_NAME, RunConfig, TrainingConfig
from infra.training.documents import runtime as t

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig


def _training(cfg: PlatformConfig) -> TrainingConfig:
    if cfg.training is None:
        raise ValueError("the stack has no training section")
    return cfg.training


def efa_devices(cfg: PlatformConfig, facts: InstanceFacts) -> int:
    """EFA devices per worker: every EFA interface the pool attaches (the type's maximum unless the pool
    says fewer); 0 on pools without EFA."""
    pool = cfg.node_pools[_training(cfg).runtime.pool]
    if not pool.efa:
        return 0
    return pool.efa_interfaces or facts.efa_interface_limit


def worker(cfg: PlatformConfig, facts: InstanceFacts) -> t.WorkerShape:
    r = _training(cfg).runtime
    return t.worker_shape(
        facts,
        efa_devices=efa_devices(cfg, facts),
        hugepages_2mi=r.hugepages_2mi,
        memory_fraction=r.memory_fraction,
        cpu_fraction=r.cpu_fraction,
        shm_size=r.shm_size,
        cache_size_gib=r.cache_size_gib,
    )


def runtime_spec(
    cfg: PlatformConfig,
    facts: InstanceFacts,
    settings: TrainerSettings,
    image: str,
    price: Mapping[str, Any] | None = None,
) -> t.RuntimeSpec:
    """Our ClusterTrainingRuntime's inputs: sized for the pool's type, shaped by the trainer config;
    ``price``: what the pool's nodes cost (``infra/cost/runs.py`` ``pool_price``), for the run records."""
    training = _training(cfg)
    r = training.runtime
    pool = cfg.node_pools[r.pool]
    shape = worker(cfg, facts)
    grace = t.grace_period_s(settings.shutdown_window_s, r.grace_margin_s)
    tolerations = [t.Toleration(key=GPU_TAINT_KEY, effect="NoSchedule")] + [
        t.Toleration(key=k, value=v.value, effect=v.effect.value)
        for k, v in sorted(pool.taints.items())
        if k != GPU_TAINT_KEY
    ]
    return t.RuntimeSpec(
        name=r.name,
        image=image,
        pool=r.pool,
        shape=shape,
        tolerations=tolerations,
        service_account=cfg.storage.trainer.service_account,
        cache_dir=settings.cache_dir,
        grace_period_s=grace,
        metrics_port_base=settings.metrics_port_base,
        env={
            **t.worker_env(efa=shape.efa_devices > 0, region=cfg.region),
            **t.contract_env(
                grace_period_s=grace,
                cache_dir=settings.cache_dir,
                metrics_port_base=settings.metrics_port_base,
            ),
            **t.price_env(price),
        },
        max_restarts=r.max_restarts,
        worker_restarts=r.worker_restarts,
        default_config=settings.image_path(t.IMAGE_WORKDIR),
        env_from_secret=MINIO_SECRET if cfg.storage.backend == StorageBackend.minio else None,
        trust_ca_secret=MINIO_CA_SECRET if cfg.storage.backend == StorageBackend.minio else None,
        shared_volume=shared_volume(cfg),
        pod_annotations=topology_request(cfg),
        cluster_name=cfg.names.cluster,
    )


def topology_request(cfg: PlatformConfig) -> dict[str, str]:
    """Kueue's topology request on the workers (the runtime's pool has the network Topology: an EFA pool,
    teams declared, topology-aware scheduling on): prefer nodes under one lowest-layer network node, so the
    ranks of a job sit close in the network; Kueue spreads over higher layers when one has too few."""
    training = _training(cfg)
    pool = cfg.node_pools[training.runtime.pool]
    if not (cfg.teams and pool.efa and cfg.queueing.topology_aware):
        return {}
    return {queueing.PREFERRED_TOPOLOGY_ANNOTATION: queueing.PREFERRED_TOPOLOGY_LEVEL}


def shared_volume(cfg: PlatformConfig) -> t.SharedVolume | None:
    """The FSx for Lustre claim the workers mount, when ``cluster_services.fsx`` is on."""
    fsx = cfg.cluster_services.fsx
    if not fsx.enabled:
        return None
    return t.SharedVolume(claim_name=FSX_CLAIM, mount_path=fsx.mount_path, read_only=fsx.read_only)


def data_uri(cfg: PlatformConfig, dataset: str, team: str | None = None) -> str:
    """Where a run reads ``dataset``: under its owner's prefix of the datasets bucket, the platform
    trainer's (``storage.trainer.prefix``) or a team's (``<team>/``), the only one its IAM role reads. The
    FSx for Lustre mount when the file system links that key and ``runs_read_datasets`` is on (the trainer
    reads a local directory in place), else ``s3://<datasets bucket>/<prefix>/<dataset>`` (downloaded once
    into the NVMe cache)."""
    if team is not None:
        return f"s3://{cfg.bucket_name(BucketPurpose.datasets)}/{team}/{dataset}"
    key = cfg.storage.trainer_dataset_key(dataset)
    fsx = cfg.cluster_services.fsx
    if fsx.enabled and fsx.runs_read_datasets:
        path = dataset_path(fsx, key)
        if path is not None:
            return path
    return f"s3://{cfg.bucket_name(BucketPurpose.datasets)}/{key}"


def checkpoint_uri(cfg: PlatformConfig, run_name: str, team: str | None = None) -> str:
    """Checkpoints under the trainer's prefix (its pod role may write only there), one folder per run; a
    team's under ``<team>/checkpoints/<run>`` (AIPLAT_CHECKPOINT_URI, ``team_job_env``)."""
    bucket = cfg.bucket_name(BucketPurpose.checkpoints)
    if team is not None:
        return f"s3://{bucket}/{team}/{TEAM_CHECKPOINTS}/{run_name}"
    return f"s3://{bucket}/{cfg.storage.trainer.prefix.strip('/')}/runs/{run_name}"


# Where a team job's checkpoints and outputs live under the team's prefix of the checkpoints bucket (the
# team's IAM role reads and writes only '<team>/*'): docs/platform/job-contract.md.
TEAM_CHECKPOINTS = "checkpoints"
TEAM_OUTPUTS = "outputs"
TEAM_ENV = "AIPLAT_TEAM"
DATA_URI_ENV = "AIPLAT_DATA_URI"
CHECKPOINT_URI_ENV = "AIPLAT_CHECKPOINT_URI"
OUTPUT_URI_ENV = "AIPLAT_OUTPUT_URI"


def team_job_env(
    cfg: PlatformConfig, *, team: str, job: str, data: str | None, checkpoints: str | None = None
) -> dict[str, str]:
    """The team-job part of the env contract, on every pod of a team's job: the team, where it reads its
    data (``<datasets>/<team>/<data>/``, read-only for the team's role), where it checkpoints (the same
    folder on every attempt, so a restarted attempt resumes) and where it writes what it produces (a model
    to release: an HF folder under ``model/``)."""
    datasets = cfg.bucket_name(BucketPurpose.datasets)
    return {
        TEAM_ENV: team,
        DATA_URI_ENV: f"s3://{datasets}/{team}/" + (f"{data.strip('/')}/" if data else ""),
        CHECKPOINT_URI_ENV: checkpoint_uri(cfg, checkpoints or job, team) + "/",
        OUTPUT_URI_ENV: output_uri(cfg, job, team) + "/",
    }


def output_uri(cfg: PlatformConfig, job: str, team: str) -> str:
    """Where a team's job writes its outputs: ``s3://<checkpoints>/<team>/outputs/<job>``."""
    return f"s3://{cfg.bucket_name(BucketPurpose.checkpoints)}/{team}/{TEAM_OUTPUTS}/{job}"


def run_trainjob(cfg: PlatformConfig, name: str, run: RunConfig, facts: InstanceFacts) -> dict[str, Any]:
    """The TrainJob of a run: the launcher with the run's config and its data and checkpoint URIs; a team's
    run is queued in the team's namespace (``queued_trainjob``)."""
    if run.team is not None:
        return queued_trainjob(
            cfg,
            facts,
            team=run.team,
            priority=run.priority,
            name=name,
            nodes=run.nodes,
            config=run.config,
            dataset=run.dataset,
            overrides=run.overrides,
            hold=run.suspend,
        )
    training = _training(cfg)
    overrides = t.run_overrides(
        data_source=data_uri(cfg, run.dataset), checkpoint_uri=checkpoint_uri(cfg, name), extra=run.overrides
    )
    config_in_image = f"{t.IMAGE_WORKDIR}/{run.config}"
    return t.trainjob_document(
        name=name,
        namespace=cfg.storage.trainer.namespace,
        runtime=training.runtime.name,
        nodes=run.nodes,
        procs_per_node=facts.gpu_count,
        args=t.launcher_args(config_in_image, overrides, worker_restarts=training.runtime.worker_restarts),
        suspend=run.suspend,
    )


def team_priority(cfg: PlatformConfig, team: str, priority: str | None = None) -> str:
    """The WorkloadPriorityClass of a team's job: ``priority``, else the team's default, else the stack's."""
    return priority or cfg.teams[team].default_priority or cfg.queueing.default_priority


def queued_trainjob(
    cfg: PlatformConfig,
    facts: InstanceFacts,
    *,
    team: str,
    name: str,
    nodes: int,
    config: str,
    dataset: str,
    priority: str | None = None,
    overrides: Mapping[str, str] | None = None,
    hold: bool = False,
) -> dict[str, Any]:
    """A TrainJob on the stack's runtime queued in ``team``'s LocalQueue with a WorkloadPriorityClass: in
    the team's namespace (its ``trainer`` service account, whose IAM role reaches only the team's prefixes),
    data from ``s3://<datasets>/<team>/<dataset>``, checkpoints to
    ``s3://<checkpoints>/<team>/checkpoints/<name>``, and the team-job env contract (``team_job_env``).

    Created suspended: Kueue starts it when it admits it. ``hold``: without the queue label, so it waits
    unqueued (the team namespace's jobs are all Kueue's: it never starts on its own) until
    ``kubectl label trainjob -n <namespace> <name> kueue.x-k8s.io/queue-name=<team>`` queues it.
    ``team``/``priority`` must be the stack's (``cfg.teams``, ``queueing.priority_classes``): a KeyError or
    ValueError otherwise; the CLI checks them first for a one-line message.
    """
    training = _training(cfg)
    if team not in cfg.teams:
        raise KeyError(f"team {team!r} is not one of {sorted(cfg.teams)}")
    resolved = team_priority(cfg, team, priority)
    if resolved not in cfg.queueing.priority_classes:
        raise ValueError(f"priority {resolved!r} is not one of {sorted(cfg.queueing.priority_classes)}")
    names = team_names(team, cfg.teams[team].namespace)
    labels = names.trainjob_labels(resolved)
    if hold:
        del labels[QUEUE_LABEL]
    run_overrides = t.run_overrides(
        data_source=data_uri(cfg, dataset, team),
        checkpoint_uri=checkpoint_uri(cfg, name, team),
        extra=overrides or {},
    )
    return t.trainjob_document(
        name=name,
        namespace=names.namespace,
        runtime=training.runtime.name,
        nodes=nodes,
        procs_per_node=facts.gpu_count,
        args=t.launcher_args(
            f"{t.IMAGE_WORKDIR}/{config}", run_overrides, worker_restarts=training.runtime.worker_restarts
        ),
        suspend=True,
        labels=labels,
        env=team_job_env(cfg, team=team, job=name, data=dataset),
    )


def bandwidth_trainjob(
    cfg: PlatformConfig, facts: InstanceFacts, *, name: str = BANDWIDTH_CHECK_NAME, suspend: bool = True
) -> tuple[dict[str, Any], str]:
    """The bandwidth check's TrainJob on the runtime (same pods, env and devices as training) and how its
    threshold was chosen. On a stack with teams it is queued in ``training.bandwidth_check.team``'s queue
    (``suspend``: held without the queue label); without teams, in the trainer namespace, ``suspend`` as
    given."""
    training = _training(cfg)
    bc = training.bandwidth_check
    threshold = threshold_for(facts)
    min_gbps = bc.min_busbw_gbps if bc.min_busbw_gbps is not None else threshold.min_gbps
    basis = (
        "set in training.bandwidth_check.min_busbw_gbps" if bc.min_busbw_gbps is not None else threshold.basis
    )
    namespace, labels = cfg.storage.trainer.namespace, None
    if cfg.teams:
        # Kueue's GPUs: queued in the team's LocalQueue like a team's run (suspended until admitted); the
        # declared one (``suspend``) held without its queue label until labelled.
        if bc.team not in cfg.teams:
            raise KeyError(f"training.bandwidth_check.team {bc.team!r} is not one of {sorted(cfg.teams)}")
        names = team_names(bc.team, cfg.teams[bc.team].namespace)
        namespace, labels = names.namespace, names.trainjob_labels(team_priority(cfg, bc.team))
        if suspend:
            del labels[QUEUE_LABEL]
        suspend = True
    doc = t.trainjob_document(
        name=name,
        namespace=namespace,
        runtime=training.runtime.name,
        nodes=bc.nodes,
        procs_per_node=facts.gpu_count,
        command=t.BENCH,
        args=t.bench_args(min_busbw_gbps=min_gbps, max_bytes=bc.max_bytes or threshold.message_bytes),
        suspend=suspend,
        workload=t.WORKLOAD_BANDWIDTH,
        labels=labels,
        env=t.BENCH_ENV,
    )
    return doc, basis
