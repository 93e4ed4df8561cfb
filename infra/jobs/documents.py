"""What ``aiplat train submit`` sends and how ``aiplat train list`` reads the cluster's answers (pure), and
the TrainJob of a job file (``aiplat train render/submit -f job.yaml``: ``job_trainjob``).

A submitted TrainJob is the one ``aiplat train render`` prints, put in the team's namespace and LocalQueue
with a WorkloadPriorityClass (``infra/queueing/names.py``), created suspended for Kueue to admit, and
annotated with who submitted it, the trainer config's sha256 and the runtime image's digest. Its pods get
the queue, priority, submitter and submission time too, through a runtime patch, because the pod (and so
the run record, ``trainer/run/runrecord.py``) can read only its own labels and annotations (downward API).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from infra.core.facts import InstanceFacts
from infra.core.trainjobs import REPLICATED_JOB, SUBMITTED_AT_ANNOTATION, SUBMITTED_BY_ANNOTATION
from infra.cost.runs import AttemptCost
from infra.jobs.config import PLATFORM_TRAINER_IMAGE, JobSpec, Launcher
from infra.queueing.names import PRIORITY_LABEL, QUEUE_LABEL, TEAM_LABEL, TeamNames, team_names
from infra.training.documents import runtime as t
from infra.training.documents.stack import CHECKPOINT_URI_ENV, team_job_env, team_priority

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

SUBMITTED_BY = SUBMITTED_BY_ANNOTATION  # the STS caller ARN of whoever ran `aiplat train submit`
CONFIG_SHA256 = "aiplat.io/config-sha256"  # sha256 of the trainer config file's (or the job file's) bytes
IMAGE_DIGEST = "aiplat.io/image-digest"  # the training runtime's image digest when it was submitted
SUBMITTED_AT = SUBMITTED_AT_ANNOTATION
SUBMIT_PATCH_MANAGER = "aiplat.io/submit"  # runtimePatches is a map keyed by manager
CHECKPOINT_ARG = "checkpoint.uri="  # the launcher's --set override of the run's checkpoint root


JOB_PATCH_MANAGER = "aiplat.io/job"  # the job file's own runtime patch (the pods' grace period)
# Kueue's limit on the time a workload is admitted, summed over its admissions (v0.19.2
# pkg/controller/constants/constants.go MaxExecTimeSecondsLabel; past it the Workload is deactivated).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
TORCHRUN = "torchrun"
# torchrun forwards SIGTERM to the ranks at once and kills them its shutdown timeout later: 30 s unless
# TORCH_ELASTIC_SHUTDOWN_TIMEOUT says otherwise (torch 2.13 torch/distributed/launcher/api.py LaunchConfig;
# a torchrun without the setting ignores the variable, where a flag would stop it). It is set to the
# preemption window less this margin, so the ranks get the window and torchrun exits before SIGKILL.
TORCHRUN_SHUTDOWN_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"
TORCHRUN_EXIT_MARGIN_S = 5


@dataclass(frozen=True)
class TeamJobSettings:
    """What a team's TrainJob carries on the stack, whoever builds it (a job file, or the Kubeflow SDK in a
    notebook: docs/how-to/kubeflow-sdk.md): its namespace, the runtime, the queue and priority labels, the
    env contract, and torchrun's options for the runtime's rendezvous."""

    name: str
    namespace: str
    runtime: str
    labels: dict[str, str]
    env: dict[str, str]
    torchrun_args: list[str]
    preemption_window_s: int
    # the whole job, for the Kubeflow SDK (``infra.cli.train_build.team_job``): what render -f would give it
    image: str | None = None
    nodes: int = 1
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    active_deadline_s: int | None = None


def team_job_settings(
    cfg: PlatformConfig,
    *,
    team: str,
    name: str,
    image: str | None = None,
    data: str | None = None,
    checkpoints: str | None = None,
    priority: str | None = None,
    max_restarts: int | None = None,
    runtime_grace_s: int,
    preemption_window_s: int | None = None,
) -> TeamJobSettings:
    """The settings of ``team``'s job ``name``: its namespace and LocalQueue at ``priority`` (default: the
    team's), the env contract (``team_job_env``); for an ``image`` of the team's by digest, its digest as
    AIPLAT_IMAGE_DIGEST (the runtime's is the trainer image's); its preemption window (default: the
    runtime's pods' grace period, ``runtime_grace_s``), as AIPLAT_PREEMPTION_WINDOW_S when it differs, and
    torchrun's shutdown timeout within it. KeyError for a team the stack lacks."""
    training = cfg.training
    if training is None:
        raise ValueError("the stack has no training section")
    names = team_names(team, cfg.teams[team].namespace)
    env = team_job_env(cfg, team=team, job=name, data=data, checkpoints=checkpoints)
    if image is not None and image != PLATFORM_TRAINER_IMAGE:
        env[t.IMAGE_DIGEST_ENV] = t.image_digest(image)
    window = runtime_grace_s if preemption_window_s is None else preemption_window_s
    if window != runtime_grace_s:
        env[t.PREEMPTION_WINDOW_ENV] = str(window)
    env[TORCHRUN_SHUTDOWN_ENV] = str(max(window - TORCHRUN_EXIT_MARGIN_S, 1))
    restarts = training.runtime.worker_restarts if max_restarts is None else max_restarts
    return TeamJobSettings(
        name=name,
        namespace=names.namespace,
        runtime=training.runtime.name,
        labels=names.trainjob_labels(team_priority(cfg, team, priority)),
        env=env,
        torchrun_args=t.rendezvous_args(worker_restarts=restarts),
        preemption_window_s=window,
    )


