"""``aiplat train why``: one job's story from what the cluster holds (pure).

Why it waits: its Kueue Workload's conditions in words, its place in the queue, the GPUs it needs beyond
what is free, and which admitted jobs hold the quota it waits for. Why it stopped or restarted: each pod
(attempt) with its exit class from the job contract (``trainer/exitcodes.py``, the runtime's failure
policy), the node it ran on and any fault of that node in its window (conditions, GPUs or EFA devices the
device plugins withdrew, warnings such as Karpenter's ``SpotInterrupted``), how the cluster disrupted it,
and the last lines of its log. The callers read the objects (``infra/io/kube_jobs.py``) and the logs.

Kueue's words are v0.19.2's: pkg/scheduler/flavorassigner (``insufficient unused quota for <resource> in
flavor <flavor>, <n> more needed``), pkg/scheduler/preemption (``Preempted to accommodate a workload (UID:
...)``, ``HumanReadablePreemptionReasons``); the pod disruption reasons are Kubernetes'
(https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from infra.core.labels import BUDGET_HOLD_ANNOTATION
from infra.jobs.documents import condition as _condition
from infra.jobs.documents import condition_true as _true
from infra.jobs.documents import parse_time as _time
from infra.queueing.names import PRIORITY_LABEL
from trainer import exitcodes

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
QUOTA_SHORT = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), (?P<more>\S+) more needed"
)
PREEMPTOR_UID = re.compile(r"\(UID: (?P<uid>[^,)]+)")
# How long after a pod ended a node fault still explains it (a node's NotReady is noticed within 40 s).
FAULT_MARGIN = timedelta(minutes=2)

PREEMPTION_WORDS = {
    "InClusterQueue": "a higher-priority job of the same team took its place",
    "InCohortReclamation": "another team reclaimed the quota this team had borrowed",
    "InCohortReclaimWhileBorrowing": "another team (itself borrowing) reclaimed quota this team had borrowed",
    "InCohortFairSharing": "fair sharing gave its quota to another team",
}
EVICTION_WORDS = {
    "Preempted": "preempted by Kueue",
    "PodsReadyTimeout": "its pods were not all ready in time after admission; requeued",
    "InactiveWorkload": "deactivated (spec.active: false, or its timeouts.max_run_s ran out)",
    "DeactivatedDueToRequeuingLimitExceeded": "requeued too often; deactivated",
    "ClusterQueueStopped": "the team's ClusterQueue was stopped by the platform team",
    "LocalQueueStopped": "the team's LocalQueue was stopped",
    "NodeFailures": "a node it ran on failed",
}
DISRUPTION_WORDS = {
    "PreemptionByScheduler": "the scheduler preempted the pod for a higher-priority pod",
    "DeletionByTaintManager": "the node became not ready or unreachable, and its pods were deleted",
    "EvictionByEvictionAPI": "evicted (a node drain, Karpenter's disruption or a Spot interruption)",
    "DeletionByPodGC": "the node was gone, and the pod with it",
    "TerminationByKubelet": "the node shut down, or the kubelet evicted the pod under resource pressure",
}
# A node condition in this state is a fault (Ready is the only one that is good when True).
BAD_CONDITIONS = {
    "Ready": ("False", "Unknown"),
    "MemoryPressure": ("True",),
    "DiskPressure": ("True",),
    "PIDPressure": ("True",),
    "NetworkUnavailable": ("True",),
}


@dataclass(frozen=True)
class Holder:
    """An admitted job holding quota of the flavor a waiting job needs."""

    job: str
    namespace: str
    priority: str
    gpus: int


@dataclass(frozen=True)
class Attempt:
    """One pod of the job: where it ran, how it ended and why."""

    pod: str
    rank: str
    node: str
    started_utc: str
    finished_utc: str
    exit_code: int | None
    exit_class: str  # the job contract's name for the code (exitcodes.NAMES), or "running"
    meaning: str  # what the runtime does with it
    disruption: str  # how the cluster stopped it, in words ("" when it was not disrupted)
    node_faults: list[str] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Why:
    """The answer for one job (``--json``: these fields)."""

    name: str
    namespace: str
    state: str
    summary: str
    details: list[str]
    position: int | None
    holders: list[Holder]
    attempts: list[Attempt]
    skipped: list[str]  # what could not be read, and why
    # what each attempt cost, from its run records (infra/cost/runs.py AttemptCost.as_dict)
    costs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def exit_meaning(code: int | None, disrupted: bool, max_restarts: int | None) -> tuple[str, str]:
    """(class, what the runtime does) of a pod's exit code under the runtime's failure policy
    (``infra/training/documents/runtime.py`` ``failure_policies``, docs/platform/job-contract.md)."""
    if code is None:
        return "running", "still running"
    name = exitcodes.NAMES.get(code, "failure")
    if disrupted:
        return name, "the cluster disrupted the pod: it is replaced, and no failure is counted"
    if code == exitcodes.OK:
        return name, "done"
    if code in exitcodes.FAIL_JOB:
        return name, "bad input (one line in the log names the field): the job fails at once, no restart"
    if code in exitcodes.RESTART_NOT_COUNTED:
        return name, "stopped after a committed checkpoint: the pod is replaced, no failure counted"
    limit = f"at most {max_restarts} times" if max_restarts is not None else "up to the runtime's limit"
    return name, f"a failure: the whole job restarts from its last checkpoint, {limit}"


def _gpus(workload: dict[str, Any], resource: str = GPU) -> int:
    total = 0
    for psa in (workload.get("status", {}).get("admission") or {}).get("podSetAssignments", []) or []:
        total += int(str((psa.get("resourceUsage") or {}).get(resource, "0")) or 0)
    return total


def _flavors(workload: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for psa in (workload.get("status", {}).get("admission") or {}).get("podSetAssignments", []) or []:
        out.update((psa.get("flavors") or {}).values())
    return out


def holders(flavor: str, admitted: list[dict[str, Any]]) -> list[Holder]:
    """The admitted workloads holding ``flavor``'s GPUs, most GPUs first."""
    out = []
    for w in admitted:
        if _true(w, "Admitted") is None or _true(w, "Finished") is not None or flavor not in _flavors(w):
            continue
        meta = w["metadata"]
        owner = next((r.get("name") for r in meta.get("ownerReferences", []) or []), meta["name"])
        priority = w.get("spec", {}).get("priorityClassName") or meta.get("labels", {}).get(
            PRIORITY_LABEL, ""
        )
        out.append(Holder(job=owner, namespace=meta.get("namespace", ""), priority=priority, gpus=_gpus(w)))
    return sorted(out, key=lambda h: (-h.gpus, h.namespace, h.job))


