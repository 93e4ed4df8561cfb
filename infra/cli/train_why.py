"""``aiplat train why NAME``: why a job waits, or why it stopped or restarted, from its Kueue Workload, the
other admitted Workloads of its flavor, its pods, their events and nodes, and the stored logs of pods that
are gone (CloudWatch Logs). The story itself is ``infra/jobs/why.py``; this module reads and prints."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from infra.cli.common import EXIT_OK
from infra.cli.train_jobs import (
    JOBSET_NAME_LABEL,
    _add_access,
    _attempts,
    _aws,
    _connect,
    _stack,
    _teams,
    add_job_selection,
)
from infra.core.errors import JobNotFoundError
from infra.core.trainjobs import REPLICATED_JOB
from infra.jobs import documents as jobs
from infra.jobs import why as w
from infra.queueing.names import TeamNames, team_names
from infra.schema.platform import PlatformConfig


def add_parser(cmds: argparse._SubParsersAction) -> None:
    y = cmds.add_parser(
        "why",
        help="why a job waits, or why it stopped or restarted (queue, quota, exits, node faults, logs)",
        description="Explain one TrainJob. Waiting: its Kueue Workload's conditions in words, its position, "
        "the GPUs it needs beyond what is free and the admitted jobs holding them. Admitted once: each pod "
        "(attempt) with its exit class from the job contract, the node and any fault of that node in its "
        "window (conditions, GPUs or EFA devices withdrawn as unhealthy, warnings such as SpotInterrupted), "
        "how the cluster disrupted it, Kueue's evictions and preemptions, and the last log lines (CloudWatch "
        "Logs once the pods are gone), and what each attempt cost from its run record (GPU hours x the "
        "node-hour price of its pool's type and purchase option / the node's GPUs, or why it has no "
        "cost). What your access cannot read is listed as skipped. Exit 0; "
        "6 AWS credentials or AWS unreachable; 7 no cluster access; 8 unknown team; 11 no such job.",
    )
    add_job_selection(y)
    y.add_argument("--lines", type=int, default=10, help="log lines per attempt (default 10; 0: none)")
    y.add_argument("--json", action="store_true", help="one JSON object")
    _add_access(y)
    y.set_defaults(run=run_why)


def _log_tail(aws: Any, cluster: Any, namespace: str, pod: str, lines: int) -> tuple[list[str], str]:
    """The last ``lines`` of the pod's trainer container from CloudWatch Logs (the collector's copy, kept
    after the pod is gone), or why none."""
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io import kube_jobs as k

    if lines <= 0:
        return [], ""
    try:
        logs = aws.client("logs")
        streams = k.stored_log_streams(logs, cluster.name, namespace, pod, REPLICATED_JOB)
        tail: list[str] = []
        for stream in streams:
            tail = (tail + list(k.stored_log(logs, cluster.name, namespace, stream)))[-lines:]
    except (ClientError, BotoCoreError) as exc:
        return [], f"log of {pod}: CloudWatch Logs: {exc}"
    return tail, "" if streams else f"log of {pod}: nothing stored (yet)"


def explain(
    cfg: PlatformConfig,
    cluster: Any,
    aws: Any,
    args: argparse.Namespace,
    teams: list[TeamNames],
    err: Console,
) -> w.Why:
    """Read what the cluster and the log store hold of job ``args.name`` and tell its story."""
    from infra.io import kube_jobs as k

    trainjob, owner = None, None
    for owner in teams:
        try:
            trainjob = k.get_trainjob(cluster, owner.namespace, args.name)
            break
        except JobNotFoundError:
            continue
    if trainjob is None or owner is None:
        raise JobNotFoundError(
            f"NAME: no TrainJob {args.name!r} in {', '.join(t.namespace for t in teams)}; fix: check the "
            "name and --team (aiplat train list)"
        )
    namespace = owner.namespace
    skipped: list[str] = []
    own = k.list_objects(cluster, namespace, k.KUEUE_GROUP, k.KUEUE_VERSION, k.WORKLOADS)
    workload = jobs.owned_workload(trainjob, own)
    # every team's Workloads: who holds the quota (a cohort spans the teams)
    others: list[dict[str, Any]] = []
    every = {team_names(n, c.namespace).namespace for n, c in cfg.teams.items()}
    for ns in sorted(every | {namespace}):
        try:
            others += (
                own
                if ns == namespace
                else k.list_objects(cluster, ns, k.KUEUE_GROUP, k.KUEUE_VERSION, k.WORKLOADS)
            )
        except Exception as exc:  # another team's namespace: a member's role does not reach it
            skipped.append(f"workloads of {ns}: {' '.join(str(exc).split())[:160]}")
    state, summary = w.job_summary(trainjob, workload)
    details: list[str] = []
    holders: list[w.Holder] = []
    position = None
    if state == "waiting":
        labels = trainjob["metadata"].get("labels", {}) or {}
        queue = labels.get("kueue.x-k8s.io/queue-name", "")
        pending = k.pending_positions(cluster, namespace, queue) if queue and workload else None
        if pending is None and workload is not None:
            skipped.append(f"position in {namespace}/{queue}: Kueue's visibility API did not answer")
        mine = (pending or {}).get(workload["metadata"]["name"]) if workload else None
        position = mine.get("positionInLocalQueue") if mine else None
        summary, details, holders = w.waiting_story(
            workload, position, [o for o in others if o is not workload]
        )
        queue_obj, why = k.read_cluster_queue(cluster, owner.cluster_queue)
        if why:
            skipped.append(why)
        held = w.budget_hold_story(queue_obj)
        if held:
            details.insert(0, held)
    details += w.preemption_story(workload, others)
    attempts = []
    pods = k.list_pods(cluster, namespace, f"{JOBSET_NAME_LABEL}={args.name}")
    events = k.list_events(cluster, namespace) if pods else []
    nodes: dict[str, tuple[dict[str, Any] | None, list[dict[str, Any]]]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", "")):
        name = pod.get("spec", {}).get("nodeName") or ""
        if name and name not in nodes:
            node, why = k.read_node(cluster, name)
            if why:
                skipped.append(why)
            node_events, why = k.node_events(cluster, name)
            if why:
                skipped.append(why)
            nodes[name] = (node, node_events)
        node, node_events = nodes.get(name, (None, []))
        tail, why = _log_tail(aws, cluster, namespace, pod["metadata"]["name"], args.lines)
        if why:
            skipped.append(why)
        attempts.append(
            w.attempt_of(
                pod,
                container=REPLICATED_JOB,
                node=node,
                node_events=node_events,
                pod_events=events,
                log_tail=tail,
                max_restarts=cfg.training.runtime.max_restarts if cfg.training else None,
            )
        )
    costs = [a.as_dict() for a in _attempts(trainjob, err, args.stack)]
    return w.Why(
        name=args.name,
        namespace=namespace,
        state=state,
        summary=summary,
        details=details,
        position=position,
        holders=holders,
        attempts=attempts,
        skipped=skipped,
        costs=costs,
    )


def cost_line(c: dict[str, Any]) -> str:
    """``28.000 GPU hours x 6.8800/GPU-h (p5.48xlarge on_demand, pool train; source karpenter) = 192.64 USD``,
    or why the attempt has no cost."""
    if c["usd"] is None:
        return f"not priced: {c['unknown']}"
    where = f"{c['instance_type']} {c['purchase_option']}, pool {c['pool']}; source {c['source']}"
    rate = f"{c['usd_per_gpu_hour']:,.4f}/GPU-h"
    return f"{c['gpu_hours']:,.3f} GPU hours x {rate} ({where}) = {c['usd']:,.2f} USD"


def render(why: w.Why, console: Console) -> None:
    def say(line: str = "", indent: int = 0) -> None:
        console.print(" " * indent + line, markup=False, highlight=False, soft_wrap=True)

    say(f"{why.namespace}/{why.name}: {why.summary}")
    for line in why.details:
        say(line, 2)
    if why.holders:
        say("holding the quota it waits for:", 2)
        for h in why.holders:
            say(f"{h.namespace}/{h.job}: {h.gpus} GPUs, priority {h.priority or '-'}", 4)
    for a in why.attempts:
        code = "running" if a.exit_code is None else f"exit {a.exit_code} ({a.exit_class})"
        say(f"attempt {a.pod} (rank {a.rank or '?'}) on node {a.node or '-'}: {code}: {a.meaning}")
        say(f"{a.started_utc or '?'} to {a.finished_utc or 'now'}", 2)
        if a.disruption:
            say(f"stopped by the cluster: {a.disruption}", 2)
        for f in a.node_faults:
            say(f"fault: {f}", 2)
        if a.log_tail:
            say("last log lines:", 2)
            for line in a.log_tail:
                say(line, 4)
    for c in why.costs:
        say(f"cost of attempt {c['attempt']} ({c['ended_utc'] or 'no end record'}): {cost_line(c)}")
    for s in why.skipped:
        say(f"skipped: {s}")


def run_why(args: argparse.Namespace, console: Console, err: Console) -> int:
    cfg = _stack(args)
    aws = _aws(cfg)
    cluster = _connect(cfg, args, aws)
    why = explain(cfg, cluster, aws, args, _teams(cfg, args), err)
    if args.json:
        console.out(json.dumps(why.as_dict(), indent=1), highlight=False)
    else:
        render(why, console)
    return EXIT_OK