def job_trainjob(
    cfg: PlatformConfig,
    spec: JobSpec,
    facts: InstanceFacts,
    *,
    runtime_grace_s: int,
    gpus_per_node: int | None = None,
) -> dict[str, Any]:
    """The TrainJob of a job file's job on the stack's runtime: in the team's namespace and LocalQueue at
    its priority, created suspended for Kueue; the team's image by digest (the runtime's for
    ``image: trainer``, whose digest the runtime's AIPLAT_IMAGE_DIGEST already carries); the env contract
    (``team_job_settings``, the job's own env after it); the preemption window as the pods' grace period (a
    runtime patch) and AIPLAT_PREEMPTION_WINDOW_S; Kueue's and the Trainer's time limits. ``spec`` must have
    passed ``infra/jobs/rules.py`` (the team and priority exist)."""
    job = team_job_settings(
        cfg,
        team=spec.team,
        name=spec.name,
        image=spec.image,
        data=spec.data,
        checkpoints=spec.checkpoints,
        priority=spec.priority,
        max_restarts=spec.max_restarts,
        runtime_grace_s=runtime_grace_s,
        preemption_window_s=spec.timeouts.preemption_window_s,
    )
    labels = dict(job.labels)
    if spec.timeouts.max_run_s is not None:
        labels[MAX_EXEC_TIME_LABEL] = str(spec.timeouts.max_run_s)
    env = dict(job.env)
    if spec.launcher is Launcher.torchrun:
        command, args = [TORCHRUN], [*job.torchrun_args, *spec.command]
    else:
        command, args = [spec.command[0]], list(spec.command[1:])
    doc = t.trainjob_document(
        name=spec.name,
        namespace=job.namespace,
        runtime=job.runtime,
        nodes=spec.nodes,
        procs_per_node=gpus_per_node or facts.gpu_count,
        command=command,
        args=args,
        suspend=True,
        labels=labels,
        env={**env, **spec.env},
        image=None if spec.image == PLATFORM_TRAINER_IMAGE else spec.image,
    )
    if spec.timeouts.active_deadline_s is not None:
        doc["spec"]["activeDeadlineSeconds"] = spec.timeouts.active_deadline_s
    if job.preemption_window_s != runtime_grace_s:
        pod_spec = {"terminationGracePeriodSeconds": job.preemption_window_s}
        doc["spec"].setdefault("runtimePatches", []).append(
            {
                "manager": JOB_PATCH_MANAGER,
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": REPLICATED_JOB,
                                    "template": {"spec": {"template": {"spec": pod_spec}}},
                                }
                            ]
                        }
                    }
                },
            }
        )
    return doc


def config_sha256(data: bytes) -> str:
    """The hash that names a trainer config's content."""
    return hashlib.sha256(data).hexdigest()


def utc_iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def image_digest(image: str) -> str | None:
    """``sha256:...`` of an image reference pinned by digest (``repo@sha256:...``); None otherwise."""
    _, at, digest = image.partition("@")
    return digest if at and digest.startswith("sha256:") else None


def runtime_image(runtime: dict[str, Any]) -> str | None:
    """The trainer container's image in a ClusterTrainingRuntime as the cluster has it."""
    for rj in runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
        if rj.get("name") != REPLICATED_JOB:
            continue
        pod = rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            if c.get("name") == REPLICATED_JOB:
                return str(c.get("image"))
    return None