def waiting_story(
    workload: dict[str, Any] | None, position: int | None, others: list[dict[str, Any]]
) -> tuple[str, list[str], list[Holder]]:
    """(summary, details, holders) of a job Kueue has not admitted."""
    if workload is None:
        return (
            "not queued: Kueue has no Workload for it",
            [
                "Kueue creates one within seconds of the job; none after that means no queue label "
                "(kueue.x-k8s.io/queue-name): submit it with aiplat train submit"
            ],
            [],
        )
    reserved = _condition(workload, "QuotaReserved")
    message = str((reserved or {}).get("message") or "")
    details = []
    where = (
        f"position {position} in its team's queue" if position is not None else "its position is not known"
    )
    if not reserved:
        return f"waiting: not evaluated by Kueue yet ({where})", details, []
    found = QUOTA_SHORT.search(message)
    if found is None:
        return f"waiting: {reserved.get('reason', '')}: {message} ({where})", details, []
    flavor, resource, more = found["flavor"], found["resource"], found["more"]
    taken = holders(flavor, others)
    summary = f"waiting for quota: {more} more {resource} needed in flavor {flavor} ({where})"
    if "Pending the preemption" in message:
        details.append(
            "Kueue is preempting lower-priority jobs to make room; it starts when they have stopped"
        )
    if taken:
        total = sum(h.gpus for h in taken)
        details.append(f"{total} GPUs of flavor {flavor} are held by {len(taken)} admitted jobs (below)")
    details.append(
        "it starts when they finish, are preempted by a higher priority, or the team's quota grows "
        "(ask your platform team); fewer nodes need less"
    )
    return summary, details, taken