def submitted_trainjob(
    doc: dict[str, Any],
    *,
    names: TeamNames,
    priority: str,
    submitter_arn: str,
    config_hash: str,
    digest: str | None,
    submitted_at: datetime,
) -> dict[str, Any]:
    """``doc`` (a rendered TrainJob) as it is submitted: team namespace, queue labels, annotations, and
    suspended: Kueue admits it by unsuspending it (https://kueue.sigs.k8s.io/docs/tasks/run/trainjobs/)."""
    out = copy.deepcopy(doc)
    meta = out["metadata"]
    queue = names.trainjob_labels(priority)
    meta["namespace"] = names.namespace
    meta["labels"] = {**meta.get("labels", {}), **queue, TEAM_LABEL: names.team}
    meta["annotations"] = {
        **meta.get("annotations", {}),
        SUBMITTED_BY: submitter_arn,
        CONFIG_SHA256: config_hash,
        SUBMITTED_AT: utc_iso(submitted_at),
        **({IMAGE_DIGEST: digest} if digest else {}),
    }
    out["spec"]["suspend"] = True
    pod_meta = {
        "labels": {**queue, TEAM_LABEL: names.team},
        "annotations": {SUBMITTED_AT: utc_iso(submitted_at), SUBMITTED_BY: submitter_arn},
    }
    out["spec"].setdefault("runtimePatches", []).append(
        {
            "manager": SUBMIT_PATCH_MANAGER,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": REPLICATED_JOB,
                                "template": {"spec": {"template": {"metadata": pod_meta}}},
                            }
                        ]
                    }
                }
            },
        }
    )
    return out


def checkpoint_root(trainjob: dict[str, Any]) -> str | None:
    """The run's checkpoint root (where its checkpoints and run records are): from the launcher arguments
    it was created with, else a team job's ``AIPLAT_CHECKPOINT_URI`` (the job contract)."""
    trainer = trainjob.get("spec", {}).get("trainer", {})
    roots = [a[len(CHECKPOINT_ARG) :] for a in trainer.get("args", []) if a.startswith(CHECKPOINT_ARG)]
    if roots:
        return roots[-1]
    env = {e.get("name"): e.get("value") for e in trainer.get("env", []) or []}
    return (env.get(CHECKPOINT_URI_ENV) or "").rstrip("/") or None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition ``kind`` of an object's status (None: no object, or no such condition)."""
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def condition_true(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition ``kind`` when its status is True."""
    c = condition(obj, kind)
    return c if c is not None and c.get("status") == "True" else None


def owned_workload(trainjob: dict[str, Any], workloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Kueue Workload whose owner is ``trainjob`` (Kueue creates one per job, owned by it)."""
    uid = trainjob.get("metadata", {}).get("uid")
    name = trainjob["metadata"]["name"]
    for w in workloads:
        for ref in w.get("metadata", {}).get("ownerReferences", []) or []:
            if ref.get("kind") == "TrainJob" and (ref.get("uid") == uid if uid else ref.get("name") == name):
                return w
    return None


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time of the API (``...Z``), or None."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _age(seconds: float) -> str:
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


@dataclass(frozen=True)
class JobRow:
    """One line of ``aiplat train list`` (``--json``: these fields)."""

    name: str
    team: str
    namespace: str
    queue: str
    priority: str
    state: str  # waiting, admitted, running, evicted, finished, failed, suspended, not-queued
    reason: str  # why it waits (the Workload's condition message), or how it ended
    position: int | None  # in the LocalQueue, from 0 (Kueue's visibility API), while it waits
    cluster_queue_position: int | None
    nodes: int
    age: str
    created_utc: str
    admitted_utc: str | None
    waited_s: int | None  # from creation to admission
    last_checkpoint_step: int | None
    submitted_by: str
    image_digest: str  # the aiplat.io/image-digest annotation: the image the job runs
    gpu_hours: float | None  # GPU time admitted so far, every admission counted (``gpu_hours``)
    # what its attempts cost, from their run records (infra/cost/runs.py): the sum of those priced (None:
    # none priced) and each attempt's cost or why it has none
    cost_usd: float | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cost(self) -> str:
        """``192.64``; ``+?`` when an attempt has no cost; "" without records."""
        if not self.attempts:
            return ""
        unknown = any(a["usd"] is None for a in self.attempts)
        return f"{self.cost_usd or 0:,.2f}" + ("+?" if unknown else "")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_state(trainjob: dict[str, Any], workload: dict[str, Any] | None) -> tuple[str, str]:
    """(state, reason) from the TrainJob's conditions (Trainer: Complete, Failed) and its Workload's (Kueue:
    Finished, Evicted, Admitted, QuotaReserved, PodsReady; v0.19.2 workload_types.go)."""
    for kind, state in (("Complete", "finished"), ("Failed", "failed")):
        if (c := condition_true(trainjob, kind)) is not None:
            return state, str(c.get("message") or c.get("reason") or "")
    if workload is None:
        return "not-queued", "no Kueue Workload yet (Kueue creates it within seconds; none: no queue label)"
    if (c := condition_true(workload, "Finished")) is not None:
        return "finished", str(c.get("message") or c.get("reason") or "")
    c = condition_true(workload, "Evicted")
    if c is not None and condition_true(workload, "Admitted") is None:
        return "evicted", f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")
    if condition_true(workload, "Admitted") is not None:
        if condition_true(workload, "PodsReady") is not None:
            return "running", ""
        ready = condition(workload, "PodsReady")
        return "admitted", str((ready or {}).get("message") or "waiting for all pods to be ready")
    reserved = condition(workload, "QuotaReserved")
    if reserved is not None:
        return "waiting", f"{reserved.get('reason', '')}: {reserved.get('message', '')}".strip(": ")
    return "waiting", "not evaluated by Kueue yet"


def gpu_hours(trainjob: dict[str, Any], workload: dict[str, Any] | None, now: datetime) -> float | None:
    """The GPU hours a job has held: the time its Kueue Workload was admitted, over every admission
    (``status.accumulatedPastExecutionTimeSeconds``, which Kueue adds each admission to when it ends, plus the
    current one, up to its end when the Workload finished), times nodes times GPUs (processes) per node.
    None before any admission, or without numProcPerNode (a TrainJob that leaves it to the runtime).
    Kueue v0.19.2 apis/kueue/v1beta2/workload_types.go, pkg/workload/admissionchecks.go."""
    trainer = trainjob.get("spec", {}).get("trainer", {})
    per_node = trainer.get("numProcPerNode")
    if workload is None or not isinstance(per_node, int):
        return None
    seconds = float(workload.get("status", {}).get("accumulatedPastExecutionTimeSeconds") or 0)
    admitted = condition_true(workload, "Admitted")
    if admitted is not None:
        since = parse_time(admitted.get("lastTransitionTime"))
        finished = condition_true(workload, "Finished")
        until = parse_time(finished.get("lastTransitionTime")) if finished else now
        if since is not None and until is not None:
            seconds += max((until - since).total_seconds(), 0)
    if seconds == 0 and admitted is None:
        return None
    return round(seconds * int(trainer.get("numNodes", 1)) * per_node / 3600, 3)


def _priced_sum(attempts: Sequence[AttemptCost]) -> float | None:
    priced = [a.usd for a in attempts if a.usd is not None]
    return round(sum(priced), 6) if priced else None


def job_row(
    trainjob: dict[str, Any],
    workload: dict[str, Any] | None,
    pending: dict[str, dict[str, Any]] | None,
    *,
    team: str,
    last_step: int | None,
    now: datetime,
    attempts: Sequence[AttemptCost] = (),
) -> JobRow:
    """The list line of one TrainJob from what the cluster says of it and of its Workload, and what its
    attempts cost (their run records)."""
    meta = trainjob["metadata"]
    labels = meta.get("labels", {}) or {}
    created = parse_time(meta.get("creationTimestamp"))
    state, reason = job_state(trainjob, workload)
    admitted = condition_true(workload, "Admitted") if workload else None
    admitted_at = parse_time(admitted.get("lastTransitionTime")) if admitted else None
    position = cq_position = None
    if workload is not None and pending and state == "waiting":
        p = pending.get(workload["metadata"]["name"])
        if p is not None:
            position, cq_position = p.get("positionInLocalQueue"), p.get("positionInClusterQueue")
    return JobRow(
        name=meta["name"],
        team=team,
        namespace=meta.get("namespace", ""),
        queue=labels.get(QUEUE_LABEL, ""),
        priority=labels.get(PRIORITY_LABEL, ""),
        state=state,
        reason=reason,
        position=position,
        cluster_queue_position=cq_position,
        nodes=int(trainjob.get("spec", {}).get("trainer", {}).get("numNodes", 0)),
        age=_age((now - created).total_seconds()) if created else "",
        created_utc=utc_iso(created) if created else "",
        admitted_utc=utc_iso(admitted_at) if admitted_at else None,
        waited_s=int((admitted_at - created).total_seconds()) if admitted_at and created else None,
        last_checkpoint_step=last_step,
        submitted_by=(meta.get("annotations", {}) or {}).get(SUBMITTED_BY, ""),
        image_digest=(meta.get("annotations", {}) or {}).get(IMAGE_DIGEST, ""),
        gpu_hours=gpu_hours(trainjob, workload, now),
        cost_usd=round(sum(priced), 6)
        if (priced := [a.usd for a in attempts if a.usd is not None])
        else None,
        attempts=[a.as_dict() for a in attempts],
    )