def budget_hold_story(cluster_queue: dict[str, Any] | None) -> str | None:
    """Why a held ClusterQueue admits nothing, when the budget hold set it (``stopPolicy: Hold`` with its
    annotation); None for a queue that admits, or one an operator stopped."""
    if not cluster_queue or (cluster_queue.get("spec") or {}).get("stopPolicy") != "Hold":
        return None
    month = ((cluster_queue.get("metadata") or {}).get("annotations") or {}).get(BUDGET_HOLD_ANNOTATION)
    if not month:
        return None
    return (
        f"the team's queue is held: it has spent its monthly budget for {month}; new jobs wait until the "
        "month turns or the budget is raised (running jobs go on; docs/how-to/team-spend.md)"
    )


def preemption_story(workload: dict[str, Any] | None, others: list[dict[str, Any]]) -> list[str]:
    """What Kueue's eviction and preemption conditions say, the preemptor named when it is still listed."""
    out = []
    evicted = _condition(workload, "Evicted")
    if evicted is not None and evicted.get("reason"):
        words = EVICTION_WORDS.get(str(evicted["reason"]), str(evicted["reason"]))
        state = "now" if evicted.get("status") == "True" else "last time"
        out.append(f"evicted ({state}, {evicted.get('lastTransitionTime', '')}): {words}")
    preempted = _condition(workload, "Preempted")
    if preempted is not None and preempted.get("reason") in PREEMPTION_WORDS:
        line = PREEMPTION_WORDS[str(preempted["reason"])]
        uid = PREEMPTOR_UID.search(str(preempted.get("message", "")))
        by = next((w for w in others if uid and w["metadata"].get("uid") == uid["uid"]), None)
        if by is not None:
            owner = next((r.get("name") for r in by["metadata"].get("ownerReferences", []) or []), "")
            line += f" (by {by['metadata'].get('namespace', '')}/{owner or by['metadata']['name']})"
        out.append(line)
    for e in (workload or {}).get("status", {}).get("schedulingStats", {}).get("evictions", []) or []:
        out.append(
            f"evictions so far: {e.get('count', 0)} x {e.get('reason', '')} "
            f"{e.get('underlyingCause', '')}".rstrip()
        )
    return out


def node_faults(
    node: dict[str, Any] | None,
    node_events: list[dict[str, Any]],
    start: datetime | None,
    end: datetime | None,
) -> list[str]:
    """What was wrong with the node the pod ran on, within its window (``start`` to ``end`` plus a margin)."""
    if node is None:
        return []
    out = []
    hi = (end + FAULT_MARGIN) if end else None

    def within(t: datetime | None) -> bool:
        if t is None:
            return True
        return (start is None or t >= start) and (hi is None or t <= hi)

    for c in node.get("status", {}).get("conditions", []) or []:
        bad = BAD_CONDITIONS.get(c.get("type", ""))
        if bad and c.get("status") in bad and within(_time(c.get("lastTransitionTime"))):
            out.append(
                f"node condition {c['type']}={c['status']}: "
                f"{c.get('reason', '')} {c.get('message', '')}".strip()
            )
    status = node.get("status", {})
    for resource, what in ((GPU, "GPUs"), (EFA, "EFA devices")):
        cap = int(str(status.get("capacity", {}).get(resource, "0")) or 0)
        alloc = int(str(status.get("allocatable", {}).get(resource, "0")) or 0)
        if cap > alloc:
            cause = " (an XID error: see the GPU dashboard's XID panel)" if resource == GPU else ""
            out.append(f"{cap - alloc} of {cap} {what} withdrawn by the device plugin as unhealthy{cause}")
    for e in node_events:
        when = _time(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
        if e.get("type") == "Warning" and within(when):
            out.append(
                f"node event {e.get('reason', '')}: {e.get('message', '')} "
                f"({e.get('lastTimestamp') or e.get('eventTime') or ''})"
            )
    return out


def attempt_of(
    pod: dict[str, Any],
    *,
    container: str,
    node: dict[str, Any] | None,
    node_events: list[dict[str, Any]],
    pod_events: list[dict[str, Any]],
    log_tail: list[str],
    max_restarts: int | None,
) -> Attempt:
    """One pod's attempt: its container's exit, the cluster's disruption, the node's faults, its log."""
    meta, status = pod["metadata"], pod.get("status", {})
    state: dict[str, Any] = {}
    for cs in status.get("containerStatuses", []) or []:
        if cs.get("name") == container:
            state = cs.get("state", {}).get("terminated") or cs.get("lastState", {}).get("terminated") or {}
            started = (cs.get("state", {}).get("running") or {}).get("startedAt")
            if not state and started:
                state = {"startedAt": started}
    code = state.get("exitCode")
    disruption = _true(pod, "DisruptionTarget")
    words = ""
    if disruption is not None:
        words = DISRUPTION_WORDS.get(str(disruption.get("reason")), str(disruption.get("reason")))
        if disruption.get("message"):
            words += f" ({disruption['message']})"
    elif status.get("reason") in ("Evicted", "NodeLost", "Shutdown", "Terminated"):
        words = f"{status['reason']}: {status.get('message', '')}".strip(": ")
    if state.get("reason") == "OOMKilled":
        words = (
            words + "; " if words else ""
        ) + "out of memory (OOMKilled): the container hit its memory limit"
    klass, meaning = exit_meaning(code, disruption is not None, max_restarts)
    start, end = _time(state.get("startedAt") or status.get("startTime")), _time(state.get("finishedAt"))
    faults = node_faults(node, node_events, start, end)
    for e in pod_events:
        if e.get("type") == "Warning" and e.get("involvedObject", {}).get("name") == meta["name"]:
            faults.append(f"pod event {e.get('reason', '')}: {e.get('message', '')}")
    labels = meta.get("labels", {}) or {}
    return Attempt(
        pod=meta["name"],
        rank=str(labels.get("batch.kubernetes.io/job-completion-index", "")),
        node=str(pod.get("spec", {}).get("nodeName") or ""),
        started_utc=str(state.get("startedAt") or status.get("startTime") or ""),
        finished_utc=str(state.get("finishedAt") or ""),
        exit_code=code,
        exit_class=klass,
        meaning=meaning,
        disruption=words,
        node_faults=faults,
        log_tail=log_tail,
    )


def job_summary(trainjob: dict[str, Any], workload: dict[str, Any] | None) -> tuple[str, str]:
    """(state, one line) of a job that Kueue admitted at least once."""
    for kind, state in (("Complete", "finished"), ("Failed", "failed")):
        if (c := _true(trainjob, kind)) is not None:
            return state, f"{state}: {c.get('reason', '')}: {c.get('message', '')}".rstrip(": ")
    if _true(workload, "Evicted") is not None and _true(workload, "Admitted") is None:
        return "evicted", "evicted: waiting to be admitted again, from its last checkpoint"
    if _true(workload, "Admitted") is not None:
        if _true(workload, "PodsReady") is not None:
            return "running", "running: admitted, every pod ready"
        ready = _condition(workload, "PodsReady")
        return (
            "admitted",
            f"admitted, pods starting: {(ready or {}).get('message') or 'not all pods ready yet'}",
        )
    return "waiting", "waiting"
